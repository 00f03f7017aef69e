"""RACE on the real files: reading, packing as the original, the runner, bad files."""

import dataclasses
import json
import os
import shutil

import pytest

from albert_tf.tokenization import SentencePieceTokenizer

from command_helpers import run_command

pytestmark = pytest.mark.realdata


def test_reader_counts_match_the_release(real_data):
    from albert_tf.tasks import race

    examples, report = race.read_examples(str(real_data / "race"), "dev")
    assert report["skipped"] == 0
    assert sum(e.level == "middle" for e in examples) == 1436 and sum(e.level == "high" for e in examples) == 3451
    assert all(len(e.options) == 4 and 0 <= e.label < 4 for e in examples)


def test_packing_follows_the_original(real_data, wikitext_spm):
    from albert_tf.tasks import race
    from albert_tf.tokenization import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(wikitext_spm)
    examples, _ = race.read_examples(str(real_data / "race"), "dev", ("middle",))
    blank = next(e for e in examples if "_" in e.question)
    features = race.encode_examples([blank], tokenizer, max_seq_length=96, max_qa_length=12)
    for j, option in enumerate(blank.options):
        ids = features["input_ids"][0, j][features["input_mask"][0, j] == 1].tolist()
        qa = tokenizer.encode(blank.question.replace("_", option))[-12:]
        assert ids[-len(qa) - 1 :] == qa + [tokenizer.sep_id]
        assert ids[0] == tokenizer.cls_id and len(ids) == 96  # the article fills the rest, cut at its end
        article = tokenizer.encode(blank.article)
        assert ids[1 : 96 - len(qa) - 2] == article[: 96 - len(qa) - 3]
        segments = features["segment_ids"][0, j]
        assert segments[: 96 - len(qa) - 1].sum() == 0 and segments[96 - len(qa) - 1 :].all()
    # A question side longer than the sequence keeps its end and leaves the article out.
    short = race.encode_examples([blank], tokenizer, max_seq_length=8, max_qa_length=128)
    ids = short["input_ids"][0, 0].tolist()
    qa = tokenizer.encode(blank.question.replace("_", blank.options[0]))
    assert ids == [tokenizer.cls_id, tokenizer.sep_id] + qa[-5:] + [tokenizer.sep_id]


@pytest.mark.slow
def test_runner_trains_evaluates_and_reports_levels(real_data, pretraining_data, tmp_path):
    from albert_tf.run_race import RaceSettings, run
    from albert_tf.tasks.race import RaceTask

    data = tmp_path / "RACE"
    for level in ("middle", "high"):
        files = sorted((real_data / "race" / "dev" / level).glob("*.txt"))[:6]
        for split, chosen in (("train", files[:4]), ("dev", files[4:])):
            (data / split / level).mkdir(parents=True, exist_ok=True)
            for f in chosen:
                shutil.copy(f, data / split / level / f.name)
    (data / "dev" / "high" / "broken.txt").write_text("{not json")
    task = RaceTask(data_dir=str(data), max_qa_length=24)
    settings = RaceSettings(
        output_dir=str(tmp_path / "out"),
        tokenizer=SentencePieceTokenizer(pretraining_data["spm"]),
        albert_config_file=pretraining_data["config"],
        max_seq_length=64,
        train_batch_size=8,
        eval_batch_size=8,
        learning_rate=1e-4,
        train_step=4,
        save_checkpoints_steps=2,
        verbose=False,
    )
    # The command as the README gives it, sizes made small: its defaults train and evaluate, and
    # no --metric means the task's (accuracy).
    argv = [f"--{name}={getattr(settings, name)}" for name in ("output_dir", "albert_config_file")]
    argv += [f"--spm_model_file={settings.tokenizer.model_file}"]
    argv += [f"--data_dir={data}", "--max_qa_length=24", "--max_seq_length=64", "--train_batch_size=8"]
    argv += ["--eval_batch_size=8", "--learning_rate=1e-4", "--train_step=4", "--warmup_step=1"]
    argv += ["--save_checkpoints_steps=2"]
    completed = run_command("albert_tf.run_race", argv)
    assert completed.returncode == 0, completed.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["metric"] == "accuracy" and summary["best_step"] in (2, 4)
    assert summary["dev_skipped"] == 1 and [h["global_step"] for h in summary["history"]] == [2, 4]
    assert {"accuracy", "accuracy_middle", "accuracy_high"} <= set(summary["eval"])
    predictions = json.load(open(tmp_path / "out" / "dev_predictions.json"))
    assert len(predictions) == summary["eval"]["num_examples"] and set(predictions.values()) <= set("ABCD")
    assert os.path.isfile(tmp_path / "out" / "best" / "model.keras")
    # The best model evaluated with every choice at max_seq_length (--nolength_grouping): the same answers.
    fixed = run(
        task,
        dataclasses.replace(
            settings,
            output_dir=str(tmp_path / "fixed"),
            init_checkpoint=str(tmp_path / "out"),
            do_train=False,
            length_grouping=False,
        ),
    )
    grouped = run(
        task,
        dataclasses.replace(
            settings, output_dir=str(tmp_path / "grouped"), init_checkpoint=str(tmp_path / "out"), do_train=False
        ),
    )
    assert fixed["eval"] == grouped["eval"] == summary["eval"]
    assert json.load(open(tmp_path / "fixed" / "dev_predictions.json")) == predictions


def test_no_usable_file_is_a_clear_error(tmp_path):
    from albert_tf.tasks import race

    (tmp_path / "dev" / "middle").mkdir(parents=True)
    (tmp_path / "dev" / "middle" / "1.txt").write_text("not json at all")
    with pytest.raises(race.RaceDataError, match=r"no usable RACE example \(1 records or questions skipped: .*1.txt: "):
        race.read_examples(str(tmp_path), "dev", ("middle",))


# ---- one bad question drops that question, not its article (hardening probes) ----
@pytest.mark.realdata
def test_race_bad_question_drops_only_itself(real_data, tmp_path):
    from albert_tf.tasks import race

    source = sorted((real_data / "race" / "dev" / "middle").glob("*.txt"))[0]
    record = json.loads(source.read_text(encoding="utf-8"))
    assert len(record["questions"]) >= 3
    record["options"][1] = record["options"][1][:3]  # three options
    record["answers"][0] = [record["answers"][0]]  # a list, not a letter
    (tmp_path / "dev" / "middle").mkdir(parents=True)
    (tmp_path / "dev" / "middle" / source.name).write_text(json.dumps(record))
    examples, report = race.read_examples(str(tmp_path), "dev", ("middle",))
    kept = [i for i in range(len(record["questions"])) if i not in (0, 1)]
    assert [e.question for e in examples] == [record["questions"][i] for i in kept]
    assert [e.label for e in examples] == ["ABCD".index(record["answers"][i]) for i in kept]
    assert report["skipped"] == 2 and f"{source.name}: question 1: needs" in report["first_problems"][1]
