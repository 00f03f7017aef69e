"""The Python API: the tokenizer's batch call, and one call from a model directory to answers."""

import numpy as np
import pytest

from albert_tf.tokenization import SentencePieceTokenizer, TokenizerError
from albert_tf.tokenization.packing import pack_segments


def _sst2_sentences(real_data, count):
    lines = (real_data / "glue" / "SST-2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1 : count + 1]
    return [line.split("\t")[0] for line in lines]


def test_tokenizer_call_pads_rows_equal_to_encode(real_data, wikitext_spm):
    tokenizer = SentencePieceTokenizer(wikitext_spm)
    texts = _sst2_sentences(real_data, 12)
    seconds = list(reversed(texts))
    batch = tokenizer(texts, max_length=24)
    lengths = [min(len(tokenizer.encode(t)) + 2, 24) for t in texts]
    assert batch["input_ids"].shape == (12, max(lengths)) and batch["input_ids"].dtype == np.int32
    for row, text in enumerate(texts):
        ids = [tokenizer.cls_id] + tokenizer.encode(text)[:22] + [tokenizer.sep_id]
        assert batch["input_ids"][row].tolist() == ids + [0] * (batch["input_ids"].shape[1] - len(ids))
        assert batch["input_mask"][row].sum() == len(ids) and not batch["segment_ids"][row].any()

    pairs = tokenizer(texts, seconds, max_length=32, padding="max_length")
    assert {k: v.shape for k, v in pairs.items()} == {k: (12, 32) for k in ("input_ids", "input_mask", "segment_ids")}
    for row, (a, b) in enumerate(zip(texts, seconds)):
        # The original's truncation: the longer segment loses its last piece first.
        ids, segments = pack_segments(tokenizer.encode(a), tokenizer.encode(b), 32, tokenizer.cls_id, tokenizer.sep_id)
        assert pairs["input_ids"][row, : len(ids)].tolist() == ids and not pairs["input_ids"][row, len(ids) :].any()
        assert pairs["segment_ids"][row, : len(ids)].tolist() == segments
        assert pairs["input_mask"][row].sum() == len(ids)
    assert tokenizer(texts[0])["input_ids"].tolist() == batch["input_ids"][:1, : lengths[0]].tolist()

    with pytest.raises(TokenizerError, match="padding='left'"):
        tokenizer(texts, padding="left")
    with pytest.raises(TokenizerError, match="12 texts but 11 second texts"):
        tokenizer(texts, seconds[:11])


# ---- your own data: CSV / JSON lines with named labels -------------------------------------------
NAMES = {"0": "negative", "1": "positive"}


def _sst2_rows(real_data, split, count):
    lines = (real_data / "glue" / "SST-2" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()[1 : count + 1]
    return [(text, NAMES[label]) for text, label in (line.split("\t") for line in lines)]


def _write_csv(path, rows):
    import csv

    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["review", "sentiment"])
        writer.writerows(rows)


def _write_jsonl(path, rows):
    import json

    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"review": text, "sentiment": label}) + "\n" for text, label in rows)


