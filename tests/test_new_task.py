"""Adding a task is one short file: a GLUE-style TSV task, defined here, run end to end by the shared runner.

The task: SST-2's sentences relabelled by a rule ("yes" when the sentence has an
English article), so the labels are known exactly and a tiny model can learn them.
"""

import csv

import pytest

from albert_tf.finetuning import runner
from albert_tf.finetuning.settings import FineTuneSettings
from albert_tf.tasks.glue import Columns, TsvTask

ARTICLES = {"a", "an", "the"}


def has_article(sentence: str) -> str:
    return "yes" if ARTICLES & set(sentence.lower().split()) else "no"


def write_relabelled(source, target, rows: slice, with_label: bool = True):
    with open(source, encoding="utf-8", newline="") as f:
        sentences = [row[0] for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)][1:][rows]
    lines = ["sentence\tlabel" if with_label else "sentence"]
    lines += [f"{s}\t{has_article(s)}" if with_label else s for s in sentences]
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [has_article(s) for s in sentences]


@pytest.mark.slow
@pytest.mark.realdata
def test_a_new_tsv_task_learns_and_predicts_through_the_shared_runner(real_data, pretrained_tiny, tmp_path):
    source = real_data / "glue" / "SST-2" / "train.tsv"
    data_dir = tmp_path / "articles"
    data_dir.mkdir()
    write_relabelled(source, data_dir / "train.tsv", slice(0, 3000))
    dev_labels = write_relabelled(source, data_dir / "dev.tsv", slice(4000, 4400))
    test_labels = write_relabelled(source, data_dir / "test.tsv", slice(4400, 4500), with_label=False)

    task = TsvTask("articles", labels=("no", "yes"), train=Columns(0, None, 1, header=True), data_dir=str(data_dir))
    settings = FineTuneSettings(
        output_dir=str(tmp_path / "out"),
        init_checkpoint=str(pretrained_tiny),
        max_seq_length=48,
        train_batch_size=32,
        eval_batch_size=100,
        learning_rate=1e-3,
        train_step=150,
        warmup_step=15,
        save_checkpoints_steps=50,
        dropout=0.0,
        verbose=False,
    )
    summary = runner.run(task, settings, predict_split="test")

    majority = max(dev_labels.count("yes"), dev_labels.count("no")) / len(dev_labels)
    assert summary["task"] == "articles" and summary["train_examples"] == 3000
    assert summary["eval"]["accuracy"] > majority + 0.15, (majority, summary["eval"])
    # The best checkpoint carries its tokenizer; the submission is `<name>.tsv`, one row per test line.
    assert (tmp_path / "out" / "best" / "tokenizer.json").exists()
    submission = (tmp_path / "out" / "articles.tsv").read_text().splitlines()
    assert summary["submission"] == [str(tmp_path / "out" / "articles.tsv")]
    assert submission[0] == "index\tprediction" and len(submission) == 1 + len(test_labels)
    predicted = [line.split("\t")[1] for line in submission[1:]]
    assert set(predicted) <= {"no", "yes"}
    assert sum(p == t for p, t in zip(predicted, test_labels)) / len(test_labels) > majority
