"""Export on a model pretrained by the tests: SavedModel signatures, TF Serving files, TFLite variants."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from command_helpers import run_command
from paths import REPO

pytestmark = pytest.mark.realdata
MAX_SEQ = 48


def wikitext_lines(real_data, count, min_words=8):
    lines = []
    for line in (real_data / "wikitext2" / "test.txt").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if len(line.split()) >= min_words and not line.startswith("="):
            lines.append(line)
        if len(lines) == count:
            return lines
    return lines


@pytest.fixture(scope="module")
def pretrained(pretrained_tiny):
    from albert_tf import formats

    return formats.load(str(pretrained_tiny))


@pytest.fixture(scope="module")
def exports(tmp_path_factory, pretrained):
    """SavedModels of the pretrained MLM model and of its backbone, with text signatures."""
    from albert_tf.export import export_saved_model

    base = tmp_path_factory.mktemp("exports")
    model = pretrained.model
    return {
        "pretrainer": export_saved_model(
            model, str(base / "pretrainer"), tokenizer=python_tokenizer(pretrained), max_seq_length=MAX_SEQ
        ),
        "backbone": export_saved_model(
            model.backbone, str(base / "backbone"), tokenizer=python_tokenizer(pretrained), max_seq_length=MAX_SEQ
        ),
    }


def python_tokenizer(pretrained):
    from albert_tf.tokenization import SentencePieceTokenizer

    return SentencePieceTokenizer(pretrained.spm_model_file)


def assert_outputs_match(keras_outputs, served, atol):
    for name, value in keras_outputs.items():
        np.testing.assert_allclose(np.asarray(served[name]), np.asarray(value), atol=atol, rtol=0, err_msg=name)


@pytest.mark.slow
def test_load_model_reads_every_format(pretrained_tiny, pretrained, tmp_path):
    from albert_tf import formats
    from albert_tf.formats import ModelFileError
    from albert_tf.formats.original import save_original_checkpoint

    expected = pretrained.model.get_weights()
    assert type(pretrained.model).__name__ == "AlbertPretrainer"
    assert pretrained.source.endswith("final/pretrainer.weights.h5")
    assert pretrained.spm_model_file.endswith("final/spm.model")
    keras_file = str(tmp_path / "model.keras")
    pretrained.model.save(keras_file)
    original = tmp_path / "tf1"
    original.mkdir()
    save_original_checkpoint(pretrained.model, str(original / "model.ckpt"))
    (original / "albert_config.json").write_text((pretrained_tiny / "final" / "albert_config.json").read_text())
    for path in (keras_file, str(tmp_path), str(original / "model.ckpt"), str(pretrained_tiny / "final")):
        loaded = formats.load(path)
        assert type(loaded.model).__name__ == "AlbertPretrainer", path
        for a, b in zip(loaded.model.get_weights(), expected):
            np.testing.assert_array_equal(a, b)
    with pytest.raises(ModelFileError, match="training checkpoint"):
        formats.load(str(pretrained_tiny / "checkpoints"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelFileError, match="holds no model"):
        formats.load(str(tmp_path / "empty"))
    with pytest.raises(ModelFileError, match="does not exist"):
        formats.load(str(tmp_path / "missing"))


@pytest.mark.slow
def test_ids_signature_matches_keras_on_real_text(real_data, pretrained, exports):
    from albert_tf.export import reference_text_inputs

    tokenizer = python_tokenizer(pretrained)
    lines = wikitext_lines(real_data, 16)
    inputs = reference_text_inputs(tokenizer, lines[:8], lines[8:], MAX_SEQ, has_mlm=False)
    inputs["masked_lm_positions"] = np.tile(np.arange(1, 6, dtype="int32"), (8, 1))
    for kind, model in (("pretrainer", pretrained.model), ("backbone", pretrained.model.backbone)):
        model_inputs = {k: v for k, v in inputs.items() if k in model.input}
        served = tf.saved_model.load(exports[kind]).signatures["serving_default"](
            **{k: tf.constant(v) for k, v in model_inputs.items()}
        )
        assert_outputs_match(model(model_inputs, training=False), served, 1e-5)
    assert "mlm_top_k_ids" in tf.saved_model.load(exports["pretrainer"]).signatures["serving_default"](
        **{k: tf.constant(v) for k, v in inputs.items()}
    )
    # Each weight stored once (shared layer once, no duplicate tracking).
    stored = sum(
        os.path.getsize(os.path.join(exports["pretrainer"], "variables", f))
        for f in os.listdir(os.path.join(exports["pretrainer"], "variables"))
    )
    assert stored < 1.1 * pretrained.model.count_params() * 4


@pytest.mark.slow
def test_text_signatures_tokenise_pack_and_truncate_as_python(real_data, pretrained, exports):
    from albert_tf.export import reference_text_inputs

    tokenizer = python_tokenizer(pretrained)
    lines = wikitext_lines(real_data, 12)
    long_text = " ".join(lines)  # far past MAX_SEQ: truncated, never an error
    texts_a = lines[:5] + [long_text, "", "caf\xe9 \u00e9t\u00e9 1,000,000"]
    texts_b = [long_text, ""] + lines[5:11]
    backbone = tf.saved_model.load(exports["backbone"])
    for b in (None, texts_b):
        request = {"text_a": tf.constant(texts_a)}
        if b is not None:
            request["text_b"] = tf.constant(b)
        served = backbone.signatures["serve_text" if b is None else "serve_text_pair"](**request)
        expected = reference_text_inputs(tokenizer, texts_a, b, MAX_SEQ, has_mlm=False)
        assert served["input_ids"].shape[1] == MAX_SEQ  # the long row sets the width, truncated
        assert_outputs_match(expected, served, 0)
        assert_outputs_match(pretrained.model.backbone(expected, training=False), served, 1e-5)
    # Empty text: [CLS] [SEP]. Mixed lengths pad with 0 and a 0 mask.
    served = backbone.signatures["serve_text"](text_a=tf.constant(["", lines[0]]))
    assert served["input_ids"].numpy()[0, :3].tolist() == [tokenizer.cls_id, tokenizer.sep_id, 0]
    assert served["input_mask"].numpy()[0].sum() == 2
    # Invalid UTF-8 is replaced as Python's decode(errors="replace") would.
    raw = [b"abc \xff\xfe def", b"\xc3( broken \xe2\x82"]
    served = backbone.signatures["serve_text"](text_a=tf.constant(raw))
    expected = reference_text_inputs(tokenizer, raw, None, MAX_SEQ, has_mlm=False)
    assert_outputs_match(expected, served, 0)


@pytest.mark.slow
def test_mlm_text_signature_predicts_masked_words(real_data, pretrained, exports):
    from albert_tf.export import reference_text_inputs

    tokenizer = python_tokenizer(pretrained)
    texts = ["the [MASK] of the united states", "he was born in [MASK] and died in [MASK] .", "no mask here"]
    served = tf.saved_model.load(exports["pretrainer"]).signatures["serve_text"](text_a=tf.constant(texts))
    expected = reference_text_inputs(tokenizer, texts, None, MAX_SEQ, has_mlm=True)
    assert_outputs_match(expected, served, 0)
    positions = served["masked_lm_positions"].numpy()
    assert positions.shape == (3, 2) and positions[0, 1] == 0 and positions[2].tolist() == [0, 0]
    assert served["input_ids"].numpy()[1, positions[1]].tolist() == [tokenizer.mask_id] * 2
    top = served["mlm_top_k_ids"].numpy()
    probabilities = served["mlm_top_k_probabilities"].numpy()
    assert top.shape == (3, 2, 5) and np.all(np.diff(probabilities, axis=-1) <= 0)
    outputs = pretrained.model(expected, training=False)
    np.testing.assert_array_equal(top[..., 0], np.argmax(np.asarray(outputs["mlm_logits"]), -1))


@pytest.mark.slow
def test_saved_model_cli_show_and_run(pretrained, exports, tmp_path, monkeypatch):
    from albert_tf.export import reference_text_inputs

    path = exports["backbone"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(REPO)}
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    # A subprocess: TensorFlow's own installed script, as a user runs it, in a process that has not
    # imported tensorflow_text (this one has: its ops registered would hide what the plain tool shows).
    shown = subprocess.run([cli, "show", "--all", "--dir", path], capture_output=True, text=True, env=env)
    assert shown.returncode == 0, shown.stderr[-2000:]
    for name in ("serving_default", "serve_text", "serve_text_pair", "text_a", "pooled_output"):
        assert name in shown.stdout
    inputs = reference_text_inputs(
        python_tokenizer(pretrained), ["a short one", "and a longer second line"], None, MAX_SEQ, has_mlm=False
    )
    np.savez(tmp_path / "in.npz", **inputs)
    expected = pretrained.model.backbone(inputs, training=False)
    runs = {
        "serving_default": ["--inputs", ";".join(f"{k}={tmp_path / 'in.npz'}[{k}]" for k in inputs)],
        "serve_text": ["--input_exprs", "text_a=['a short one', 'and a longer second line']"],
    }
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    monkeypatch.chdir(tmp_path)
    for signature, args in runs.items():
        outdir = tmp_path / signature
        result = run_command(
            "albert_tf.saved_model_cli",
            ["run", "--dir", path, "--tag_set", "serve", "--signature_def", signature, "--outdir", outdir] + args,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        for name in ("pooled_output", "sequence_output"):
            np.testing.assert_allclose(np.load(outdir / f"{name}.npy"), np.asarray(expected[name]), atol=1e-5)


@pytest.mark.slow
def test_warmup_requests_replay_against_the_export(exports):
    from tensorflow_serving.apis import prediction_log_pb2

    from albert_tf.export import WARMUP_FILE

    for path in exports.values():
        loaded = tf.saved_model.load(path)
        seen = []
        for record in tf.data.TFRecordDataset(os.path.join(path, WARMUP_FILE)):
            log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
            request = log.predict_log.request
            seen.append(request.model_spec.signature_name)
            inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
            outputs = loaded.signatures[request.model_spec.signature_name](
                **{k: tf.constant(v) for k, v in inputs.items()}
            )
            assert all(np.isfinite(v.numpy()).all() for v in outputs.values() if v.dtype.is_floating)
        assert sorted(seen) == ["serve_text", "serve_text_pair", "serving_default"]


def masked_batches(pretraining_data, count, lengths=3):
    """Real MLM inputs: `count` pretraining eval records of WikiText-2 valid, of at least `lengths` real lengths
    (most rows fill the sequence: the last few are the first rows of lengths not seen yet)."""
    from albert_tf.inputs.shard_reader import pretraining_dataset, resolve_input

    dataset = pretraining_dataset(resolve_input(pretraining_data["data"]), 1, is_training=False)
    names = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
    taken, seen = 0, set()
    for inputs, labels in dataset.take(50 * count):
        length = int(inputs["input_mask"].numpy().sum())
        if taken < count - lengths or (length not in seen and taken < count):
            taken, seen = taken + 1, seen | {length}
            yield {k: inputs[k].numpy().astype("int32") for k in names}, labels["masked_lm_weights"].numpy()
        if taken >= count and len(seen) >= lengths:
            return


@pytest.mark.slow
def test_tflite_variants_builtin_shared_and_accurate(real_data, pretraining_data, pretrained, tmp_path):
    from albert_tf.cli.calibration import calibration_texts
    from albert_tf.export import TFLITE_NAMES, export_tflite, run_tflite
    from albert_tf.export.full_integer import op_output_types
    from albert_tf.export.representative import DEFAULT_SAMPLES

    model = pretrained.model
    params = model.count_params()
    # full_int8 calibrates on WikiText-2 test; the masked batches below are valid's (the pretraining text).
    texts = calibration_texts(str(real_data / "wikitext2" / "test.txt"), None, DEFAULT_SAMPLES)
    representative = {"calibration_texts": texts}
    files = {
        q: export_tflite(
            model,
            str(tmp_path),
            q,
            max_seq_length=64,
            tokenizer=python_tokenizer(pretrained),
            **(representative if q == "full_int8" else {}),
        )
        for q in ("none", "float16", "dynamic_int8", "full_int8")
    }
    assert sorted(os.listdir(tmp_path)) == sorted(
        list(TFLITE_NAMES.values())
        + ["albert_config.json", "spm.model", "tokenizer.json", "tokenizer_test_vectors.json"]
    )
    sizes = {q: os.path.getsize(f) for q, f in files.items()}
    # One copy of the shared layer: parameters × bytes (an unshared file would hold 4 blocks).
    assert sizes["none"] < 1.1 * params * 4 and sizes["float16"] < 1.1 * params * 2 + 65536, sizes
    assert sizes["dynamic_int8"] < 0.7 * sizes["none"] and sizes["full_int8"] < 0.7 * sizes["none"], sizes
    for f in files.values():
        assert b"Flex" not in open(f, "rb").read()  # builtin ops only
    # Full-integer: every matmul takes int8 activations; the attention softmax and LayerNorm stay float.
    ops = op_output_types(files["full_int8"])
    assert set(ops["FULLY_CONNECTED"]) == {"INT8"} and set(ops["SOFTMAX"]) == {"FLOAT32"}, ops
    assert set(ops["RSQRT"]) == {"FLOAT32"} and "INT8" in ops["QUANTIZE"], ops
    assert set(op_output_types(files["dynamic_int8"])["FULLY_CONNECTED"]) == {"FLOAT32"}
    # Per masked position: float32's lead of its top-1 over its runner-up, and what each int8
    # file's top-1 costs in float32 logits (0 where they agree).
    leads, costs = [], {"dynamic_int8": [], "full_int8": []}
    # The same at each example's real length (the files take any length up to 64): no padding computed.
    trimmed_costs = {"dynamic_int8": [], "full_int8": []}
    lengths = set()
    max_diff = 0.0
    for inputs, weights in masked_batches(pretraining_data, 40):
        expected = model(inputs, training=False)
        outputs = {q: run_tflite(f, inputs) for q, f in files.items()}
        length = int(inputs["input_mask"].sum())
        lengths.add(length)
        trimmed = {k: v if k == "masked_lm_positions" else v[:, :length] for k, v in inputs.items()}
        trimmed_outputs = {q: run_tflite(f, trimmed) for q, f in files.items()}
        trimmed_diff = np.abs(trimmed_outputs["none"]["mlm_logits"] - np.asarray(expected["mlm_logits"])).max()
        max_diff = max(max_diff, trimmed_diff)
        for name in ("mlm_logits", "sop_logits"):
            max_diff = max(max_diff, np.abs(outputs["none"][name] - np.asarray(expected[name])).max())
            assert outputs["full_int8"][name].dtype == np.float32  # the float file's signature
        logits = np.asarray(expected["mlm_logits"])[weights > 0]
        reference = logits.argmax(-1)
        top_two = np.sort(logits, -1)[:, -2:]
        leads.extend(top_two[:, 1] - top_two[:, 0])
        for q in costs:
            chosen = np.argmax(outputs[q]["mlm_logits"], -1)[weights > 0]
            costs[q].extend(logits.max(-1) - np.take_along_axis(logits, chosen[:, None], -1)[:, 0])
            chosen = np.argmax(trimmed_outputs[q]["mlm_logits"], -1)[weights > 0]
            trimmed_costs[q].extend(logits.max(-1) - np.take_along_axis(logits, chosen[:, None], -1)[:, 0])
        assert (np.argmax(outputs["float16"]["mlm_logits"], -1)[weights > 0] == reference).mean() > 0.9
    assert max_diff < 1e-4
    # int8 changes the top-1 only between near-ties of float32's (the tiny model's MLM is unsure:
    # 16% of positions lead by < 0.1). Measured, full_int8: ~95% agreement overall, 100% where
    # float32 leads by > 0.1, the worst change costing 0.09 (bench/README).
    clear = np.array(leads) > 0.1
    for q, cost in costs.items():
        cost = np.array(cost)
        assert (cost[clear] == 0).mean() >= 0.99, (q, (cost[clear] == 0).mean())
        assert cost.max() < 0.25 and (cost == 0).mean() >= 0.93, (q, cost.max(), (cost == 0).mean())
    for q, cost in trimmed_costs.items():
        cost = np.array(cost)
        assert (cost[clear] == 0).mean() >= 0.99, (q, "real length", (cost[clear] == 0).mean())
        assert cost.max() < 0.25 and (cost == 0).mean() >= 0.93, (q, "real length", cost.max(), (cost == 0).mean())
    assert len(lengths) >= 3, lengths  # the real lengths differ


def test_full_int8_needs_readable_representative_text(real_data, pretrained, pretrained_tiny, tmp_path, monkeypatch):
    from albert_tf.cli.calibration import calibration_texts, read_texts
    from albert_tf.export import ExportError, export_tflite
    from albert_tf.export.representative import RepresentativeDataError, representative_samples

    model = pretrained.model
    output = tmp_path / "tflite"
    (tmp_path / "blank.txt").write_text("\n  \n\t\n", encoding="utf-8")
    wikitext = str(real_data / "wikitext2" / "test.txt")
    for args, message in (
        ((None, None, 500), "needs --representative_data"),
        ((str(tmp_path / "missing.txt"), None, 500), r"missing.txt: cannot be read \(no such file\)"),
        ((str(tmp_path), None, 500), "cannot be read \\(a directory"),
        ((str(tmp_path / "blank.txt"), None, 500), "blank.txt: holds no text"),
        ((str(real_data / "glue" / "SST-2" / "dev.tsv"), "nope", 500), "--representative_task nope: expected one of"),
        ((wikitext, None, 0), "--representative_samples 0: must be at least 16"),
    ):
        with pytest.raises(RepresentativeDataError, match=message):
            calibration_texts(*args)
    # The library itself: full_int8 without enough texts, and texts without full_int8, are refused.
    with pytest.raises(RepresentativeDataError, match="calibration needs at least 16 examples of real text, got 0"):
        export_tflite(model, str(output), "full_int8", tokenizer=python_tokenizer(pretrained))
    with pytest.raises(ExportError, match="only --quantize full_int8 calibrates"):
        export_tflite(model, str(output), "dynamic_int8", calibration_texts=calibration_texts(wikitext, None, 20))
    assert not output.exists()  # refused before anything is written

    # A GLUE pair task keeps both segments; MLM rows get the mask id at the positions they ask about.
    pairs = read_texts(str(real_data / "glue" / "MRPC" / "dev.tsv"), "mrpc", 3)
    assert len(pairs) == 3 and all(a and b for a, b in pairs)
    tokenizer = python_tokenizer(pretrained)
    names = ["input_ids", "input_mask", "segment_ids", "masked_lm_positions"]
    for sample in representative_samples(pairs, tokenizer, names, MAX_SEQ, 20):
        assert sorted(sample) == sorted(names) and sample["input_ids"].shape == (1, MAX_SEQ)
        assert sample["segment_ids"].max() == 1
        positions = sample["masked_lm_positions"][0][sample["masked_lm_positions"][0] > 0]
        assert len(positions) >= 3 and (sample["input_ids"][0, positions] == tokenizer.mask_id).all()
        assert (sample["input_ids"][0] == tokenizer.mask_id).sum() == len(positions)

    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    monkeypatch.chdir(REPO)
    args = ["--model_dir", str(pretrained_tiny), "--output_dir", str(output), "--format", "tflite"]
    result = run_command("albert_tf.export", args + ["--quantize", "full_int8"])
    assert result.returncode != 0 and "needs --representative_data" in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and not output.exists()


def test_tokenizer_test_vectors_match_the_in_graph_tokenizer(pretrained, tmp_path):
    import json

    from albert_tf.export import tokenizer_test_vectors
    from albert_tf.tokenization.tf_sentencepiece import TFSentencePieceTokenizer

    tokenizer = python_tokenizer(pretrained)
    vectors = tokenizer_test_vectors(tokenizer, MAX_SEQ)
    graph = TFSentencePieceTokenizer(tokenizer.model_proto)
    ids = graph(tf.constant([v["text"] for v in vectors])).to_list()
    for vector, row in zip(vectors, ids):
        assert vector["input_ids"] == [tokenizer.cls_id] + row + [tokenizer.sep_id], vector["text"]
        assert json.loads(json.dumps(vector, ensure_ascii=False)) == vector


@pytest.mark.slow
def test_failed_export_leaves_nothing_and_cli_errors_are_clear(pretrained, pretrained_tiny, tmp_path, monkeypatch):
    from albert_tf import export

    base = tmp_path / "serving"
    first = export.export_saved_model(pretrained.model.backbone, str(base), warmup=False)
    assert first.endswith("/1")

    def broken(*args, **kwargs):
        raise export.ExportError("simulated mismatch")

    with monkeypatch.context() as patched:  # only here: the commands below run the real verification
        patched.setattr(export.verify, "verify_saved_model", broken)
        with pytest.raises(export.ExportError, match="simulated"):
            export.export_saved_model(pretrained.model.backbone, str(base), warmup=False)
    assert sorted(os.listdir(base)) == ["1"]  # no version 2, no staging left
    assert os.path.isfile(os.path.join(first, "saved_model.pb"))
    with pytest.raises(export.ExportError, match="max_position_embeddings"):
        export.export_saved_model(pretrained.model.backbone, str(base), max_seq_length=4096)
    missing = str(tmp_path / "missing.model")  # the CLI resolves the vocabulary flag before anything is written
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    monkeypatch.chdir(REPO)
    for args, message in (
        (
            ["--model_dir", str(pretrained_tiny / "checkpoints"), "--output_dir", str(tmp_path / "x")],
            "training checkpoint",
        ),
        (["--model_dir", str(tmp_path / "missing"), "--output_dir", str(tmp_path / "x")], "does not exist"),
        (
            [
                "--model_dir",
                str(pretrained_tiny),
                "--output_dir",
                str(tmp_path / "x"),
                "--format",
                "tflite",
                "--max_seq_length",
                "1000",
            ],
            "max_position_embeddings",
        ),
        *(
            (
                ["--model_dir", str(pretrained_tiny), "--output_dir", str(tmp_path / "x"), "--format", fmt]
                + ["--spm_model_file", missing],
                f"--spm_model_file {missing}: cannot be read",
            )
            for fmt in ("saved_model", "tflite")
        ),
    ):
        result = run_command("albert_tf.export", args)
        assert result.returncode != 0 and message in result.stderr, result.stderr[-2000:]
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "x").exists() or not os.listdir(tmp_path / "x")


# ---- --version negative or existing; serve_text and texts over the segmenting limit (hardening probes) ----
def test_export_refuses_negative_or_existing_versions_and_removes_stale_staging(tmp_path):
    from albert_tf.export import ExportError, export_saved_model

    from toy_inputs import tiny_pretrainer

    pretrainer = tiny_pretrainer()

    base = tmp_path / "serving"
    first = export_saved_model(pretrainer.backbone, str(base), version=3, warmup=False)
    served = sorted(os.listdir(first))
    stale = base / ".staging-7-abc123"  # what a killed export leaves
    (stale / "variables").mkdir(parents=True)
    (stale / "variables" / "variables.data-00000-of-00001").write_bytes(b"x" * 1000)
    with pytest.raises(
        ExportError, match=r"^--version 3: .*/serving/3 exists \(TF Serving may be serving it\).* \(4\)"
    ):
        export_saved_model(pretrainer.backbone, str(base), version=3, warmup=False)
    with pytest.raises(ExportError, match=r"^--version -1: TF Serving's versions are numbers ≥ 0"):
        export_saved_model(pretrainer.backbone, str(base), version=-1, warmup=False)
    assert sorted(os.listdir(first)) == served and stale.exists()
    assert export_saved_model(pretrainer.backbone, str(base), warmup=False).endswith("/serving/4")
    assert sorted(os.listdir(base)) == ["3", "4"]


@pytest.mark.slow
def test_serve_text_refuses_a_text_over_the_limit_and_keeps_serving(fox_spm, tmp_path):
    from albert_tf.export import export_saved_model
    from albert_tf.tokenization import MAX_SEGMENTED_CHARS, SentencePieceTokenizer

    from toy_inputs import toy_backbone

    backbone = toy_backbone()
    tokenizer = SentencePieceTokenizer(fox_spm)
    path = export_saved_model(backbone, str(tmp_path / "served"), tokenizer=tokenizer, max_seq_length=16)
    serve = tf.saved_model.load(path).signatures["serve_text"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="a text has more than 1,000,000 characters to segment"):
        serve(text_a=tf.constant(["fine", "x" * (MAX_SEGMENTED_CHARS + 1)]))
    too_much = "the texts of the request \\(text_a, or text_b\\) have more than 1,000,000 characters to segment in all"
    with pytest.raises(tf.errors.InvalidArgumentError, match=too_much):  # the request's total
        serve(text_a=tf.constant(["x" * (MAX_SEGMENTED_CHARS // 2 + 1)] * 2))
    with pytest.raises(tf.errors.InvalidArgumentError, match="text_a: a request needs at least one text"):
        serve(text_a=tf.constant([], tf.string))
    answered = serve(text_a=tf.constant(["the fox", "y" * 1000]))
    first = [tokenizer.cls_id] + tokenizer.encode("the fox") + [tokenizer.sep_id]
    assert answered["input_ids"].numpy()[0, : len(first)].tolist() == first


# ---- issue 41 (weak): calibration data that would calibrate on noise, and flags that do not apply ----
def _tiny(kind):
    from albert_tf import AlbertBackbone, AlbertConfig
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.models.pretrainer import AlbertPretrainer

    backbone = AlbertBackbone.from_albert_config(AlbertConfig.from_json_file(str(REPO / "configs/albert_tiny.json")))
    return AlbertClassifier(backbone, num_classes=2) if kind == "classifier" else AlbertPretrainer(backbone)


@pytest.mark.parametrize(
    "content,message",
    [
        (b"a fine sentence\n\x00\x01\x02 more\n", r"bad.txt: line 2 holds NUL bytes: a binary file"),
        (b"caf\xe9 au lait\n" * 20, r"bad.txt: line 1 is not UTF-8 text"),
        (
            b"\xef\xbb\xbfsentence\tlabel\nit 's a charming journey .\t1\nunflinchingly bleak .\t0\n",
            r"bad.txt: a table \(header 'sentence \| label', 2 tab-separated columns.*give --representative_task",
        ),
    ],
)
def test_representative_text_refuses_binary_bytes_and_a_table(tmp_path, content, message):
    from albert_tf.cli.calibration import read_texts
    from albert_tf.export.representative import RepresentativeDataError

    (tmp_path / "bad.txt").write_bytes(content)
    with pytest.raises(RepresentativeDataError, match=message):
        read_texts(str(tmp_path / "bad.txt"), None, 500)


def test_full_int8_refuses_fewer_than_16_calibration_examples(tmp_path, real_data):
    from albert_tf.cli.calibration import calibration_texts
    from albert_tf.export import export_tflite
    from albert_tf.export.representative import RepresentativeDataError

    model, output = _tiny("classifier"), tmp_path / "tflite"
    lines = wikitext_lines(real_data, 40)
    (tmp_path / "one.txt").write_text(lines[0] + "\n", encoding="utf-8")
    (tmp_path / "many.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(RepresentativeDataError, match=r"one.txt: holds 1 example\(s\); .* at least 16"):
        calibration_texts(str(tmp_path / "one.txt"), None, 500)
    with pytest.raises(RepresentativeDataError, match=r"--representative_samples 1: must be at least 16"):
        calibration_texts(str(tmp_path / "many.txt"), None, 1)
    with pytest.raises(RepresentativeDataError, match=r"calibration needs at least 16 examples of real text, got 1"):
        export_tflite(model, str(output), "full_int8", calibration_texts=[(lines[0], None)])
    assert not output.exists()


def test_representative_task_without_full_int8_is_refused(tmp_path, pretrained_tiny, monkeypatch):
    monkeypatch.chdir(REPO)
    args = ["--model_dir", str(pretrained_tiny), "--output_dir", str(tmp_path / "out"), "--format", "tflite"]
    result = run_command("albert_tf.export", args + ["--representative_task", "sst-2"])
    last = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 1 and last.startswith("error: --representative_task: only --quantize full_int8"), last
    assert not (tmp_path / "out").exists()


def test_max_predictions_per_seq_is_checked_only_for_an_mlm_model(tmp_path):
    from albert_tf.export import ExportError, export_tflite

    # A classifier has no masked positions: the MLM flag's default (20) must not refuse length 16.
    path = export_tflite(_tiny("classifier"), str(tmp_path / "classifier"), "none", max_seq_length=16)
    assert os.path.isfile(path)
    with pytest.raises(ExportError, match=r"--max_predictions_per_seq 20: must be in \[1, --max_seq_length\]"):
        export_tflite(_tiny("pretrainer"), str(tmp_path / "mlm"), "none", max_seq_length=16)


@pytest.mark.slow
def test_export_cli_refuses_representative_flags_on_a_saved_model(tmp_path, pretrained_tiny, real_data, monkeypatch):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    monkeypatch.chdir(REPO)
    output = tmp_path / "out"
    dev = str(real_data / "glue" / "SST-2" / "dev.tsv")
    for extra in (["--representative_task", "sst-2"], ["--representative_data", dev]):
        args = ["--model_dir", str(pretrained_tiny), "--output_dir", str(output), "--format", "saved_model"] + extra
        result = run_command("albert_tf.export", args)
        flag = extra[0]
        assert result.returncode != 0, result.stderr[-2000:]
        assert f"{flag}: only --format tflite --quantize full_int8 calibrates" in result.stderr, result.stderr[-2000:]
        assert "Traceback" not in result.stderr and not output.exists()


def test_export_formats_come_from_the_target_registry(tmp_path, pretrained_tiny, monkeypatch):
    """`--format` offers every registered target, and a new one is a class plus its registration."""
    from albert_tf.export import targets

    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    base = ["--model_dir", str(pretrained_tiny), "--output_dir", str(tmp_path / "x")]
    for extra, message in (
        (["--format", "early_exit_tflite"], "the model (AlbertPretrainer) has no internal classifiers"),
        (["--format", "early_exit_tflite", "--quantize", "dynamic_int8"], "the early-exit TFLite file is float32"),
        (["--format", "tflite", "--precision", "bfloat16"], "TFLite has no bf16 kernels"),
    ):
        result = run_command("albert_tf.export", base + extra)
        assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr[-2000:]
        assert message in result.stderr
    assert not (tmp_path / "x").exists()

    monkeypatch.setitem(targets.TARGETS, "config_only", None)  # so the registration is undone after the test

    @targets.register
    class ConfigOnly(targets.ExportTarget):
        name = "config_only"
        help = "the model's albert_config.json"

        def write(self, model, tokenizer, settings):
            from albert_tf.formats import backbone_of

            os.makedirs(settings.output_dir, exist_ok=True)
            path = os.path.join(settings.output_dir, "albert_config.json")
            backbone_of(model).albert_config.to_json_file(path)
            return path

    assert isinstance(targets.TARGETS["config_only"], ConfigOnly)
    result = run_command("albert_tf.export", base + ["--format", "config_only"])
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["export"] == str(tmp_path / "x" / "albert_config.json")
    written = json.loads((tmp_path / "x" / "albert_config.json").read_text())
    final = json.loads((pretrained_tiny / "final" / "albert_config.json").read_text())
    assert written["hidden_size"] == final["hidden_size"]