def test_own_files_read_the_same_in_every_format_and_bad_input_names_file_and_line(real_data, tmp_path):
    from albert_tf.tasks.file_task import DataFileError, file_task

    rows = _sst2_rows(real_data, "dev", 50)
    _write_csv(tmp_path / "dev.csv", rows)
    _write_jsonl(tmp_path / "dev.jsonl", rows)
    (tmp_path / "dev.tsv").write_text("".join(f"{t}\t{label}\n" for t, label in rows), encoding="utf-8")
    tasks = [
        file_task(dev_file=str(tmp_path / "dev.csv"), text_column="review", label_column="sentiment"),
        file_task(dev_file=str(tmp_path / "dev.jsonl"), text_column="review", label_column="sentiment"),
        file_task(dev_file=str(tmp_path / "dev.tsv"), text_column="0", label_column="1"),  # header-less: numbers
    ]
    for task in tasks:
        assert task.labels == ("negative", "positive") and not task.is_regression
        examples, _ = task.read("dev")
        assert [(e.text_a, task.labels[e.label]) for e in examples] == rows

    given = file_task(
        dev_file=str(tmp_path / "dev.csv"),
        text_column="review",
        label_column="sentiment",
        labels=["positive", "neutral"],
    )
    with pytest.raises(
        DataFileError, match=r"dev.csv:\d+: unknown label 'negative' \(expected one of positive, neutral\)"
    ):
        given.read("dev")
    with pytest.raises(DataFileError, match=r"dev.csv:2: no column 'text' \(the row has: review, sentiment\)"):
        file_task(dev_file=str(tmp_path / "dev.csv"), labels=["a", "b"]).read("dev")
    (tmp_path / "dev.xlsx").write_text("x")
    with pytest.raises(
        DataFileError, match=r"dev.xlsx: unknown data format '.xlsx'; expected .tsv, .csv or JSON lines"
    ):
        file_task(dev_file=str(tmp_path / "dev.xlsx"))

    # Scores: regression, inferred as transformers' run_glue does (numbers, not all integers).
    sts = (real_data / "glue" / "STS-B" / "dev.tsv").read_text(encoding="utf-8").splitlines()
    header = sts[0].split("\t")
    (tmp_path / "sts.tsv").write_text("\n".join(sts[:40]) + "\n", encoding="utf-8")
    scores = file_task(
        dev_file=str(tmp_path / "sts.tsv"), text_column=header[7], text_b_column=header[8], label_column=header[-1]
    )
    assert scores.is_regression and scores.metric == "pearson"
    examples, _ = scores.read("dev")
    assert [e.label for e in examples] == [float(line.split("\t")[-1]) for line in sts[1:40]]
    assert examples[0].text_b == sts[1].split("\t")[8]


@pytest.fixture(scope="module")
def reviews_run(real_data, pretraining_data, tmp_path_factory):
    """A few steps of fine-tuning on SST-2 rows written as a CSV (train) and JSON lines (dev), named labels."""
    from albert_tf.run_classifier import ClassifierSettings, FileOptions, run

    root = tmp_path_factory.mktemp("reviews")
    _write_csv(root / "train.csv", _sst2_rows(real_data, "train", 64))
    _write_jsonl(root / "dev.jsonl", _sst2_rows(real_data, "dev", 40))
    files = FileOptions(
        train_file=str(root / "train.csv"),
        dev_file=str(root / "dev.jsonl"),
        text_column="review",
        label_column="sentiment",
    )
    settings = ClassifierSettings(
        do_train=True,
        do_eval=True,
        output_dir=str(root / "out"),
        tokenizer=SentencePieceTokenizer(pretraining_data["spm"]),
        albert_config_file=pretraining_data["config"],
        max_seq_length=32,
        train_batch_size=16,
        eval_batch_size=16,
        learning_rate=1e-4,
        train_step=4,
        save_checkpoints_steps=4,
        verbose=False,
    )
    return root, run(settings, files)


def test_own_csv_fine_tunes_and_every_reader_of_the_model_says_the_label_names(real_data, reviews_run, tmp_path):
    import json

    from albert_tf import formats, inference
    from albert_tf.cli import predict as predict_cli

    root, summary = reviews_run
    assert summary["eval"]["num_examples"] == 40
    predictions = (root / "out" / "dev_predictions.tsv").read_text().splitlines()[1:]
    assert {line.split("\t")[1] for line in predictions} <= {"negative", "positive"}

    best = root / "out" / "best"
    texts = [text for text, _ in _sst2_rows(real_data, "dev", 40)]
    predictor = inference.Predictor.load(str(best), max_seq_length=32)
    assert predictor.labels == ("negative", "positive")
    answers = inference.predict(str(best), texts, max_seq_length=32)
    # The one-liner is the model's own call on the tokenizer's batch.
    logits = np.asarray(predictor.model(predictor.tokenizer(texts, max_length=32))["logits"])
    np.testing.assert_allclose(answers["logits"], logits, atol=1e-5)
    assert answers["label_names"] == [("negative", "positive")[i] for i in logits.argmax(-1)]

    lines = predict_cli.run(str(best), text=texts[0], max_seq_length=32)
    assert [line.split(":")[0] for line in lines] == ["negative", "positive"]

    hf_dir = tmp_path / "hf"
    hf_dir.mkdir()
    formats.save(predictor.model, str(hf_dir), format="hf")
    config = json.loads((hf_dir / "config.json").read_text())
    assert config["id2label"] == {"0": "negative", "1": "positive"}
    assert config["label2id"] == {"negative": 0, "positive": 1}
    assert inference.Predictor(formats.load(str(hf_dir)).model, predictor.tokenizer, 32).labels == predictor.labels

    preset = tmp_path / "keras_hub"
    preset.mkdir()
    formats.save(predictor.model, str(preset), format="keras_hub")
    assert json.loads((preset / "metadata.json").read_text())["labels"] == ["negative", "positive"]
    assert inference.label_names(formats.load(str(preset)).model) == ("negative", "positive")


