"""TFLite files of any length (issue 39): `[1, S]` inputs for every S up to `max_seq_length`, checked against Keras."""

import numpy as np
import pytest

from paths import REPO

MAX_SEQ = 48
LENGTHS = (1, 5, 16, 37, MAX_SEQ)
# Per variant: the largest difference from Keras allowed at every length (random tiny weights).
TOLERANCES = {"none": 1e-4, "float16": 5e-3, "dynamic_int8": 5e-2}


@pytest.fixture(scope="module")
def pretrainer():
    import keras

    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.pretrainer import AlbertPretrainer

    keras.utils.set_random_seed(3)
    return AlbertPretrainer(AlbertBackbone.from_albert_config(str(REPO / "configs" / "albert_tiny.json")))


@pytest.fixture(scope="module")
def files(pretrainer, tmp_path_factory):
    from albert_tf.export import export_tflite

    output = str(tmp_path_factory.mktemp("tflite_lengths"))
    return {q: export_tflite(pretrainer, output, q, max_seq_length=MAX_SEQ) for q in TOLERANCES}


def request(length, seed=0):
    rng = np.random.default_rng(seed + length)
    return {
        "input_ids": rng.integers(5, 8000, (1, length)).astype("int32"),
        "input_mask": np.ones((1, length), "int32"),
        "segment_ids": (np.arange(length) >= length // 2).astype("int32")[None],
        "masked_lm_positions": rng.integers(0, length, (1, 3)).astype("int32"),
    }


@pytest.mark.slow
def test_every_variant_takes_any_length_and_matches_keras(pretrainer, files):
    from albert_tf.export import run_tflite
    from albert_tf.tflite_file import max_seq_length_of

    for quantize, path in files.items():
        assert max_seq_length_of(path) == MAX_SEQ
        for length in LENGTHS:
            inputs = request(length)
            expected = pretrainer(inputs, training=False)
            got = run_tflite(path, inputs)
            for name in ("mlm_logits", "sop_logits"):
                assert got[name].shape == tuple(expected[name].shape), (quantize, length, name)
                diff = np.abs(got[name] - np.asarray(expected[name])).max()
                assert diff < TOLERANCES[quantize], (quantize, length, name, diff)


def test_the_answer_at_the_real_length_is_the_padded_answer(files):
    """float32 at a sentence's own length answers as the fixed-length file did with the tail masked."""
    from albert_tf.export import run_tflite

    short = request(16)
    padded = {name: np.zeros((1, MAX_SEQ), "int32") for name in ("input_ids", "input_mask", "segment_ids")}
    for name in padded:
        padded[name][:, :16] = short[name]
    padded["masked_lm_positions"] = short["masked_lm_positions"]
    got, reference = run_tflite(files["none"], short), run_tflite(files["none"], padded)
    np.testing.assert_allclose(got["mlm_logits"], reference["mlm_logits"], atol=1e-5)
    np.testing.assert_allclose(got["sop_logits"], reference["sop_logits"], atol=1e-5)


@pytest.mark.parametrize("length", [0, MAX_SEQ + 1, 512])
def test_lengths_past_max_seq_length_are_refused_by_the_runner_and_the_file(files, length):
    from ai_edge_litert.interpreter import Interpreter

    from albert_tf.export import run_tflite
    from albert_tf.export.input_checks import ServingInputError

    inputs = {name: np.ones((1, length), "int32") for name in ("input_ids", "input_mask", "segment_ids")}
    inputs["masked_lm_positions"] = np.zeros((1, 1), "int32")
    for path in files.values():
        message = rf"^input_ids: sequence length {length}, but the file takes 1 to max_seq_length=48$"
        with pytest.raises(ServingInputError, match=message):
            run_tflite(path, inputs)
        if length > MAX_SEQ:
            # The file alone: every id is moved past the vocabulary (past the position table, its SLICE fails first).
            runner = Interpreter(model_path=path).get_signature_runner("serving_default")
            with pytest.raises(RuntimeError, match="gather index out of bounds|Invalid begin and size"):
                runner(**inputs)


def test_every_cpu_by_default_and_any_thread_count_gives_the_same_answer(files):
    from albert_tf.tflite_file import TFLiteFileError, TFLiteRunner, usable_cpus

    assert TFLiteRunner(files["none"]).num_threads == usable_cpus() >= 1  # LiteRT alone takes one
    inputs = request(37)
    one, every = TFLiteRunner(files["none"], num_threads=1)(inputs), TFLiteRunner(files["none"], num_threads=2)(inputs)
    for name in ("mlm_logits", "sop_logits"):
        np.testing.assert_allclose(one[name], every[name], atol=1e-5)
    with pytest.raises(TFLiteFileError, match="^num_threads 0: must be at least 1$"):
        TFLiteRunner(files["none"], num_threads=0)


def test_mismatched_shapes_are_named(files):
    from albert_tf.export import run_tflite
    from albert_tf.export.input_checks import ServingInputError

    inputs = request(16)
    inputs["input_mask"] = np.ones((1, 15), "int32")
    with pytest.raises(ServingInputError, match=r"input_mask: shape \(1, 15\), but input_ids has \(1, 16\)"):
        run_tflite(files["none"], inputs)
    inputs = request(16)
    inputs["input_ids"] = inputs["input_ids"][0]
    with pytest.raises(ServingInputError, match=r"input_ids: shape \(16,\), but the file takes \(1, -1\)"):
        run_tflite(files["none"], inputs)


def test_a_classifier_file_of_any_length_matches_keras(tmp_path):
    """A fine-tuned model's signature (no masked positions), the one an app ships."""
    import keras

    from albert_tf.export import export_tflite, run_tflite
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.classifier import AlbertClassifier

    keras.utils.set_random_seed(4)
    model = AlbertClassifier(AlbertBackbone.from_albert_config(str(REPO / "configs" / "albert_tiny.json")), 3)
    path = export_tflite(model, str(tmp_path), "none", max_seq_length=MAX_SEQ)
    for length in LENGTHS:
        inputs = {k: v for k, v in request(length).items() if k != "masked_lm_positions"}
        got = run_tflite(path, inputs)["logits"]
        np.testing.assert_allclose(got, np.asarray(model(inputs, training=False)["logits"]), atol=1e-4)
