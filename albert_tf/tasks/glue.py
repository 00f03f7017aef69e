"""GLUE-style TSV tasks: readers exactly as the original `classifier_utils.py` (spec table).

Files are split on tabs with quoting off (STS-B, RTE and MRPC hold unbalanced
`"`), read as `utf-8-sig` (MRPC starts with a BOM). A row with too few
columns, an unknown label or a field over csv's size limit (131,072
characters) is skipped, counted, and its `file:line` kept (first few
reported); no usable row at all is an error. Invalid UTF-8 is
replaced by U+FFFD and counted (`ReadReport.replaced_bytes`).

A new task of this kind (a TSV with a text column, maybe a second, and a
label column) is one `TsvTask` value: its columns, labels and metric; your
own TSV, CSV or JSON-lines files with named columns are
`albert_tf.tasks.file_task.FileTask` (`run_classifier --train_file`).

Example:

>>> task = TASKS["sst-2"]
>>> task.labels, task.metric
(('0', '1'), 'accuracy')
>>> mine = TsvTask("my-task", labels=("no", "yes"), train=Columns(0, None, 1, header=True), data_dir="data/mine")
>>> mine.num_classes, mine.metric
(2, 'accuracy')
"""

import csv
import dataclasses
import os
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np

from albert_tf.errors import AlbertError
from albert_tf.finetuning import metrics
from albert_tf.finetuning.base import Baseline, Encoded, ReadReport, Task
from albert_tf.finetuning.losses import classification_loss, regression_loss
from albert_tf.publish import staged_file
from albert_tf.tasks.early_exit import EarlyExitTask
from albert_tf.tasks.text_files import ReplacedLines
from albert_tf.tokenization.packing import pack_segments


class GlueDataError(AlbertError, ValueError):
    """A GLUE file that cannot be used; the message names the file (and lines)."""


@dataclasses.dataclass(frozen=True)
class Columns:
    text_a: int
    text_b: Optional[int]
    label: Optional[int]  # -1: the last column; None: no label (test files)
    header: bool

    @property
    def min_columns(self) -> int:
        texts = max(c for c in (self.text_a, self.text_b) if c is not None) + 1
        if self.label == -1:
            return texts + 1  # the label is the last column, after the texts
        return max(texts, (self.label or 0) + 1)


