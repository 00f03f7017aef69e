"""`python -m albert_tf.inspect`: what a run, its best/, a .tflite file and a data directory hold, from the files."""

import csv
import json
import os

import pytest

from command_helpers import run_command

pytestmark = pytest.mark.realdata


@pytest.fixture(scope="module")
def named_run(real_data, pretraining_data, tmp_path_factory):
    """Two steps of run_classifier (the command) on SST-2 rows as a CSV with named labels, and its TFLite file."""
    root = tmp_path_factory.mktemp("inspect")
    for split, count in (("train", 32), ("dev", 16)):
        rows = (real_data / "glue" / "SST-2" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()[1 : count + 1]
        with open(root / f"{split}.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["review", "sentiment"])
            writer.writerows(
                (text, ("negative", "positive")[int(label)]) for text, label in (r.split("\t") for r in rows)
            )
    args = [f"--train_file={root / 'train.csv'}", f"--dev_file={root / 'dev.csv'}", "--text_column=review"]
    args += ["--label_column=sentiment", f"--spm_model_file={pretraining_data['spm']}", "--max_seq_length=32"]
    args += [f"--albert_config_file={pretraining_data['config']}", f"--output_dir={root / 'out'}", "--do_train"]
    args += ["--do_eval", "--train_step=2", "--save_checkpoints_steps=2", "--train_batch_size=16"]
    trained = run_command("albert_tf.run_classifier", args)
    assert trained.returncode == 0, trained.stderr[-2000:]
    exported = run_command(
        "albert_tf.export",
        [f"--model_dir={root / 'out'}", f"--output_dir={root / 'tflite'}", "--format=tflite"] + ["--max_seq_length=32"],
    )
    assert exported.returncode == 0, exported.stderr[-2000:]
    return root


def inspect(path, *extra):
    result = run_command("albert_tf.inspect", [*extra, str(path)])
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def test_a_run_and_its_best_model_say_their_labels_sizes_tokenizer_and_command(named_run, pretraining_data):
    from albert_tf import formats

    run_dir = inspect(named_run / "out")
    config = json.loads(open(pretraining_data["config"]).read())
    assert run_dir["model_class"] == "AlbertClassifier" and run_dir["labels"] == ["negative", "positive"]
    assert {k: run_dir["config"][k] for k in ("hidden_size", "vocab_size")} == {
        k: config[k] for k in ("hidden_size", "vocab_size")
    }
    assert run_dir["parameters"] == formats.load(str(named_run / "out")).model.count_params()
    assert run_dir["tokenizer"]["kind"] == "sentencepiece" and run_dir["tokenizer"]["vocab_size"] == 4000
    assert run_dir["run"]["command"] == "albert_tf.run_classifier"
    assert run_dir["run"]["flags"]["label_column"] == "sentiment" and run_dir["run"]["flags"]["train_step"] == 2
    best = inspect(named_run / "out" / "best", "--noweights")
    assert best["labels"] == run_dir["labels"] and best["run"] == run_dir["run"] and best["parameters"] is None


def test_a_tflite_file_and_a_data_directory_are_described(named_run, pretraining_data):
    tflite = next((named_run / "tflite").glob("*.tflite"))
    found = inspect(tflite)
    assert found["format"] == "tflite" and found["labels"] == ["negative", "positive"]
    assert found["max_seq_length"] == 32 and found["inputs"]["input_ids"] == [1, -1]
    assert found["tokenizer"]["kind"] == "sentencepiece" and found["file_bytes"] == tflite.stat().st_size

    data = inspect(pretraining_data["data"])
    metadata = json.loads(open(f"{pretraining_data['data']}/metadata.json").read())
    assert data["format"] == "pretraining data" and data["num_instances"] == metadata["num_instances"]
    assert data["shards"] == 3 and data["vocab_type"] == "sentencepiece" and data["max_seq_length"] == 64


def test_a_path_that_holds_nothing_is_one_line(tmp_path):
    for argv, message in (
        ([str(tmp_path / "missing")], f"error: {tmp_path / 'missing'}: no such file or directory"),
        ([], "error: give one path: python -m albert_tf.inspect PATH"),
    ):
        result = run_command("albert_tf.inspect", argv)
        assert result.returncode == 1 and result.stderr.strip().splitlines()[-1].startswith(message), result.stderr
        assert "Traceback" not in result.stderr


def test_a_keras_hub_preset_is_described_as_one_and_a_stranger_is_not_ours(tmp_path):
    """A preset's own metadata.json made it "pretraining data" with every field null (exit 0)."""
    from albert_tf import formats

    from interop_helpers import build

    (tmp_path / "preset").mkdir()
    formats.save(build("backbone"), str(tmp_path / "preset"), "keras_hub")
    assert (tmp_path / "preset" / "metadata.json").is_file()
    found = inspect(tmp_path / "preset", "--noweights")
    assert found["format"] == "keras_hub" and found["model_class"] == "AlbertBackbone"
    assert found["config"]["vocab_size"] == 80 and found["config"]["num_hidden_groups"] == 2
    (tmp_path / "stranger").mkdir()
    (tmp_path / "stranger" / "metadata.json").write_text('{"date_saved": "2025-01-01"}')
    result = run_command("albert_tf.inspect", [str(tmp_path / "stranger")])
    assert result.returncode == 1 and result.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'stranger'}: not ours: {tmp_path / 'stranger' / 'metadata.json'} has no "
        "format_version (not data_prep's) and no registered model format (keras_hub, hf, albert_tf, original, plbert) "
        "claims the directory"
    ], result.stderr


def test_a_fifo_and_a_data_directory_with_bad_or_cut_metadata_are_one_line(tmp_path):
    """A FIFO named .tflite was "no such file"; wrong types printed nulls (exit 0); a cut file a traceback."""
    from pretraining_helpers import handmade_data

    directory = handmade_data(tmp_path / "data", rows_hold=3)
    found = inspect(directory)
    assert found["format"] == "pretraining data" and found["max_instances_per_row"] == 3 and found["shards"] == 1
    assert inspect(tmp_path / "data" / "metadata.json") == found | {"path": directory}
    metadata_file = tmp_path / "data" / "metadata.json"
    metadata = json.loads(metadata_file.read_text())
    os.mkfifo(tmp_path / "model.tflite")
    os.mkfifo(tmp_path / "pipe")
    cases = [
        (tmp_path / "model.tflite", None, "a FIFO (named pipe), not a model, run, .tflite file or data directory"),
        (tmp_path / "pipe", None, "a FIFO (named pipe), not a model, run, .tflite file or data directory"),
        (directory, json.dumps({**metadata, "max_seq_length": "16"}), "field 'max_seq_length': '16' is a string"),
        (directory, json.dumps({**metadata, "vocab_size": [30]}), "field 'vocab_size': [30] is a list"),
        (directory, json.dumps(metadata)[:40], "not valid JSON (line 1, column 41"),
    ]
    for path, text, says in cases:
        if text is not None:
            metadata_file.write_text(text)
        result = run_command("albert_tf.inspect", [str(path)])
        named = metadata_file if text is not None else path
        assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert result.stderr.startswith(f"error: {named}: {says}"), result.stderr
