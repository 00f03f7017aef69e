"""`python -m albert_tf.predict --patience`: early exit at prediction time (PABEE), on real SST-2 sentences."""

import json
import os

import keras
import numpy as np
import pytest

from albert_tf.cli.predict import run
from albert_tf.inference import PredictError, pack, pad_batch
from albert_tf.tokenization import SentencePieceTokenizer

from command_helpers import run_command
from early_exit_helpers import build, reference_exit
from interop_helpers import save_ours
from paths import REPO

pytestmark = pytest.mark.realdata


@pytest.fixture(scope="module")
def sentences(real_data):
    lines = (real_data / "glue" / "SST-2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:41]
    return [line.split("\t")[0].strip() for line in lines]


def split_by_every_classifier(model, tokenizer, texts):
    """Heads that each split `texts` in two (a random model's pooled vectors differ little between
    sentences, so its classifiers all answer alike): steeper kernels, biases at the median."""
    kernel = model.exit_classifiers.kernel
    kernel.assign(keras.ops.convert_to_numpy(kernel) * 100)
    exit_logits = exit_logits_of(model, tokenizer, texts)
    bias = keras.ops.convert_to_numpy(model.exit_classifiers.bias)
    decided = exit_logits[..., -1] - (exit_logits[..., 0] if exit_logits.shape[-1] > 1 else 0)
    bias[:, -1] -= np.median(decided, axis=0)
    model.exit_classifiers.bias.assign(bias)
    return model


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory, wikitext_spm, sentences):
    model = split_by_every_classifier(
        build(num_classes=2, vocab_size=4000), SentencePieceTokenizer(wikitext_spm), sentences
    )
    return model, save_ours(model, tmp_path_factory.mktemp("early_exit_classifier"), wikitext_spm)


def exit_logits_of(model, tokenizer, texts, text_b=None, max_seq_length=128):
    """Every classifier's logits, each row alone (no padding): what the exit rule reads."""
    rows = []
    for text in texts:
        batch = pad_batch([pack(tokenizer, text, text_b, max_seq_length)])
        rows.append(keras.ops.convert_to_numpy(model(batch)["exit_logits"])[0])
    return np.array(rows)