@dataclasses.dataclass(frozen=True)
class TsvTask(Task):
    """A TSV classification (or regression: no labels) task → `AlbertClassifier`.

    Attributes:
        name: the task's name (`--task_name` for GLUE's).
        labels: the label strings, in class order; empty for a regression score.
        train: the columns of train and dev files.
        test: the columns of the test file (no label); default: `train`'s texts, no label.
        directory: the subdirectory of `data_dir` holding the files, if there.
        dev_file, test_file: file names of those splits (`train.tsv` for train).
        metric: the key that picks the best checkpoint.
        submission: the test predictions' file name (default `<name>.tsv`).
        data_dir: where the files are.
    """

    name: str
    labels: Tuple[str, ...]
    train: Columns
    test: Optional[Columns] = None
    directory: str = ""
    dev_file: str = "dev.tsv"
    test_file: str = "test.tsv"
    metric: str = "accuracy"
    submission: str = ""
    data_dir: str = ""

    @property
    def is_regression(self) -> bool:
        return not self.labels

    @property
    def num_classes(self) -> int:
        return len(self.labels) or 1

    @property
    def test_columns(self) -> Columns:
        return self.test or dataclasses.replace(self.train, label=None)

    def binding(self) -> dict:
        return {**super().binding(), "labels": list(self.labels)}

    def with_model_labels(self, labels):
        """The model's classes, matched by name: `--labels b,a` on an a,b model reads `a` as class 0, not the
        reverse, and labels read from a dev file that lacks a class are the model's too. A name the model was
        not fine-tuned with is an error."""
        if labels is None or not self.labels or tuple(labels) == self.labels:
            return self  # a regression task on a classifier: the outputs' shapes say it (TFLite) or the score shows
        unknown = [name for name in self.labels if name not in labels]
        if unknown:
            raise GlueDataError(
                f"{self.name}: the labels {','.join(self.labels)} (--labels, or the data's) include "
                f"{','.join(unknown)}, which the model was not fine-tuned with (its labels: {','.join(labels)})"
            )
        return dataclasses.replace(self, labels=tuple(labels))

    def inputs(self, split: str) -> List[str]:
        return [split_file(self, self.data_dir, split)]

    def read(self, split: str) -> Tuple[List["Example"], ReadReport]:
        return read_examples(self, split_file(self, self.data_dir, split), split)

    @property
    def pairs(self) -> bool:
        """Whether an example is two texts (`[CLS] text_a [SEP] text_b [SEP]`)."""
        return self.train.text_b is not None

    def min_seq_length(self):
        if not self.pairs:
            return super().min_seq_length()
        return 5, "[CLS] text_a [SEP] text_b [SEP]"

    def encode(self, split, examples, tokenizer, max_seq_length, training) -> Encoded:
        labels = None
        if training:
            labels = {"logits": np.array([e.label for e in examples], "float32" if self.is_regression else "int32")}
        return Encoded(split, examples, encode_examples(examples, tokenizer, max_seq_length), labels)

    def build_model(self, backbone, dropout):
        from albert_tf.models.classifier import AlbertClassifier

        return AlbertClassifier(backbone, self.num_classes, dropout=dropout, labels=self.labels or None)

    def with_early_exit(self) -> EarlyExitTask:
        """This task with `AlbertEarlyExitClassifier`."""

        def build(backbone, dropout):
            from albert_tf.models.early_exit import AlbertEarlyExitClassifier

            return AlbertEarlyExitClassifier(backbone, self.num_classes, dropout=dropout, labels=self.labels or None)

        return EarlyExitTask(self, build, self.is_regression)

    def losses(self):
        return {"logits": regression_loss if self.is_regression else classification_loss}

    def train_accuracy(self) -> bool:
        return not self.is_regression

    def postprocess(self, data, outputs, tokenizer) -> np.ndarray:
        return np.asarray(outputs["logits"])

    def score(self, data, predictions) -> dict:
        return compute_metrics(self, np.array([e.label for e in data.examples]), predictions)

    def metric_names(self) -> List[str]:
        if self.is_regression:
            return ["pearson", "spearman", "mse"]
        return ["accuracy", "macro_f1", "matthews_corr"] + (["f1"] if self.num_classes == 2 else [])

    def baseline(self, data) -> Baseline:
        labels = [e.label for e in data.examples]
        if self.is_regression:
            # The best constant for MSE is the labels' mean; a constant has no Pearson or Spearman.
            mse = float(np.mean((np.asarray(labels, "float64") - np.mean(labels)) ** 2))
            return Baseline("constant predictor", "mse", mse, "every dev score the dev mean", "constant_mse_baseline")
        return Baseline.majority(metrics.majority_share(labels))

    def write(self, output_dir, data, predictions) -> List[str]:
        name = (self.submission or f"{self.name}.tsv") if data.split == "test" else f"{data.split}_predictions.tsv"
        path = os.path.join(output_dir, name)
        write_predictions(path, [e.guid for e in data.examples], prediction_strings(self, predictions))
        return [path]


BINARY = ("0", "1")
NLI = ("entailment", "not_entailment")
MNLI = ("contradiction", "entailment", "neutral")


def _glue(name, directory, labels, train, test, **fields) -> TsvTask:
    fields.setdefault("submission", f"{directory}.tsv")
    return TsvTask(name, labels, train, test, directory=directory, **fields)


