"""GLUE TSV readers exactly as the original `classifier_utils.py` (spec table).

Files are split on tabs with quoting off (STS-B, RTE and MRPC hold unbalanced
`"`), read as `utf-8-sig` (MRPC starts with a BOM). A row with too few
columns or an unknown label is skipped, counted, and its `file:line` kept
(first few reported); no usable row at all is an error. Invalid UTF-8 is
replaced by U+FFFD and counted (`ReadReport.replaced_bytes`).

Example:

>>> task = TASKS["sst-2"]
>>> task.labels, task.metric
(('0', '1'), 'accuracy')
"""

import csv
import dataclasses
import os
from typing import List, Optional, Tuple

from albert_tf import metrics
from albert_tf.errors import AlbertError
from albert_tf.tasks import ReplacedLines


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
class GlueTask:
    directory: str
    labels: Tuple[str, ...]  # empty: regression
    train: Columns
    test: Columns
    dev_file: str = "dev.tsv"
    test_file: str = "test.tsv"
    metric: str = "accuracy"  # the best-checkpoint key
    submission: str = ""

    @property
    def is_regression(self) -> bool:
        return not self.labels

    @property
    def num_classes(self) -> int:
        return len(self.labels) or 1


BINARY = ("0", "1")
NLI = ("entailment", "not_entailment")
TASKS = {
    "cola": GlueTask(
        "CoLA",
        BINARY,
        Columns(3, None, 1, False),
        Columns(1, None, None, True),
        metric="matthews_corr",
        submission="CoLA.tsv",
    ),
    "mnli": GlueTask(
        "MNLI",
        ("contradiction", "entailment", "neutral"),
        Columns(8, 9, -1, True),
        Columns(8, 9, None, True),
        "dev_matched.tsv",
        "test_matched.tsv",
        submission="MNLI-m.tsv",
    ),
    "mismnli": GlueTask(
        "MNLI",
        ("contradiction", "entailment", "neutral"),
        Columns(8, 9, -1, True),
        Columns(8, 9, None, True),
        "dev_mismatched.tsv",
        "test_mismatched.tsv",
        submission="MNLI-mm.tsv",
    ),
    "mrpc": GlueTask("MRPC", BINARY, Columns(3, 4, 0, True), Columns(3, 4, None, True), submission="MRPC.tsv"),
    "rte": GlueTask("RTE", NLI, Columns(1, 2, -1, True), Columns(1, 2, None, True), submission="RTE.tsv"),
    "sst-2": GlueTask("SST-2", BINARY, Columns(0, None, 1, True), Columns(1, None, None, True), submission="SST-2.tsv"),
    "sts-b": GlueTask(
        "STS-B", (), Columns(7, 8, -1, True), Columns(7, 8, None, True), metric="pearson", submission="STS-B.tsv"
    ),
    "qqp": GlueTask("QQP", BINARY, Columns(3, 4, 5, True), Columns(1, 2, None, True), submission="QQP.tsv"),
    "qnli": GlueTask("QNLI", NLI, Columns(1, 2, -1, True), Columns(1, 2, None, True), submission="QNLI.tsv"),
    "wnli": GlueTask("WNLI", BINARY, Columns(1, 2, -1, True), Columns(1, 2, None, True), submission="WNLI.tsv"),
}


@dataclasses.dataclass
class Example:
    guid: str
    text_a: str
    text_b: Optional[str]
    label: Optional[float]  # class index, or the score for regression; None for test rows


@dataclasses.dataclass
class ReadReport:
    file: str
    rows: int = 0
    skipped: int = 0
    first_problems: List[str] = dataclasses.field(default_factory=list)
    replaced_bytes: int = 0  # invalid UTF-8 sequences replaced by U+FFFD
    first_replaced: Optional[str] = None  # `file:line` of the first

    def skip(self, line: int, why: str):
        self.skipped += 1
        if len(self.first_problems) < 5:
            self.first_problems.append(f"{self.file}:{line}: {why}")


def get_task(name: str) -> GlueTask:
    try:
        return TASKS[name.lower()]
    except KeyError:
        raise GlueDataError(f"--task_name {name}: expected one of {', '.join(sorted(TASKS))}") from None


def read_examples(task: GlueTask, path: str, split: str) -> Tuple[List[Example], ReadReport]:
    """Examples of one TSV (`split` in train/dev/test picks the column layout)."""
    columns = task.test if split == "test" else task.train
    report = ReadReport(path)
    examples = []
    try:
        handle = open(path, encoding="utf-8-sig", errors="surrogateescape", newline="")
    except OSError as error:
        raise GlueDataError(f"{path}: cannot read ({error.strerror})") from None
    lines = ReplacedLines(handle, path)
    with handle:
        for line_number, row in enumerate(csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE), start=1):
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
            guid = row[0] if split == "test" else f"{split}-{line_number}"
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


def split_file(task: GlueTask, data_dir: str, split: str) -> str:
    name = {"train": "train.tsv", "dev": task.dev_file, "test": task.test_file}[split]
    direct = os.path.join(data_dir, name)
    nested = os.path.join(data_dir, task.directory, name)
    return nested if os.path.exists(nested) or not os.path.exists(direct) else direct


def compute_metrics(task: GlueTask, labels, outputs) -> dict:
    """GLUE's metrics from gold labels and the model's logits `[N, C]`."""
    import numpy as np

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
    if task.labels == BINARY:
        result["f1"] = metrics.f1_score(labels, predictions)
    if task.metric == "matthews_corr":
        result["matthews_corr"] = metrics.matthews_corrcoef(labels, predictions)
    return result


def prediction_strings(task: GlueTask, outputs) -> List[str]:
    """GLUE submission values: label strings, or the score for STS-B."""
    import numpy as np

    outputs = np.asarray(outputs)
    if task.is_regression:
        return [f"{score:.3f}" for score in outputs[:, 0]]
    return [task.labels[i] for i in outputs.argmax(-1)]