def softmax(logits):
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_patience_on_a_file_writes_each_lines_answer_and_layers(classifier_dir, sentences, wikitext_spm, tmp_path):
    model, directory = classifier_dir
    (tmp_path / "in.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    exit_logits = exit_logits_of(model, SentencePieceTokenizer(wikitext_spm), sentences)
    for patience in (1, 2, 4):
        output = tmp_path / f"p{patience}.jsonl"
        lines = run(
            directory,
            input_file=str(tmp_path / "in.txt"),
            output_file=str(output),
            batch_size=16,  # rows of a batch exit on their own
            patience=patience,
            progress=False,
        )
        records = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
        assert [r["text"] for r in records] == sentences
        answers, layers = reference_exit(exit_logits, patience)
        assert [r["layers_used"] for r in records] == layers.tolist()
        np.testing.assert_allclose([r["probabilities"] for r in records], softmax(answers), atol=1e-4)
        assert [r["label"] for r in records] == answers.argmax(-1).tolist()
        assert lines == [f"wrote {output} (40 lines, {layers.mean():.2f} of 4 layers on average)"]
        if patience == 2:
            assert len(set(layers.tolist())) > 1, layers  # the lines did not all stop at one depth


def test_patience_on_a_text_pair_prints_the_answer_and_layers_used(classifier_dir, sentences, wikitext_spm):
    model, directory = classifier_dir
    text, text_b = sentences[0], sentences[1]
    exit_logits = exit_logits_of(model, SentencePieceTokenizer(wikitext_spm), [text], text_b)
    full_depth = run(directory, text=text, text_b=text_b)  # the default: the full-depth answer
    assert full_depth == [f"class {i}: {p:.4f}" for i, p in enumerate(softmax(exit_logits[0, -1]))]
    for patience in (1, 2, 3, 4):
        answers, layers = reference_exit(exit_logits, patience)
        lines = run(directory, text=text, text_b=text_b, patience=patience)
        assert lines[-1] == f"layers used: {layers[0]} of 4"
        assert lines[:-1] == [f"class {i}: {p:.4f}" for i, p in enumerate(softmax(answers[0]))]
    assert run(directory, text=text, text_b=text_b, patience=4)[:-1] == full_depth


def test_regression_takes_the_threshold_rule(sentences, wikitext_spm, tmp_path):
    tokenizer = SentencePieceTokenizer(wikitext_spm)
    model = split_by_every_classifier(build(num_classes=1, vocab_size=4000), tokenizer, sentences[:12])
    directory = save_ours(model, tmp_path / "model", wikitext_spm)
    exit_logits = exit_logits_of(model, tokenizer, sentences[:12])
    threshold = float(np.median(np.abs(np.diff(exit_logits[..., 0], axis=1))))
    (tmp_path / "in.txt").write_text("\n".join(sentences[:12]), encoding="utf-8")
    run(directory, input_file=str(tmp_path / "in.txt"), output_file=str(tmp_path / "out.jsonl"), patience=2,
        threshold=threshold, progress=False)  # fmt: skip
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    answers, layers = reference_exit(exit_logits, 2, threshold)
    assert [r["layers_used"] for r in records] == layers.tolist() and len(set(layers.tolist())) > 1
    np.testing.assert_allclose([r["score"] for r in records], answers[:, 0], atol=1e-3)
    with pytest.raises(PredictError, match="regression model needs --threshold"):
        run(directory, text="x", patience=2)
    with pytest.raises(PredictError, match=r"--threshold -1.0: must be a finite number ≥ 0"):
        run(directory, text="x", patience=2, threshold=-1.0)


def test_bad_early_exit_requests_are_clear_errors(classifier_dir, wikitext_spm, tmp_path):
    from interop_helpers import build as build_plain
    from interop_helpers import tiny_config

    _, directory = classifier_dir
    plain = save_ours(build_plain("classifier", tiny_config(vocab_size=4000)), tmp_path / "plain", wikitext_spm)
    with pytest.raises(PredictError, match=r"\(AlbertClassifier\) has no internal classifiers; fine-tune it with"):
        run(plain, text="x", patience=2)
    for patience in (0, 5):
        with pytest.raises(PredictError, match=rf"--patience {patience}: must be in \[1, 4\]"):
            run(directory, text="x", patience=patience)
    with pytest.raises(PredictError, match="--threshold: the model classifies"):
        run(directory, text="x", patience=2, threshold=0.1)
    with pytest.raises(PredictError, match="--threshold needs --patience"):
        run(directory, text="x", threshold=0.1)
    (tmp_path / "in.txt").write_text("a\n", encoding="utf-8")
    with pytest.raises(PredictError, match="--patience writes JSON lines; name a .jsonl file"):
        run(directory, input_file=str(tmp_path / "in.txt"), output_file=str(tmp_path / "o.npy"), patience=2)
    assert not (tmp_path / "o.npy").exists()


def test_cli_patience_flag_and_its_one_line_error(classifier_dir, monkeypatch):
    _, directory = classifier_dir
    monkeypatch.chdir(REPO)

    def predict(*flags):
        return run_command("albert_tf.predict", [f"--model_dir={directory}", "--text=a fine film", *flags])

    result = predict("--patience=9")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: --patience 9: must be in [1, 4] (the model's 4 layer applications; 4 is full depth)"]
    result = predict("--patience=1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "layers used: 1 of 4"


@pytest.mark.slow
def test_every_export_target_runs_as_documented_and_the_early_exit_file_through_predict(
    wikitext_spm, sentences, tmp_path, monkeypatch
):
    """`predict --patience` refused the file `export --format early_exit_tflite` writes ("answers at full
    depth"), whose directory lacked the tokenizer files the plain TFLite directory carries. The TFLite
    targets, exported by the command, run through predict as docs/export.md and docs/early_exit.md say
    (the saved_model target: test_early_exit.py::test_text_signatures_and_warmup_requests_of_an_early_exit_export).

    The model is `build`'s, not `classifier_dir`'s: heads 100 times steeper amplify float32 rounding past
    the export's own 1e-5 check."""
    from albert_tf.export.early_exit import TFLITE_NAME as EARLY_EXIT_TFLITE_NAME
    from albert_tf.export.targets import TARGETS

    model = build(num_classes=2, vocab_size=4000)
    directory = save_ours(model, tmp_path / "model", wikitext_spm)
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    assert sorted(TARGETS) == ["early_exit_tflite", "saved_model", "tflite"]  # a new target: run it here too
    for target in ("tflite", "early_exit_tflite"):
        flags = [f"--model_dir={directory}", f"--output_dir={tmp_path / target}", f"--format={target}"]
        exported = run_command("albert_tf.export", flags + ["--max_seq_length=32"])
        assert exported.returncode == 0, exported.stderr[-2000:]
    texts = sentences[:8]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    tokenizer = SentencePieceTokenizer(wikitext_spm)
    exit_logits = exit_logits_of(model, tokenizer, texts, max_seq_length=32)  # the files' length

    # The early-exit file, written alone or beside the full-depth one, has the same files beside it.
    beside = {"albert_config.json", "spm.model", "tokenizer.json", "tokenizer_test_vectors.json", "settings.json"}
    assert set(os.listdir(tmp_path / "tflite")) == beside | {"albert_float32.tflite", EARLY_EXIT_TFLITE_NAME}
    assert set(os.listdir(tmp_path / "early_exit_tflite")) == beside | {EARLY_EXIT_TFLITE_NAME}
    for early in (
        tmp_path / "tflite" / EARLY_EXIT_TFLITE_NAME,
        tmp_path / "early_exit_tflite" / EARLY_EXIT_TFLITE_NAME,
    ):
        for patience in (1, 2, 4):
            answers, layers = reference_exit(exit_logits, patience)
            output = tmp_path / f"{early.parent.name}_{patience}.jsonl"
            result = run_command(
                "albert_tf.predict",
                [f"--model_dir={early}", f"--input_file={tmp_path / 'in.txt'}", f"--output_file={output}",
                 f"--patience={patience}"],
            )  # fmt: skip
            assert result.returncode == 0, result.stderr[-2000:]
            records = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
            assert [r["layers_used"] for r in records] == layers.tolist()
            np.testing.assert_allclose([r["probabilities"] for r in records], softmax(answers), atol=1e-4)
        lines = run(str(early), text=texts[0], patience=2)
        assert lines[-1] == f"layers used: {reference_exit(exit_logits[:1], 2)[1][0]} of 4"
        full_depth = [float(line.split(": ")[1]) for line in run(str(early), text=texts[0])]
        np.testing.assert_allclose(full_depth, softmax(exit_logits[0, -1]), atol=1e-4)
    plain = tmp_path / "tflite" / "albert_float32.tflite"
    with pytest.raises(PredictError, match=rf"--patience: {plain} answers at full depth; its early-exit file .* takes"):
        run(str(plain), text=texts[0], patience=2)