# The original's processors: columns of train/dev and of test, labels, metric.
TASKS = {
    "cola": _glue(
        "cola", "CoLA", BINARY, Columns(3, None, 1, False), Columns(1, None, None, True), metric="matthews_corr"
    ),
    "mnli": _glue(
        "mnli",
        "MNLI",
        MNLI,
        Columns(8, 9, -1, True),
        Columns(8, 9, None, True),
        dev_file="dev_matched.tsv",
        test_file="test_matched.tsv",
        submission="MNLI-m.tsv",
    ),
    "mismnli": _glue(
        "mismnli",
        "MNLI",
        MNLI,
        Columns(8, 9, -1, True),
        Columns(8, 9, None, True),
        dev_file="dev_mismatched.tsv",
        test_file="test_mismatched.tsv",
        submission="MNLI-mm.tsv",
    ),
    "mrpc": _glue("mrpc", "MRPC", BINARY, Columns(3, 4, 0, True), Columns(3, 4, None, True)),
    "rte": _glue("rte", "RTE", NLI, Columns(1, 2, -1, True), Columns(1, 2, None, True)),
    "sst-2": _glue("sst-2", "SST-2", BINARY, Columns(0, None, 1, True), Columns(1, None, None, True)),
    "sts-b": _glue("sts-b", "STS-B", (), Columns(7, 8, -1, True), Columns(7, 8, None, True), metric="pearson"),
    "qqp": _glue("qqp", "QQP", BINARY, Columns(3, 4, 5, True), Columns(1, 2, None, True)),
    "qnli": _glue("qnli", "QNLI", NLI, Columns(1, 2, -1, True), Columns(1, 2, None, True)),
    "wnli": _glue("wnli", "WNLI", BINARY, Columns(1, 2, -1, True), Columns(1, 2, None, True)),
}


@dataclasses.dataclass
class Example:
    guid: str
    text_a: str
    text_b: Optional[str]
    label: Optional[float]  # class index, or the score for regression; None for test rows


def get_task(name: str) -> TsvTask:
    try:
        return TASKS[name.lower()]
    except KeyError:
        raise GlueDataError(f"--task_name {name}: expected one of {', '.join(sorted(TASKS))}") from None


def task(name: str, data_dir: str) -> TsvTask:
    """The GLUE task `name` (case-insensitive) reading `data_dir`."""
    return dataclasses.replace(get_task(name), data_dir=data_dir)


def read_examples(task: TsvTask, path: str, split: str) -> Tuple[List[Example], ReadReport]:
    """Examples of one TSV (`split` in train/dev/test picks the column layout)."""
    columns = task.test_columns if split == "test" else task.train
    report = ReadReport(path)
    examples = []
    try:
        handle = open(path, encoding="utf-8-sig", errors="surrogateescape", newline="")
    except OSError as error:
        raise GlueDataError(f"{path}: cannot read ({error.strerror})") from None
    lines = ReplacedLines(handle, path)
    with handle:
        for line_number, row in _rows(lines):
            if row is None:
                report.rows += 1
                report.skip(line_number, f"a field longer than {csv.field_size_limit():,} characters")
                continue
            if columns.header and line_number == 1:
                continue
            if not row or row == [""]:
                continue
            report.rows += 1
            if len(row) < columns.min_columns:
                report.skip(line_number, f"{len(row)} columns, needs at least {columns.min_columns}")
                continue
            label = None
            if columns.label is not None:
                raw = row[columns.label].strip()
                if task.is_regression:
                    try:
                        label = float(raw)
                    except ValueError:
                        report.skip(line_number, f"score {raw!r} is not a number")
                        continue
                elif raw in task.labels:
                    label = task.labels.index(raw)
                else:
                    report.skip(line_number, f"unknown label {raw!r} (expected {', '.join(task.labels)})")
                    continue
            # GLUE's test files start with the index their submission repeats.
            guid = row[0] if split == "test" and task.test is not None else f"{split}-{line_number}"
            examples.append(
                Example(guid, row[columns.text_a], row[columns.text_b] if columns.text_b is not None else None, label)
            )
    report.replaced_bytes = lines.replaced
    if lines.first_line is not None:
        report.first_replaced = f"{path}:{lines.first_line}"
    if not examples:
        details = "; ".join(report.first_problems) or "no rows"
        raise GlueDataError(f"{path}: no usable example ({report.skipped} of {report.rows} rows skipped: {details})")
    return examples, report


