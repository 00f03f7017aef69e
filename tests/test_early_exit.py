"""Patience-based early exit (PABEE): the model, its loss, the patient while loop, save/load, export."""

import json

import keras
import numpy as np
import pytest

from albert_tf import AlbertBackbone
from albert_tf.finetuning.losses import (
    depth_weighted_loss,
    depth_weights,
    exit_classification_loss,
    exit_regression_loss,
)
from albert_tf.models.early_exit import AlbertEarlyExitClassifier, PatientInference
from albert_tf.tokenization import SentencePieceTokenizer

from early_exit_helpers import build, reference_exit

TINY = "configs/albert_tiny.json"


def inputs(batch=8, seq=12, seed=1):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 8000, (batch, seq)).astype("int32")
    mask = np.ones_like(ids)
    mask[0, seq // 2 :] = 0
    return {"input_ids": ids, "input_mask": mask, "segment_ids": (np.arange(seq) >= seq // 3) * np.ones_like(ids)}


@pytest.fixture(scope="module")
def early_exit_exports(tmp_path_factory):
    """An early-exit model with its SavedModel and its early-exit TFLite file (max_seq_length 16)."""
    from albert_tf.export import export_saved_model
    from albert_tf.export.early_exit import export_early_exit_tflite

    model = build()
    base = tmp_path_factory.mktemp("early_exit_exports")
    saved = export_saved_model(model, str(base / "serving"), version=1, warmup=False)
    tflite = export_early_exit_tflite(model, str(base / "tflite"), max_seq_length=16)
    return model, saved, tflite


def test_depth_weights_and_loss_are_the_papers():
    assert depth_weights(4) == pytest.approx([0.1, 0.2, 0.3, 0.4])
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(5, 4, 3)).astype("float32")
    labels = rng.integers(0, 3, 5).astype("int32")
    got = keras.ops.convert_to_numpy(depth_weighted_loss(exit_classification_loss)(labels, logits))
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    per_layer = -log_probs[np.arange(5), :, labels]  # [B, N]
    expected = sum(j * per_layer[:, j - 1] for j in range(1, 5)) / sum(range(1, 5))
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    scores = rng.normal(size=(5, 4, 1)).astype("float32")
    targets = rng.normal(size=5).astype("float32")
    got = keras.ops.convert_to_numpy(depth_weighted_loss(exit_regression_loss)(targets, scores))
    expected = sum(j * (scores[:, j - 1, 0] - targets) ** 2 for j in range(1, 5)) / 10
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_outputs_one_classifier_per_layer_the_last_is_full_depth():
    model = build()
    outputs = model(inputs())
    assert tuple(outputs["exit_logits"].shape) == (8, 4, 3)
    np.testing.assert_array_equal(outputs["logits"], outputs["exit_logits"][:, -1, :])
    # Classifier j reads layer j through the shared pooler.
    backbone_outputs = model.backbone(inputs())
    pooled = model.backbone.pooler(backbone_outputs["encoder_outputs"][1][:, 0, :])
    kernel, bias = model.exit_classifiers.kernel, model.exit_classifiers.bias
    np.testing.assert_allclose(outputs["exit_logits"][:, 1], pooled @ kernel[1] + bias[1], atol=1e-5)


def test_a_backbone_without_all_layers_is_replaced_by_a_twin_with_its_weights():
    keras.utils.set_random_seed(3)
    backbone = AlbertBackbone.from_albert_config(TINY)
    model = AlbertEarlyExitClassifier(backbone, num_classes=2)
    assert model.backbone.output_all_layers
    np.testing.assert_array_equal(model.backbone(inputs())["pooled_output"], backbone(inputs())["pooled_output"])


@pytest.mark.parametrize("patience", [1, 2, 3, 4])
def test_patient_inference_matches_the_rule_row_by_row(patience):
    model = build()
    x = inputs()
    exit_logits = keras.ops.convert_to_numpy(model(x)["exit_logits"])
    expected_answers, expected_layers = reference_exit(exit_logits, patience)
    got = PatientInference(model)(x, patience=patience)
    np.testing.assert_array_equal(got["layers_used"], expected_layers)
    np.testing.assert_allclose(got["logits"], expected_answers, atol=1e-5)
    if patience == 1:
        assert set(np.asarray(got["layers_used"])) == {1}
    if patience == 4:  # patience = L: every row runs every layer and gets the full-depth answer
        assert set(np.asarray(got["layers_used"])) == {4}
        np.testing.assert_allclose(got["logits"], exit_logits[:, -1], atol=1e-5)


def test_batch_rows_exit_independently():
    model = build()
    x = inputs()
    exit_logits = keras.ops.convert_to_numpy(model(x)["exit_logits"])
    layers = np.asarray(PatientInference(model)(x, patience=2)["layers_used"])
    assert len(set(layers)) > 1, layers  # the rows did not all exit at the same layer
    # Each row alone gets what it got in the batch.
    for row in range(len(layers)):
        alone = PatientInference(model)({k: v[row : row + 1] for k, v in x.items()}, patience=2)
        assert int(alone["layers_used"][0]) == layers[row]
        np.testing.assert_allclose(alone["logits"][0], reference_exit(exit_logits[row : row + 1], 2)[0][0], atol=1e-5)


def test_regression_uses_the_threshold_rule():
    model = build(num_classes=1)
    x = inputs()
    exit_logits = keras.ops.convert_to_numpy(model(x)["exit_logits"])
    changes = np.abs(np.diff(exit_logits[..., 0], axis=1))
    threshold = float(np.median(changes))
    for patience in (1, 2, 3, 4):
        got = PatientInference(model)(x, patience=patience, threshold=threshold)
        answers, layers = reference_exit(exit_logits, patience, threshold)
        np.testing.assert_array_equal(got["layers_used"], layers)
        np.testing.assert_allclose(got["logits"], answers, atol=1e-5)
    # A threshold no change meets never exits early.
    assert set(np.asarray(PatientInference(model)(x, patience=2, threshold=0.0)["layers_used"])) == {4}


@pytest.mark.parametrize("gather_weights", [False, True])
@pytest.mark.parametrize("changes", [{"num_hidden_groups": 2}, {"sharing": "none"}, {"inner_group_num": 2}])
def test_unshared_layers_get_each_applications_weights(changes, gather_weights):
    model = build(**changes)
    x = inputs()
    exit_logits = keras.ops.convert_to_numpy(model(x)["exit_logits"])
    inference = PatientInference(model, gather_weights=gather_weights)
    for patience in range(1, model.num_exits + 1):
        answers, layers = reference_exit(exit_logits, patience)
        got = inference(x, patience=patience)
        np.testing.assert_array_equal(got["layers_used"], layers)
        np.testing.assert_allclose(got["logits"], answers, atol=1e-5)


def test_saved_and_loaded_model_round_trips(tmp_path):
    from albert_tf import formats

    model = build()
    x = inputs()
    formats.save(model, str(tmp_path / "model"))
    loaded = formats.load(str(tmp_path / "model")).model
    assert type(loaded) is AlbertEarlyExitClassifier
    assert loaded.get_config() == model.get_config()
    np.testing.assert_allclose(loaded(x)["exit_logits"], model(x)["exit_logits"], atol=1e-6)
    expected = PatientInference(model)(x, patience=2)
    got = PatientInference(loaded)(x, patience=2)
    np.testing.assert_array_equal(got["layers_used"], expected["layers_used"])


def test_saved_model_signature_matches_keras(early_exit_exports):
    import tensorflow as tf

    from albert_tf.export.early_exit import SIGNATURE

    model, path, _ = early_exit_exports  # build()'s SavedModel: version 1, no warm-up file
    signature = tf.saved_model.load(path).signatures[SIGNATURE]
    x = inputs(batch=5, seq=20, seed=7)
    for patience in (1, 2, 4):
        expected = PatientInference(model)(x, patience=patience)
        got = signature(
            **{k: tf.constant(v) for k, v in x.items()}, patience=tf.constant(patience), threshold=tf.constant(0.0)
        )
        np.testing.assert_array_equal(got["layers_used"], expected["layers_used"])
        np.testing.assert_allclose(got["logits"], expected["logits"], atol=1e-5)
        np.testing.assert_array_equal(got["label"], np.argmax(expected["logits"], -1))
    with open(f"{path}/assets/serving_config.json") as f:
        assert SIGNATURE in json.load(f)["signatures"]
    # Ids past the vocabulary are refused naming the input, as serving_default refuses them.
    bad = {k: tf.constant(v) for k, v in x.items()}
    bad["input_ids"] = tf.constant(np.where(x["input_ids"] > 7000, 8000, x["input_ids"]).astype("int32"))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"input_ids: every value must be in \[0, 8000\)"):
        signature(**bad, patience=tf.constant(2), threshold=tf.constant(0.0))


@pytest.mark.slow
def test_run_classifier_early_exit_trains_every_classifier(real_data, pretraining_data, tmp_path):
    from albert_tf import formats
    from albert_tf.run_classifier import ClassifierSettings, run

    target = tmp_path / "glue" / "MRPC"
    target.mkdir(parents=True)
    for name, rows in (("train.tsv", 64), ("dev.tsv", 40)):
        lines = (real_data / "glue" / "MRPC" / name).read_text(encoding="utf-8-sig").splitlines()
        (target / name).write_text("\n".join(lines[: rows + 1]) + "\n", encoding="utf-8")
    settings = ClassifierSettings(
        do_train=True,
        do_eval=True,
        early_exit=True,
        output_dir=str(tmp_path / "out"),
        task_name="mrpc",
        data_dir=str(tmp_path / "glue"),
        tokenizer=SentencePieceTokenizer(pretraining_data["spm"]),
        albert_config_file=pretraining_data["config"],
        max_seq_length=48,
        train_batch_size=16,
        eval_batch_size=16,
        learning_rate=1e-4,
        train_step=4,
        save_checkpoints_steps=2,
        verbose=False,
    )
    summary = run(settings)
    assert summary["eval"]["num_examples"] == 40 and "accuracy" in summary["eval"]
    model = formats.load(str(tmp_path / "out" / "best")).model
    assert type(model) is AlbertEarlyExitClassifier
    # Every classifier got gradient: their biases all left their zero initial value.
    bias = keras.ops.convert_to_numpy(model.exit_classifiers.bias)
    assert bias.shape[0] == model.num_exits and np.all(np.abs(bias).max(-1) > 0), bias


def test_tflite_file_runs_early_exit_with_builtin_ops_and_matches_keras(early_exit_exports):
    from albert_tf.export.early_exit import run_early_exit_tflite

    model, _, path = early_exit_exports  # build()'s early-exit TFLite file, max_seq_length 16
    inference = PatientInference(model)
    seen = set()
    for row in range(6):
        x = {k: v[row : row + 1] for k, v in inputs(batch=6, seq=16, seed=11).items()}
        for patience in (1, 2, 3, 4):
            expected = inference(x, patience=patience)
            got = run_early_exit_tflite(path, x, patience)
            np.testing.assert_array_equal(got["layers_used"], expected["layers_used"])
            np.testing.assert_allclose(got["logits"], expected["logits"], atol=1e-4)
            seen.add(int(got["layers_used"][0]))
    assert {1, 4} <= seen, seen  # the loop stopped at different depths


def test_early_exit_tflite_of_a_plain_model_is_a_clear_error(tmp_path):
    from albert_tf.export import ExportError
    from albert_tf.export.early_exit import export_early_exit_tflite
    from albert_tf.models.classifier import AlbertClassifier

    model = AlbertClassifier(AlbertBackbone.from_albert_config(TINY), num_classes=2)
    with pytest.raises(ExportError, match="fine-tune with --early_exit"):
        export_early_exit_tflite(model, str(tmp_path / "tflite"))
    assert not (tmp_path / "tflite").exists() or not list((tmp_path / "tflite").iterdir())


@pytest.mark.slow
@pytest.mark.parametrize(
    "changes", [{"num_hidden_groups": 2}, {"inner_group_num": 2}, {"sharing": "none"}, {"sharing": "ffn"}]
)
def test_tflite_early_exit_of_layers_with_different_weights_matches_keras(tmp_path, changes):
    from albert_tf.export.early_exit import export_early_exit_tflite, run_early_exit_tflite

    model = build(**changes)
    path = export_early_exit_tflite(model, str(tmp_path / "tflite"), max_seq_length=16)
    with open(path, "rb") as f:
        assert b"Flex" not in f.read()  # builtin ops only (and the plain interpreter below runs it)
    inference = PatientInference(model)  # the switch between weight sets: an independent reference
    seen = set()
    for row in range(6):
        x = {k: v[row : row + 1] for k, v in inputs(batch=6, seq=16, seed=11).items()}
        exit_logits = keras.ops.convert_to_numpy(model(x)["exit_logits"])
        for patience in range(1, model.num_exits + 1):
            expected = inference(x, patience=patience)
            got = run_early_exit_tflite(path, x, patience)
            np.testing.assert_array_equal(got["layers_used"], expected["layers_used"])
            np.testing.assert_allclose(got["logits"], expected["logits"], atol=1e-4)
            seen.add(int(got["layers_used"][0]))
        # The full-depth answer is the model's own last classifier, which reads the last group's weights.
        np.testing.assert_allclose(got["logits"][0], exit_logits[0, -1], atol=1e-4)
    assert len(seen) > 2, seen


def test_multiple_choice_exits_per_question_and_exports(tmp_path):
    import tensorflow as tf

    from albert_tf import formats
    from albert_tf.export import export_saved_model
    from albert_tf.export.early_exit import SIGNATURE
    from albert_tf.models.early_exit import AlbertEarlyExitMultipleChoice

    keras.utils.set_random_seed(5)
    model = AlbertEarlyExitMultipleChoice(AlbertBackbone.from_albert_config(TINY), num_choices=4)
    kernel = model.exit_classifiers.kernel
    kernel.assign(np.random.default_rng(5).normal(0, 1.0, kernel.shape).astype("float32"))
    flat = inputs(batch=24, seq=10, seed=3)
    x = {k: v.reshape(6, 4, 10) for k, v in flat.items()}
    outputs = model(x)
    exit_logits = keras.ops.convert_to_numpy(outputs["exit_logits"])
    assert exit_logits.shape == (6, 4, 4)
    np.testing.assert_array_equal(outputs["logits"], exit_logits[:, -1])
    layers_seen = set()
    for patience in range(1, 5):
        answers, layers = reference_exit(exit_logits, patience)
        got = PatientInference(model)(x, patience=patience)
        np.testing.assert_array_equal(got["layers_used"], layers)
        np.testing.assert_allclose(got["logits"], answers, atol=1e-5)
        layers_seen |= set(layers.tolist())
    assert len(layers_seen) > 2, layers_seen
    formats.save(model, str(tmp_path / "model"))
    loaded = formats.load(str(tmp_path / "model")).model
    assert type(loaded) is AlbertEarlyExitMultipleChoice
    np.testing.assert_allclose(loaded(x)["exit_logits"], exit_logits, atol=1e-6)
    path = export_saved_model(model, str(tmp_path / "serving"), version=1, warmup=False)
    got = tf.saved_model.load(path).signatures[SIGNATURE](
        **{k: tf.constant(v) for k, v in x.items()}, patience=tf.constant(2), threshold=tf.constant(0.0)
    )
    np.testing.assert_array_equal(got["layers_used"], reference_exit(exit_logits, 2)[1])


@pytest.mark.slow
def test_run_race_early_exit_trains_every_classifier(real_data, pretraining_data, tmp_path):
    from albert_tf import formats
    from albert_tf.models.early_exit import AlbertEarlyExitMultipleChoice
    from albert_tf.run_race import RaceSettings, run
    from albert_tf.tasks.race import RaceTask

    for split, source in (("train", "dev"), ("dev", "test")):
        (tmp_path / "race" / split).mkdir(parents=True)
        (tmp_path / "race" / split / "middle").symlink_to(real_data / "race" / source / "middle")
    task = RaceTask(data_dir=str(tmp_path / "race"), levels=("middle",), max_qa_length=16)
    settings = RaceSettings(
        early_exit=True,
        output_dir=str(tmp_path / "out"),
        tokenizer=SentencePieceTokenizer(pretraining_data["spm"]),
        albert_config_file=pretraining_data["config"],
        max_seq_length=64,
        train_batch_size=8,
        eval_batch_size=32,
        learning_rate=1e-4,
        train_step=2,
        warmup_step=0,
        save_checkpoints_steps=2,
        verbose=False,
    )
    summary = run(task, settings)
    assert "accuracy" in summary["eval"]
    model = formats.load(str(tmp_path / "out" / "best")).model
    assert type(model) is AlbertEarlyExitMultipleChoice
    # Every classifier's kernel gets a gradient from the depth-weighted loss the run trained with. (Its bias
    # gets none: a bias shared by all options cancels in the softmax over the options.)
    import tensorflow as tf

    from albert_tf.finetuning.losses import depth_weighted_loss, exit_classification_loss

    shape = (2, model.get_config()["num_choices"], 16)
    rng = np.random.default_rng(0)
    inputs = {
        "input_ids": tf.constant(rng.integers(5, 80, shape), tf.int32),
        "input_mask": tf.ones(shape, tf.int32),
        "segment_ids": tf.zeros(shape, tf.int32),
    }
    with tf.GradientTape() as tape:
        exit_logits = model(inputs)["exit_logits"]
        loss = tf.reduce_mean(depth_weighted_loss(exit_classification_loss)(tf.constant([0, 1]), exit_logits))
    gradient = tape.gradient(loss, model.exit_classifiers.kernel.value).numpy()
    assert np.all(np.abs(gradient).reshape(gradient.shape[0], -1).max(-1) > 1e-6), gradient


@pytest.mark.slow
def test_text_signatures_and_warmup_requests_of_an_early_exit_export(tmp_path, wikitext_spm, monkeypatch):
    """The `saved_model` export target (the TFLite ones: tests/test_early_exit_predict.py), run as
    docs/export.md says: its signatures loaded, TF Serving's warm-up requests, our saved_model_cli."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops for loading)

    from albert_tf.export import WARMUP_FILE
    from albert_tf.export.early_exit import SIGNATURES, TEXT_PAIR_SIGNATURE, TEXT_SIGNATURE
    from albert_tf.export.targets import TARGETS, ExportSettings
    from albert_tf.tokenization import SentencePieceTokenizer
    from albert_tf.tokenization.packing import pack_segments

    from command_helpers import run_command

    model = build(num_classes=2, vocab_size=4000)
    settings = ExportSettings(output_dir=str(tmp_path / "serving"), version=1)
    path = TARGETS["saved_model"].write(model, SentencePieceTokenizer(wikitext_spm), settings)
    loaded = tf.saved_model.load(path)
    assert set(SIGNATURES) <= set(loaded.signatures)
    tokenizer = SentencePieceTokenizer(wikitext_spm)
    texts_a = ["a good film", "the worst plot i have seen in years", "fine"]
    texts_b = ["yes", "no it is not", "well made and well acted"]
    for patience in (1, 2, 4):
        got = loaded.signatures[TEXT_PAIR_SIGNATURE](
            text_a=tf.constant(texts_a),
            text_b=tf.constant(texts_b),
            patience=tf.constant(patience),
            threshold=tf.constant(0.0),
        )
        rows = [
            pack_segments(tokenizer.encode(a), tokenizer.encode(b), 128, tokenizer.cls_id, tokenizer.sep_id)
            for a, b in zip(texts_a, texts_b)
        ]
        width = max(len(ids) for ids, _ in rows)
        x = {
            "input_ids": np.array([ids + [0] * (width - len(ids)) for ids, _ in rows], "int32"),
            "input_mask": np.array([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in rows], "int32"),
            "segment_ids": np.array([seg + [0] * (width - len(seg)) for _, seg in rows], "int32"),
        }
        np.testing.assert_array_equal(got["input_ids"], x["input_ids"])
        expected = PatientInference(model)(x, patience=patience)
        np.testing.assert_array_equal(got["layers_used"], expected["layers_used"])
        np.testing.assert_allclose(got["logits"], expected["logits"], atol=1e-5)
    single = loaded.signatures[TEXT_SIGNATURE](
        text_a=tf.constant(texts_a), patience=tf.constant(4), threshold=tf.constant(0.0)
    )
    assert set(np.asarray(single["layers_used"])) == {4}
    # An empty batch is one clear error (issue 41: it was a raw `Detected at node` from the pooler).
    empty = tf.constant([], tf.string)
    for name, request in (
        (TEXT_SIGNATURE, {"text_a": empty}),
        (TEXT_PAIR_SIGNATURE, {"text_a": empty, "text_b": empty}),
    ):
        with pytest.raises(tf.errors.InvalidArgumentError, match="text_a: a request needs at least one text"):
            loaded.signatures[name](**request, patience=tf.constant(2), threshold=tf.constant(0.0))
    # TF Serving replays every warm-up request at load: each one must run on its signature.
    from tensorflow_serving.apis import prediction_log_pb2

    replayed = set()
    for record in tf.data.TFRecordDataset(f"{path}/{WARMUP_FILE}"):
        request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        inputs = {name: tf.make_ndarray(proto) for name, proto in request.inputs.items()}
        loaded.signatures[request.model_spec.signature_name](**{k: tf.constant(v) for k, v in inputs.items()})
        replayed.add(request.model_spec.signature_name)
    assert set(SIGNATURES) <= replayed
    # Our saved_model_cli runs the early-exit text signature (the plain tool has no tf-text ops).
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    request = f"text_a={texts_a!r};patience=2;threshold=0.0"
    served = run_command(
        "albert_tf.saved_model_cli",
        ["run", "--dir", path, "--tag_set", "serve", "--signature_def", TEXT_SIGNATURE, "--input_exprs", request,
         "--outdir", tmp_path / "served"],
    )  # fmt: skip
    assert served.returncode == 0, served.stderr[-2000:]
    packed = loaded.signatures[TEXT_SIGNATURE](text_a=tf.constant(texts_a), patience=2, threshold=0.0)
    ids = {name: packed[name].numpy() for name in ("input_ids", "input_mask", "segment_ids")}
    expected = PatientInference(model)(ids, patience=2)
    np.testing.assert_array_equal(np.load(tmp_path / "served" / "layers_used.npy"), expected["layers_used"])
    np.testing.assert_allclose(np.load(tmp_path / "served" / "logits.npy"), expected["logits"], atol=1e-5)


def test_the_loop_runs_only_until_the_last_row_has_exited(monkeypatch):
    model = build()
    x = inputs()
    inference = PatientInference(model)
    applied = []
    run_layer = PatientInference._apply_layer

    def counting(self, hidden, input_mask, index):
        applied.append(index)
        return run_layer(self, hidden, input_mask, index)

    monkeypatch.setattr(PatientInference, "_apply_layer", counting)
    for patience in (1, 2, 3, 4):
        applied.clear()
        layers = np.asarray(inference(x, patience=patience)["layers_used"])  # eager: the body runs per layer
        assert len(applied) == layers.max(), (patience, layers, applied)
    # The row that exits first, alone, runs fewer layers than the batch it was in.
    in_batch = np.asarray(inference(x, patience=2)["layers_used"])
    first = int(in_batch.argmin())
    applied.clear()
    alone = np.asarray(inference({k: v[first : first + 1] for k, v in x.items()}, patience=2)["layers_used"])
    assert len(applied) == alone[0] == in_batch.min() < in_batch.max()


@pytest.mark.slow
def test_a_saved_early_exit_model_loads_in_a_fresh_process(tmp_path):
    import subprocess
    import sys

    from albert_tf import formats

    from paths import REPO

    formats.save(build(), str(tmp_path / "model"))
    # A subprocess: what a fresh process has imported is under test. Nothing imported beforehand but
    # formats: it must know the early-exit classes itself (this process has registered them already).
    program = f"from albert_tf import formats; print(type(formats.load({str(tmp_path / 'model')!r}).model).__name__)"
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["AlbertEarlyExitClassifier"]


# ---- issue 41 defects 1 and 2: patience outside [1, L], and the early-exit TFLite file's input guard ----
BAD_PATIENCES = [0, -1, -(2**31), 5]


def one_row(seq=16, seed=11):
    return {k: v[1:2] for k, v in inputs(batch=2, seq=seq, seed=seed).items()}


@pytest.mark.parametrize("patience", BAD_PATIENCES)
def test_patience_outside_one_to_the_layer_count_is_refused_everywhere(early_exit_exports, patience):
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    from albert_tf.export.early_exit import SIGNATURE, run_early_exit_tflite
    from albert_tf.export.input_checks import ServingInputError

    model, saved, tflite = early_exit_exports
    x = one_row()
    message = r"patience: must be a scalar in \[1, 4\] \(4 layer applications; 4 is full depth\)"
    signature = tf.saved_model.load(saved).signatures[SIGNATURE]
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        signature(**{k: tf.constant(v) for k, v in x.items()}, patience=tf.constant(patience), threshold=0.0)
    # The file alone (an app's interpreter) refuses it with GATHER's bounds check; our runner names it.
    runner = Interpreter(model_path=tflite).get_signature_runner(SIGNATURE)
    with pytest.raises(RuntimeError, match="gather index out of bounds"):
        runner(**x, patience=np.array(patience, "int32"), threshold=np.array(0.0, "float32"))
    with pytest.raises(ServingInputError, match=message):
        run_early_exit_tflite(tflite, x, patience)
    with pytest.raises(ValueError, match=r"must be in \[1, 4\]"):
        PatientInference(model)(x, patience=patience)


def test_a_vector_patience_or_threshold_is_refused(early_exit_exports):
    import tensorflow as tf

    from albert_tf.export.early_exit import SIGNATURE, run_early_exit_tflite
    from albert_tf.export.input_checks import ServingInputError

    model, saved, tflite = early_exit_exports
    x = inputs(batch=2, seq=16, seed=11)
    signature = tf.saved_model.load(saved).signatures[SIGNATURE]
    request = {k: tf.constant(v) for k, v in x.items()}
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"patience: must be a scalar in \[1, 4\]"):
        signature(**request, patience=tf.constant([1, 4]), threshold=tf.constant(0.0))
    with pytest.raises(tf.errors.InvalidArgumentError, match="threshold: must be a scalar"):
        signature(**request, patience=tf.constant(2), threshold=tf.constant([0.0, 0.1]))
    # A scalar still answers as the Keras model does.
    got = signature(**request, patience=tf.constant(2), threshold=tf.constant(0.0))
    np.testing.assert_array_equal(got["layers_used"], PatientInference(model)(x, patience=2)["layers_used"])
    with pytest.raises(ServingInputError, match=r"patience: must be a scalar in \[1, 4\].*got \[1, 4\]"):
        run_early_exit_tflite(tflite, one_row(), np.array([1, 4], "int32"))


@pytest.mark.parametrize(
    "name,value,message",
    [
        ("input_ids", -1, r"input_ids: -1 at \[0, 3\] is outside \[0, 8000\)"),
        ("input_ids", 8000, r"input_ids: 8000 at \[0, 3\] is outside \[0, 8000\)"),
        ("input_mask", 2, r"input_mask: 2 at \[0, 3\] is outside \[0, 2\)"),
        ("segment_ids", -1, r"segment_ids: -1 at \[0, 3\] is outside \[0, 2\)"),
        ("segment_ids", 2, r"segment_ids: 2 at \[0, 3\] is outside \[0, 2\)"),
    ],
)
def test_early_exit_tflite_refuses_values_out_of_range(early_exit_exports, name, value, message):
    from ai_edge_litert.interpreter import Interpreter

    from albert_tf.export.early_exit import SIGNATURE, run_early_exit_tflite
    from albert_tf.export.input_checks import ServingInputError

    model, _, tflite = early_exit_exports
    x = one_row()
    bad = {k: v.copy() for k, v in x.items()}
    bad[name][0, 3] = value
    runner = Interpreter(model_path=tflite).get_signature_runner(SIGNATURE)
    scalars = {"patience": np.array(2, "int32"), "threshold": np.array(0.0, "float32")}
    with pytest.raises(RuntimeError, match="gather index out of bounds"):
        runner(**bad, **scalars)
    with pytest.raises(ServingInputError, match=message):
        run_early_exit_tflite(tflite, bad, 2)
    # Valid values are unchanged by the guard.
    expected = PatientInference(model)(x, patience=2)["logits"]
    np.testing.assert_allclose(runner(**x, **scalars)["logits"], expected, atol=1e-4)


def test_early_exit_tflite_takes_any_length_up_to_its_max_and_refuses_longer(early_exit_exports):
    from ai_edge_litert.interpreter import Interpreter

    from albert_tf.export.early_exit import SIGNATURE, run_early_exit_tflite
    from albert_tf.export.input_checks import ServingInputError

    model, _, tflite = early_exit_exports
    inference = PatientInference(model)
    for seq in (3, 5, 9, 16):
        x = one_row(seq, seed=seq)
        for patience in (1, 2, 4):
            expected = inference(x, patience=patience)
            got = run_early_exit_tflite(tflite, x, patience)
            np.testing.assert_array_equal(got["layers_used"], expected["layers_used"])
            np.testing.assert_allclose(got["logits"], expected["logits"], atol=1e-4)
    too_long = one_row(17)
    with pytest.raises(ServingInputError, match=r"input_ids: sequence length 17, but the file takes 1 to max_seq_l"):
        run_early_exit_tflite(tflite, too_long, 2)
    runner = Interpreter(model_path=tflite).get_signature_runner(SIGNATURE)
    with pytest.raises(RuntimeError, match="gather index out of bounds"):
        runner(**too_long, patience=np.array(2, "int32"), threshold=np.array(0.0, "float32"))