@pytest.mark.slow
def test_exported_files_carry_the_label_names_and_predict_reads_a_tflite_file(real_data, reviews_run, tmp_path):
    import json

    import tensorflow as tf

    from albert_tf.cli import predict as predict_cli
    from albert_tf.export import export_saved_model, export_tflite
    from albert_tf.inference import Predictor, TFLitePredictor
    from albert_tf.tflite_file import TFLiteFileError, labels_of

    root, _ = reviews_run
    predictor = Predictor.load(str(root / "out" / "best"), max_seq_length=32)
    texts = [text for text, _ in _sst2_rows(real_data, "dev", 6)]
    keras_answers = predictor.predict(texts)

    # SavedModel: a `label_name` output beside `label`, from both the ids and the text signatures.
    exported = export_saved_model(
        predictor.model, str(tmp_path / "serving"), tokenizer=predictor.tokenizer, max_seq_length=32, warmup=False
    )
    served = tf.saved_model.load(exported).signatures["serve_text"](text_a=tf.constant(texts))
    assert [n.decode() for n in served["label_name"].numpy()] == keras_answers["label_names"]
    np.testing.assert_allclose(served["logits"].numpy(), keras_answers["logits"], atol=1e-4)

    # TFLite: the names in the file's metadata; the predict command runs the file as a phone would.
    tflite = export_tflite(predictor.model, str(tmp_path / "tflite"), max_seq_length=32, tokenizer=predictor.tokenizer)
    assert labels_of(tflite) == ("negative", "positive")
    on_file = TFLitePredictor.load(tflite)
    assert on_file.max_seq_length == 32 and on_file.labels == ("negative", "positive")
    file_answers = on_file.predict(texts)
    np.testing.assert_allclose(file_answers["logits"], keras_answers["logits"], atol=1e-4)
    assert file_answers["label_names"] == keras_answers["label_names"]
    lines = predict_cli.run(tflite, text=texts[0])
    assert lines == [f"{name}: {p:.4f}" for name, p in zip(("negative", "positive"), file_answers["probabilities"][0])]
    (tmp_path / "lines.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = tmp_path / "answers.jsonl"
    predict_cli.run(tflite, input_file=str(tmp_path / "lines.txt"), output_file=str(out))
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["label_name"] for r in records] == keras_answers["label_names"]
    assert [r["text"] for r in records] == texts

    # What the file cannot do is said, naming it.
    with pytest.raises(predict_cli.PredictError, match=r"--max_seq_length 64: .*takes 3 to 32 pieces"):
        predict_cli.run(tflite, text=texts[0], max_seq_length=64)
    with pytest.raises(predict_cli.PredictError, match="--patience: .* answers at full depth"):
        predict_cli.run(tflite, text=texts[0], patience=2)
    (tmp_path / "broken.tflite").write_bytes(b"not a flatbuffer")
    with pytest.raises(TFLiteFileError, match=r"broken.tflite: not a TFLite file"):
        TFLitePredictor.load(str(tmp_path / "broken.tflite"), tokenizer=predictor.tokenizer)


