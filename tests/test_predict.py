"""python -m albert_tf.predict: MLM fillers, class probabilities, embeddings of a file, errors."""

import json
import os

import numpy as np
import pytest

from albert_tf.inference import PredictError, fill_mask
from albert_tf.predict import run
from albert_tf.tokenization import SentencePieceTokenizer, load_tokenizer
from albert_tf.tokenization.packing import encode_with_masks

from command_helpers import run_command
from interop_helpers import build, save_ours, train_toy_spm


@pytest.fixture(scope="module")
def toy_spm(tmp_path_factory):
    return train_toy_spm(tmp_path_factory.mktemp("spm"))


@pytest.fixture(scope="module")
def pretrainer_dir(tmp_path_factory, toy_spm):
    directory = tmp_path_factory.mktemp("mlm")
    model = build("pretrainer")
    save_ours(model, directory, toy_spm)
    return model, str(directory)


def test_fill_mask_lists_top_k_for_each_mask_as_the_model_scores_them(pretrainer_dir, toy_spm):
    model, directory = pretrainer_dir
    lines = run(directory, text="The capital of [MASK] is [MASK].", top_k=3)
    assert [line for line in lines if line.startswith("[MASK]")] == ["[MASK] 1:", "[MASK] 2:"]
    assert len(lines) == 2 + 2 * 3
    tokenizer = SentencePieceTokenizer(toy_spm)
    results = fill_mask(model, tokenizer, "The capital of [MASK] is [MASK].", top_k=3)
    # The same packing as training: [CLS] ids [SEP], the masks at the mask id's positions.
    ids = [2] + encode_with_masks(tokenizer, "The capital of [MASK] is [MASK].") + [3]
    positions = [i for i, t in enumerate(ids) if t == tokenizer.mask_id]
    logits = model(
        {
            "input_ids": np.array([ids], np.int32),
            "input_mask": np.ones((1, len(ids)), np.int32),
            "segment_ids": np.zeros((1, len(ids)), np.int32),
            "masked_lm_positions": np.array([positions], np.int32),
        }
    )["mlm_logits"].numpy()[0]
    for row, candidates in zip(logits, results):
        best = np.argsort(-row)[:3]
        assert [piece for piece, _ in candidates] == tokenizer.convert_ids_to_tokens(best)
        probabilities = [p for _, p in candidates]
        assert probabilities == sorted(probabilities, reverse=True) and 0 < sum(probabilities) <= 1
    with pytest.raises(PredictError, match=r"no \[MASK\] in the text"):
        run(directory, text="no mask here")


def test_classifier_prints_probabilities_for_pairs(tmp_path, toy_spm):
    directory = save_ours(build("classifier"), tmp_path, toy_spm)
    lines = run(directory, text="the quick fox", text_b="the lazy dog")
    assert [line.split(":")[0] for line in lines] == ["class 0", "class 1", "class 2"]
    assert abs(sum(float(line.split()[-1]) for line in lines) - 1) < 1e-3


def test_a_classifier_answers_every_line_of_a_file_as_for_one_text(tmp_path, toy_spm):
    directory = save_ours(build("classifier"), tmp_path / "model", toy_spm)
    texts = ["the quick fox", "a lazy dog sleeps all day", "fox"]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    lines = run(directory, input_file=str(tmp_path / "in.txt"), output_file=str(tmp_path / "a.jsonl"), progress=False)
    assert lines == [f"wrote {tmp_path / 'a.jsonl'} (3 lines)"]
    records = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert [r["text"] for r in records] == texts
    for record in records:
        alone = [float(line.split()[-1]) for line in run(directory, text=record["text"])]
        np.testing.assert_allclose(record["probabilities"], alone, atol=2e-4)  # printed to 4 decimals
        assert record["label"] == int(np.argmax(record["probabilities"]))
    with pytest.raises(PredictError, match="a classifier answers in JSON lines; name a .jsonl file"):
        run(directory, input_file=str(tmp_path / "in.txt"), output_file=str(tmp_path / "a.npy"), progress=False)
    assert not (tmp_path / "a.npy").exists()


