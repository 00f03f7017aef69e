"""Hardening II (issue 30): each test feeds what a hostile or careless user would, and checks the refusal.

Tests share the style of `test_failures.py`: one broken input, the one-line
error it must give, and what must be kept.
"""

import numpy as np
import pytest
import tensorflow as tf

from paths import CONFIGS

SEQ = 8
PREDICTIONS = 2
VOCAB = 8000  # configs/albert_tiny.json


def tiny_pretrainer():
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.pretrainer import AlbertPretrainer

    return AlbertPretrainer(AlbertBackbone.from_albert_config(str(CONFIGS / "albert_tiny.json")))


def good_request(batch):
    rng = np.random.default_rng(0)
    return {
        "input_ids": rng.integers(5, VOCAB, (batch, SEQ)).astype("int32"),
        "input_mask": np.ones((batch, SEQ), "int32"),
        "segment_ids": (np.arange(SEQ) >= SEQ // 2).astype("int32") * np.ones((batch, SEQ), "int32"),
        "masked_lm_positions": np.tile(np.array([1, 3], "int32"), (batch, 1)),
    }


def with_value(request, name, value):
    changed = {k: v.copy() for k, v in request.items()}
    changed[name][0, 1] = value
    return changed


# Values the model would misread: Keras' take wraps negatives, TF broadcasts batch 1.
BAD_VALUES = [
    ("input_ids", -7),
    ("input_ids", VOCAB),
    ("segment_ids", -1),
    ("segment_ids", 2),
    ("input_mask", -1),
    ("input_mask", 2),
    ("masked_lm_positions", -1),
    ("masked_lm_positions", SEQ),
]


@pytest.fixture(scope="module")
def pretrainer():
    return tiny_pretrainer()


@pytest.fixture(scope="module")
def served(pretrainer, tmp_path_factory):
    from albert_tf.export import export_saved_model

    path = export_saved_model(pretrainer, str(tmp_path_factory.mktemp("served")), warmup=False, max_seq_length=16)
    return tf.saved_model.load(path).signatures["serving_default"]


def call(signature, request):
    return signature(**{name: tf.constant(value) for name, value in request.items()})


@pytest.mark.parametrize("name,value", BAD_VALUES)
def test_serving_default_refuses_values_out_of_range_and_keeps_serving(pretrainer, served, name, value):
    request = good_request(2)
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"{name}: every value must be in"):
        call(served, with_value(request, name, value))
    expected = pretrainer(request, training=False)["mlm_logits"]
    np.testing.assert_allclose(call(served, request)["mlm_logits"], expected, atol=1e-5)


@pytest.mark.parametrize(
    "name,shape",
    [
        ("input_mask", (1, SEQ)),
        ("segment_ids", (1, SEQ)),
        ("input_mask", (2, SEQ - 3)),
        ("masked_lm_positions", (1, 2)),
    ],
)
def test_serving_default_refuses_mismatched_batch_and_length(served, name, shape):
    request = good_request(2)
    request[name] = request[name][: shape[0], : shape[1]]
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"{name} must have the (shape|batch size) of input_ids"):
        call(served, request)


@pytest.fixture(scope="module")
def tflite_file(pretrainer, tmp_path_factory):
    from albert_tf.export import export_tflite

    return export_tflite(
        pretrainer, str(tmp_path_factory.mktemp("tflite")), max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS
    )


@pytest.mark.parametrize("name,value", BAD_VALUES)
def test_tflite_file_refuses_values_out_of_range(pretrainer, tflite_file, name, value):
    from ai_edge_litert.interpreter import Interpreter

    from albert_tf.export import run_tflite
    from albert_tf.export.input_checks import ServingInputError

    request = good_request(1)
    bad = with_value(request, name, value)
    # The file alone (an app's interpreter): builtin GATHER's bounds check refuses it.
    runner = Interpreter(model_path=tflite_file).get_signature_runner("serving_default")
    with pytest.raises(RuntimeError, match="gather index out of bounds"):
        runner(**bad)
    # Our runner names the input before invoking.
    with pytest.raises(ServingInputError, match=f"^{name}: {value} at \\[0, 1\\] is outside"):
        run_tflite(tflite_file, bad)
    # Valid values are unchanged by the guard.
    expected = pretrainer(request, training=False)["mlm_logits"]
    np.testing.assert_allclose(runner(**request)["mlm_logits"], expected, atol=1e-4)


def test_run_tflite_refuses_other_shapes_naming_the_input(tflite_file):
    from albert_tf.export import run_tflite
    from albert_tf.export.input_checks import ServingInputError

    request = good_request(2)
    with pytest.raises(ServingInputError, match=r"input_ids: shape \(2, 8\), but the file takes \(1, 8\)"):
        run_tflite(tflite_file, request)
    request = good_request(1)
    del request["segment_ids"]
    with pytest.raises(ServingInputError, match=r"missing \['segment_ids'\]"):
        run_tflite(tflite_file, request)


# ---- defect 6: predict --output_file that is --input_file ----------------------------------------
def test_predict_refuses_an_output_file_that_is_the_input_file(tmp_path, monkeypatch):
    from albert_tf.predict import PredictError, run

    lines = tmp_path / "lines.txt"
    lines.write_text("one line\nanother line\n")
    (tmp_path / "link.txt").symlink_to(lines)
    os_link = tmp_path / "hard.txt"
    os_link.hardlink_to(lines)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    for output in (
        str(lines),
        "../lines.txt",
        str(tmp_path / "sub" / ".." / "lines.txt"),
        "../link.txt",
        "../hard.txt",
    ):
        with pytest.raises(PredictError, match="is --input_file .* it would be overwritten"):
            run("no-model-needed", input_file=str(lines), output_file=output)
    assert lines.read_text() == "one line\nanother line\n"


# ---- defect 7: one GLUE field over csv's 131,072-character limit ---------------------------------
@pytest.mark.realdata
def test_glue_field_over_the_csv_limit_is_a_skipped_row(real_data, tmp_path):
    from albert_tf.tasks import glue

    lines = (real_data / "glue" / "RTE" / "dev.tsv").read_text(encoding="utf-8").splitlines()
    index, sentence1, sentence2, label = lines[3].split("\t")
    huge = "\t".join([index, sentence1 + " word" * 40_000, sentence2, label])
    (tmp_path / "dev.tsv").write_text("\n".join(lines[:3] + [huge] + lines[4:9]) + "\n", encoding="utf-8")
    examples, report = glue.read_examples(glue.TASKS["rte"], str(tmp_path / "dev.tsv"), "dev")
    assert report.skipped == 1 and report.rows == 8 and len(examples) == 7
    assert report.first_problems == [f"{tmp_path / 'dev.tsv'}:4: a field longer than 131,072 characters"]
    originals, _ = glue.read_examples(glue.TASKS["rte"], str(real_data / "glue" / "RTE" / "dev.tsv"), "dev")
    kept = originals[:2] + originals[3:8]
    assert [(e.text_a, e.label) for e in examples] == [(e.text_a, e.label) for e in kept]