@pytest.mark.slow
def test_run_classifier_scores_a_tflite_file_on_the_dev_set_as_a_phone_runs_it(real_data, reviews_run, tmp_path):
    import dataclasses

    from albert_tf.export import export_tflite
    from albert_tf.finetuning.settings import FineTuneError
    from albert_tf.inference import Predictor, TFLitePredictor
    from albert_tf.run_classifier import ClassifierSettings, FileOptions, run
    from albert_tf.tasks.glue import GlueDataError

    root, trained = reviews_run
    predictor = Predictor.load(str(root / "out" / "best"), max_seq_length=32)
    tflite = export_tflite(predictor.model, str(tmp_path / "tflite"), max_seq_length=32, tokenizer=predictor.tokenizer)
    settings = ClassifierSettings(
        do_eval=True, output_dir=str(tmp_path / "scored"), init_checkpoint=tflite, max_seq_length=32, verbose=False
    )
    files = FileOptions(dev_file=str(root / "dev.jsonl"), text_column="review", label_column="sentiment")
    summary = run(settings, files)

    # The file's own answers, one text at a time, are what the run scored and wrote.
    rows = _sst2_rows(real_data, "dev", 40)
    on_file = TFLitePredictor.load(tflite).predict([text for text, _ in rows])
    written = (tmp_path / "scored" / "dev_predictions.tsv").read_text().splitlines()[1:]
    assert [line.split("\t")[1] for line in written] == on_file["label_names"]
    accuracy = np.mean([name == gold for name, (_, gold) in zip(on_file["label_names"], rows)])
    assert summary["eval"]["num_examples"] == 40 and summary["eval"]["accuracy"] == pytest.approx(accuracy)
    # The float32 file agrees with the Keras model it came from, whose run scored the same dev set.
    keras_logits = predictor.predict([text for text, _ in rows])["logits"]
    np.testing.assert_allclose(on_file["logits"], keras_logits, atol=1e-4)

    # A quantized file is scored the same way (what to check before shipping it).
    int8 = export_tflite(
        predictor.model, str(tmp_path / "tflite"), "dynamic_int8", max_seq_length=32, tokenizer=predictor.tokenizer
    )
    int8_names = TFLitePredictor.load(int8).predict([text for text, _ in rows])["label_names"]
    int8_summary = run(dataclasses.replace(settings, init_checkpoint=int8, output_dir=str(tmp_path / "int8")), files)
    expected = np.mean([name == gold for name, (_, gold) in zip(int8_names, rows)])
    assert int8_summary["eval"]["accuracy"] == pytest.approx(expected)

    # --labels in another order read the file's classes by name; other names, another task's file, or
    # training it are refused before any work.
    swapped = run(
        dataclasses.replace(settings, output_dir=str(tmp_path / "swapped")),
        dataclasses.replace(files, labels="positive,negative"),
    )
    assert swapped["eval"] == summary["eval"]
    assert (tmp_path / "swapped" / "dev_predictions.tsv").read_text() == (
        tmp_path / "scored" / "dev_predictions.tsv"
    ).read_text()
    with pytest.raises(GlueDataError, match=r"labels good,bad \(--labels, or the data's\) include good,bad, which"):
        run(settings, dataclasses.replace(files, labels="good,bad"))
    with pytest.raises(FineTuneError, match=r"outputs logits \[2\]; .* outputs logits \[1\]"):
        run(settings, dataclasses.replace(files, task_type="regression"))
    with pytest.raises(FineTuneError, match=r"\.tflite: a \.tflite file is scored, not trained"):
        run(
            dataclasses.replace(settings, do_train=True), dataclasses.replace(files, train_file=str(root / "train.csv"))
        )
    with pytest.raises(FineTuneError, match=r"--max_seq_length 64: .*up to 32 pieces"):
        run(dataclasses.replace(settings, max_seq_length=64), files)


def test_labels_in_another_order_map_by_name_and_a_resume_keeps_labels_and_columns(
    reviews_run, pretraining_data, tmp_path
):
    # Hardening IV defect 2: `--labels positive,negative` on a negative,positive model inverted every answer.
    import dataclasses
    import shutil

    from albert_tf.finetuning.settings import FineTuneError
    from albert_tf.run_classifier import ClassifierSettings, FileOptions, run
    from albert_tf.tasks.glue import GlueDataError

    root, summary = reviews_run
    evaluation = ClassifierSettings(
        do_train=False,
        do_eval=True,
        output_dir=str(tmp_path / "swapped"),
        init_checkpoint=str(root / "out"),
        max_seq_length=32,
        eval_batch_size=16,
        verbose=False,
    )
    files = FileOptions(
        dev_file=str(root / "dev.jsonl"), text_column="review", label_column="sentiment", labels="positive,negative"
    )
    swapped = run(evaluation, files)
    assert swapped["eval"] == summary["eval"]
    written = (tmp_path / "swapped" / "dev_predictions.tsv").read_text()
    assert written == (root / "out" / "dev_predictions.tsv").read_text()
    with pytest.raises(GlueDataError, match=r"include good,bad, which the model was not fine-tuned with \(its la"):
        run(
            dataclasses.replace(evaluation, output_dir=str(tmp_path / "other")),
            dataclasses.replace(files, labels="good,bad"),
        )
    # The finished run again under other labels, or another text column: refused, nothing rewritten.
    copy = tmp_path / "copy"
    shutil.copytree(root / "out", copy)
    before = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    rerun = dataclasses.replace(
        evaluation,
        do_train=True,
        output_dir=str(copy),
        init_checkpoint=None,
        tokenizer=SentencePieceTokenizer(pretraining_data["spm"]),
        albert_config_file=pretraining_data["config"],
        train_batch_size=16,
        learning_rate=1e-4,
        train_step=4,
        save_checkpoints_steps=4,
    )
    rerun_files = dataclasses.replace(files, labels="", train_file=str(root / "train.csv"))
    for changed, named in (
        ({"labels": "positive,negative"}, "labels"),
        ({"text_column": "sentiment", "label_column": "review"}, "columns"),
    ):
        with pytest.raises(FineTuneError, match=rf"were made with other settings \(.*\b{named} \["):
            run(rerun, dataclasses.replace(rerun_files, **changed))
    assert {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()} == before
    assert run(rerun, rerun_files)["history"] == []  # the same settings: nothing to train