def test_embeddings_of_a_file_in_batches_npy_and_json_lines(tmp_path, pretrainer_dir, capsys):
    model, directory = pretrainer_dir
    lines = ["the quick brown fox", "", "paris is the capital of france", "dog"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    run(
        directory, input_file=str(tmp_path / "in.txt"), output_file=str(tmp_path / "e.npy"), batch_size=3, progress=True
    )
    assert "4/4" in capsys.readouterr().out  # the progress bar
    vectors = np.load(tmp_path / "e.npy")
    assert vectors.shape == (4, 64) and vectors.dtype == np.float32
    run(
        directory,
        input_file=str(tmp_path / "in.txt"),
        output_file=str(tmp_path / "e.jsonl"),
        batch_size=1,
        progress=False,
    )
    rows = [json.loads(line) for line in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert [row["text"] for row in rows] == lines
    # Batching and padding do not change a line's embedding.
    np.testing.assert_allclose(np.array([row["embedding"] for row in rows]), vectors, atol=1e-5)
    assert sorted(os.listdir(tmp_path)) == ["e.jsonl", "e.npy", "in.txt"]


def test_reads_hf_and_keras_hub_directories(tmp_path, pretrainer_dir):
    from albert_tf.convert_checkpoint import convert

    _, directory = pretrainer_dir
    expected = run(directory, text="the [MASK] fox")
    for output_format in ("hf", "keras_hub"):  # the vocabulary travels with the weights
        convert(directory, output_dir=str(tmp_path / output_format), output_format=output_format)
        assert run(str(tmp_path / output_format), text="the [MASK] fox") == expected


def test_bad_requests_are_clear_errors(tmp_path, pretrainer_dir):
    from albert_tf.formats import ModelFileError

    _, directory = pretrainer_dir
    with pytest.raises(ModelFileError, match="does not exist"):
        run(str(tmp_path / "nope"), text="x")
    with pytest.raises(PredictError, match="--input_file needs --output_file"):
        run(directory, input_file=str(tmp_path / "x.txt"))
    with pytest.raises(PredictError, match="exactly one of --text and --input_file"):
        run(directory)
    with pytest.raises(PredictError, match="exceeds the model's max_position_embeddings=128"):
        run(directory, text="[MASK]", max_seq_length=129)


def test_cli_prints_fillers_and_one_line_errors(pretrainer_dir):
    _, directory = pretrainer_dir
    result = run_command("albert_tf.predict", [f"--model_dir={directory}", "--text=no mask"])
    assert result.returncode == 1 and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: no [MASK] in the text (within the first 128 pieces)"], result.stderr
    result = run_command("albert_tf.predict", [f"--model_dir={directory}", "--text=the capital of [MASK]", "--top_k=2"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "[MASK] 1:" and len(result.stdout.splitlines()) == 3


def test_an_empty_input_file_is_one_line_and_writes_nothing(tmp_path, toy_spm):
    # A .tflite classifier once printed NumPy's "zero-size array" traceback for it.
    from albert_tf.export import export_tflite

    model = build("classifier")
    save_ours(model, tmp_path / "m", toy_spm)
    tflite = export_tflite(
        model, str(tmp_path / "tflite"), "none", max_seq_length=16, tokenizer=SentencePieceTokenizer(str(toy_spm))
    )
    (tmp_path / "empty.txt").write_text("")
    for model_dir in (tmp_path / "m", tflite):
        output = tmp_path / "out.jsonl"
        argv = [f"--model_dir={model_dir}", f"--input_file={tmp_path / 'empty.txt'}", f"--output_file={output}"]
        result = run_command("albert_tf.predict", argv)
        assert result.returncode == 1 and result.stderr.strip().splitlines() == [
            f"error: --input_file {tmp_path / 'empty.txt'}: is empty (one input per line)"
        ], result.stderr
        assert not output.exists()


def test_an_output_file_among_the_models_own_files_is_refused(tmp_path, toy_spm):
    """Issue 41 defect 7: `--output_file m/model.keras --model_dir m` replaced the model it read."""
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    save_ours(build("classifier"), model_dir, toy_spm)
    (tmp_path / "in.txt").write_text("a line\n")
    before = {name: (model_dir / name).read_bytes() for name in os.listdir(model_dir)}
    for output in (model_dir / "model.keras", model_dir / "emb.npy", model_dir / "sub" / "x.jsonl"):
        with pytest.raises(PredictError, match=f"--output_file {output} is inside the model directory {model_dir}"):
            run(str(model_dir), input_file=str(tmp_path / "in.txt"), output_file=str(output), progress=False)
    keras_file = str(model_dir / "model.keras")  # the .keras file itself as --model_dir
    for output in (keras_file, str(model_dir / "spm.model"), str(model_dir / "tokenizer.json")):
        with pytest.raises(PredictError, match="is a file of the model --model_dir .* it would be replaced"):
            run(keras_file, input_file=str(tmp_path / "in.txt"), output_file=output, progress=False)
    assert {name: (model_dir / name).read_bytes() for name in os.listdir(model_dir)} == before
    run(keras_file, input_file=str(tmp_path / "in.txt"), output_file=str(model_dir / "a.jsonl"), progress=False)
    assert len((model_dir / "a.jsonl").read_text().splitlines()) == 1  # beside a model file, not one of its own
    result = run_command(
        "albert_tf.predict",
        [
            f"--model_dir={model_dir}",
            f"--input_file={tmp_path / 'in.txt'}",
            f"--output_file={model_dir / 'model.keras'}",
        ],
    )
    assert result.returncode == 1 and result.stderr.strip().splitlines() == [
        f"error: --output_file {model_dir / 'model.keras'} is inside the model directory {model_dir} that "
        "--model_dir reads; write it elsewhere"
    ]
    assert (model_dir / "model.keras").read_bytes() == before["model.keras"]


@pytest.mark.parametrize("name", ["out.csv", "out.tsv", "out", "out.json"])
def test_an_output_file_extension_that_is_not_written_is_refused(tmp_path, pretrainer_dir, name):
    """A `.csv` used to receive JSON lines."""
    _, directory = pretrainer_dir
    (tmp_path / "in.txt").write_text("a line\n")
    with pytest.raises(PredictError, match=r"is not written; name a \.npy \(embeddings\) or \.jsonl"):
        run(directory, input_file=str(tmp_path / "in.txt"), output_file=str(tmp_path / name))
    assert sorted(os.listdir(tmp_path)) == ["in.txt"]


def test_one_call_loads_a_model_directory_and_predicts_on_texts(tmp_path, toy_spm, pretrainer_dir):
    from albert_tf.inference import Predictor, pack, pad_batch, predict

    model = build("classifier")
    directory = save_ours(model, tmp_path, toy_spm)
    texts, texts_b = ["the quick fox", "paris is a city", "dog"], ["the lazy dog", "rome too", "cat"]
    answers = predict(directory, texts, texts_b, batch_size=2)
    tokenizer = SentencePieceTokenizer(toy_spm)
    expected = np.concatenate(
        [np.asarray(model(pad_batch([pack(tokenizer, a, b, 128)]))["logits"]) for a, b in zip(texts, texts_b)]
    )
    np.testing.assert_allclose(answers["logits"], expected, atol=1e-5)
    assert answers["labels"].tolist() == expected.argmax(-1).tolist()
    np.testing.assert_allclose(answers["probabilities"].sum(-1), 1, atol=1e-5)
    _, mlm_directory = pretrainer_dir
    predictor = Predictor.load(mlm_directory, max_seq_length=32)
    assert predictor.predict(texts)["embeddings"].shape == (3, 64)  # not a classifier: its embeddings
    assert len(predictor.fill_mask("the [MASK] fox", top_k=2)[0]) == 2
    with pytest.raises(PredictError, match="3 texts but 1 second segments"):
        predict(directory, texts, texts_b[:1])


# ---- --output_file that is --input_file; a line over the segmenting limit (hardening probes) ----
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
    with pytest.raises(PredictError, match="is a directory"):
        run("no-model-needed", input_file=str(lines), output_file=str(tmp_path))


def test_predict_names_the_line_whose_text_is_over_the_limit(fox_spm, tmp_path):
    from albert_tf import formats
    from albert_tf.predict import PredictError, run
    from albert_tf.tokenization import MAX_SEGMENTED_CHARS

    from toy_inputs import toy_backbone

    model_dir = str(tmp_path / "model")
    formats.save(toy_backbone(), model_dir)
    lines = tmp_path / "lines.txt"
    lines.write_text("a fine line\n" + "z" * (MAX_SEGMENTED_CHARS + 5) + "\n")
    output = tmp_path / "out.npy"
    with pytest.raises(PredictError, match=f"^{lines}:2: a text of 1,000,005 characters"):
        run(
            model_dir, input_file=str(lines), output_file=str(output), tokenizer=load_tokenizer(fox_spm), progress=False
        )
    with pytest.raises(PredictError, match="^--text:1: a text of 1,000,005 characters"):
        run(model_dir, text="z" * (MAX_SEGMENTED_CHARS + 5), tokenizer=load_tokenizer(fox_spm))
    assert not output.exists()
    # A long line with spaces is fine (only its first words are tokenised).
    lines.write_text("the quick brown fox " * 250_000 + "\n")
    run(model_dir, input_file=str(lines), output_file=str(output), tokenizer=load_tokenizer(fox_spm), progress=False)
    assert np.load(output).shape == (1, 64)