def _rows(lines) -> Iterator[Tuple[int, Optional[List[str]]]]:
    """(line number, fields) of a TSV; fields None for a row csv refuses (a field over its size limit)."""
    reader = csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error:
            row = None  # the reader goes on at the next line
        yield reader.line_num, row


def split_file(task: TsvTask, data_dir: str, split: str) -> str:
    """`data_dir/<DIR>/<file>` or `data_dir/<file>` (the task's own directory), whichever holds it.

    Neither: the path in the layout `data_dir` has (a `<DIR>` subdirectory or not), for the error.
    """
    name = {"train": "train.tsv", "dev": task.dev_file, "test": task.test_file}[split]
    direct = os.path.join(data_dir, name)
    nested = os.path.join(data_dir, task.directory, name)
    if os.path.exists(nested) or os.path.exists(direct):
        return nested if os.path.exists(nested) else direct
    return nested if task.directory and os.path.isdir(os.path.join(data_dir, task.directory)) else direct


def encode_examples(examples: List[Example], tokenizer, max_seq_length: int) -> Dict[str, np.ndarray]:
    """Padded int32 `input_ids`, `input_mask`, `segment_ids` of `[CLS] a [SEP] (b [SEP])`."""
    features = {
        name: np.zeros((len(examples), max_seq_length), "int32") for name in ("input_ids", "input_mask", "segment_ids")
    }
    for i, example in enumerate(examples):
        # No segment keeps more than max_seq_length ids: the tokenizer stops there (exactly, and
        # truncation "longer segment first" gives the same lengths from the capped ones).
        ids_b = tokenizer.encode(example.text_b, max_ids=max_seq_length) if example.text_b is not None else None
        ids, segments = pack_segments(
            tokenizer.encode(example.text_a, max_ids=max_seq_length),
            ids_b,
            max_seq_length,
            tokenizer.cls_id,
            tokenizer.sep_id,
        )
        features["input_ids"][i, : len(ids)] = ids
        features["input_mask"][i, : len(ids)] = 1
        features["segment_ids"][i, : len(ids)] = segments
    return features


def compute_metrics(task: TsvTask, labels, outputs) -> dict:
    """GLUE's metrics from gold labels and the model's logits `[N, C]`."""
    outputs = np.asarray(outputs)
    if task.is_regression:
        scores = outputs[:, 0]
        return {
            "pearson": metrics.pearson(scores, labels),
            "spearman": metrics.spearman(scores, labels),
            "mse": float(np.mean((scores - np.asarray(labels)) ** 2)),
            "num_examples": len(labels),
        }
    predictions = outputs.argmax(-1)
    result = {"accuracy": metrics.accuracy(labels, predictions), "num_examples": len(labels)}
    if task.num_classes == 2:
        result["f1"] = metrics.f1_score(labels, predictions)  # of label index 1
    result["macro_f1"] = metrics.macro_f1(labels, predictions, task.num_classes)
    result["matthews_corr"] = metrics.multiclass_matthews_corrcoef(labels, predictions, task.num_classes)
    return result


def prediction_strings(task: TsvTask, outputs) -> List[str]:
    """GLUE submission values: label strings, or the score for STS-B (every digit of the model's float32:
    a metric computed from the file is the run's)."""
    outputs = np.asarray(outputs)
    if task.is_regression:
        return [f"{score:.9g}" for score in outputs[:, 0]]
    return [task.labels[i] for i in outputs.argmax(-1)]


def write_predictions(path: str, ids: List[str], predictions: List[str]):
    """GLUE's submission format: a header, then `index<TAB>prediction` per row (written whole, then renamed)."""
    with staged_file(path) as staging, open(staging, "w", encoding="utf-8") as f:
        f.write("index\tprediction\n")
        for index, prediction in zip(ids, predictions):
            f.write(f"{index}\t{prediction}\n")