def _reviews_argv(root, pretraining_data, output_dir):
    """`reviews_run`'s settings as run_classifier's flags."""
    return [
        "--train_file", root / "train.csv", "--dev_file", root / "dev.jsonl", "--text_column", "review",
        "--label_column", "sentiment", "--albert_config_file", pretraining_data["config"],
        "--spm_model_file", pretraining_data["spm"], "--output_dir", output_dir, "--max_seq_length", "32",
        "--train_batch_size", "16", "--eval_batch_size", "16", "--learning_rate", "1e-4", "--train_step", "4",
        "--save_checkpoints_steps", "4", "--do_train", "--do_eval",
    ]  # fmt: skip


def test_a_refused_resume_keeps_the_run_record_builds_nothing_and_a_rerun_cleans_what_a_kill_left(
    reviews_run, pretraining_data, tmp_path, monkeypatch
):
    # Hardening V defects 1 and 2: a resume refused by its binding had already rewritten settings.json (the
    # run's provenance), and was refused only once the model was built (93-139 s on two cores).
    import json
    import shutil

    from albert_tf.finetuning import start

    from command_helpers import run_command

    root, _ = reviews_run
    run = tmp_path / "run"
    shutil.copytree(root / "out", run)
    record = run / "settings.json"
    record.write_text('{"argv": ["the run that made the checkpoints"]}\n')
    kept = record.read_bytes()
    other_labels, other_columns = tmp_path / "labels" / "train.csv", tmp_path / "columns" / "train.csv"
    other_labels.parent.mkdir()
    other_columns.parent.mkdir()
    other_labels.write_text("review,sentiment\ngreat,good\ndull,bad\n")
    other_columns.write_text("review,title,sentiment\ngreat,a,positive\ndull,b,negative\n")
    argv = _reviews_argv(root, pretraining_data, run)

    def built(*args, **kwargs):
        raise AssertionError("the model was loaded before the resume's binding was checked")

    monkeypatch.setattr(start, "for_training", built)
    refused_by = (
        (["--labels", "positive,negative"], "labels"),
        (["--train_file", other_labels], "labels"),
        (["--train_file", other_columns, "--text_column", "title"], "columns"),
    )
    for changed, named in refused_by:
        refused = run_command("albert_tf.run_classifier", argv + changed)
        assert refused.returncode == 1, refused.stderr[-3000:]
        (line,) = refused.stderr.splitlines()  # one line, no traceback
        assert line.startswith(f"error: {run}: the checkpoints in {run / 'checkpoints'} were made with other "), line
        assert f"other settings ({named} " in line, line
        assert record.read_bytes() == kept  # the refused command is not the run's record
    monkeypatch.undo()

    # What a killed run leaves: staging copies, a half-written TensorFlow checkpoint. A successful rerun cleans up.
    (run / ".staging-best-x1y2").mkdir()
    (run / ".staging-best-x1y2" / "model.keras").write_bytes(b"half")
    (run / ".staging-summary.json-4242").write_text('{"task"')
    (run / "checkpoints" / "ckpt-2_temp").mkdir()
    (run / "checkpoints" / "ckpt-2_temp" / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"half")
    again = run_command("albert_tf.run_classifier", argv)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(record.read_text())["previous"] == [{"argv": ["the run that made the checkpoints"]}]
    assert not [p.name for p in run.rglob("*") if "staging" in p.name or p.name.endswith("_temp")]
    assert (run / "checkpoints" / "ckpt-4.index").is_file()


@pytest.mark.slow
def test_a_resume_on_the_other_backend_is_refused_before_loading_and_keeps_the_record(
    reviews_run, pretraining_data, tmp_path
):
    # Hardening V defect 1: a TensorFlow run resumed with --backend jax rewrote the record (then "backend": "jax").
    import os
    import shutil
    import subprocess
    import sys

    from paths import REPO

    root, _ = reviews_run
    run = tmp_path / "run"
    shutil.copytree(root / "out", run)
    record = run / "settings.json"
    record.write_text('{"argv": ["the run that made the checkpoints"]}\n')
    refused = subprocess.run(
        [sys.executable, "-m", "albert_tf.run_classifier", "--backend", "jax"]
        + [str(arg) for arg in _reviews_argv(root, pretraining_data, run)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        timeout=600,
    )
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert refused.stderr.strip().endswith(
        "were made with other settings (backend 'tensorflow' → 'jax'); resume with the same ones, or use a new "
        "--output_dir"
    ), refused.stderr[-3000:]
    assert record.read_text() == '{"argv": ["the run that made the checkpoints"]}\n'


def test_training_without_dev_data_keeps_the_last_steps_model(real_data, pretraining_data, tmp_path, capsys):
    # Hardening V defect 12: run_squad --do_train without --predict_file was refused; the original trains.
    import json

    from albert_tf.run_classifier import ClassifierSettings, FileOptions, run

    _write_csv(tmp_path / "train.csv", _sst2_rows(real_data, "train", 32))
    settings = ClassifierSettings(
        do_train=True,
        output_dir=str(tmp_path / "out"),
        tokenizer=SentencePieceTokenizer(pretraining_data["spm"]),
        albert_config_file=pretraining_data["config"],
        max_seq_length=16,
        train_batch_size=16,
        train_step=2,
        save_checkpoints_steps=1,
    )
    files = FileOptions(train_file=str(tmp_path / "train.csv"), text_column="review", label_column="sentiment")
    summary = run(settings, files)
    said = capsys.readouterr().out
    assert said.count("no dev data given: best/ will be the model of the last step") == 1
    assert summary["best_step"] == 2 and summary["history"] == []
    best = json.loads((tmp_path / "out" / "best" / "eval_results.json").read_text())
    assert best["global_step"] == 2
    assert not (tmp_path / "out" / "eval_results.txt").exists()  # nothing was evaluated


def test_every_runner_trains_without_dev_data_and_scoring_still_needs_it(tmp_path):
    from albert_tf.finetuning import runner
    from albert_tf.finetuning.settings import FineTuneError, FineTuneSettings
    from albert_tf.tasks.race import RaceTask
    from albert_tf.tasks.squad import SquadTask

    (tmp_path / "train.json").write_text('{"data": []}')
    (tmp_path / "race" / "train" / "high").mkdir(parents=True)
    settings = FineTuneSettings(output_dir=str(tmp_path / "out"), train_step=2)
    squad = SquadTask(train_file=str(tmp_path / "train.json"))
    race = RaceTask(data_dir=str(tmp_path / "race"), levels=("high",))
    for task in (squad, race):
        runner._check_inputs(task, settings, False, "dev", None)  # trains: best/ is the last step's model
        assert not task.has_data("dev")
    with pytest.raises(FineTuneError, match="^--predict_file is needed for evaluation$"):
        runner._check_inputs(squad, settings, True, "dev", None)
    with pytest.raises(FineTuneError, match="race/dev/high: no such file or directory .the dev split, read to evalu"):
        runner._check_inputs(race, settings, True, "dev", None)
    patient = FineTuneSettings(output_dir=str(tmp_path / "out"), train_step=2, early_stopping_patience=2)
    with pytest.raises(FineTuneError, match="^--early_stopping_patience needs dev data to evaluate on; none is given"):
        runner.run(squad, patient, evaluate=False)
    assert not (tmp_path / "out").exists()
