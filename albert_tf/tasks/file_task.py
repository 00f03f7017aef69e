"""Your own classification or regression data: TSV, CSV or JSON-lines files (`run_classifier --train_file`).

A `FileTask` is a `TsvTask` (same encoding, model, losses, metrics and
prediction files) whose rows come from files you name, with columns you name:

- the format is the file's extension: `.tsv`, `.csv`, `.jsonl` / `.json` /
  `.ndjson` (one object a line, or one JSON array of objects); anything else
  is an error naming the file. Text is UTF-8 (with or without its byte-order
  mark); UTF-16 or UTF-32 is refused naming the encoding;
- columns are header names (TSV/CSV: the first row is the header) or JSON
  keys; 0-based column numbers for a TSV/CSV without a header (all three
  column flags numbers); one column cannot be two of them;
- JSON labels are read as JSON writes them: `true`/`false`, and a whole number
  without its `.0` (`1` and `1.0` are one class); one label column holding
  two JSON types (`1` and `"1"`) is refused naming the line;
- the labels are `labels` when given, else the label values of the training
  file (the dev file if no training file), sorted: the class order is then
  the same on every run. A label not among them is an error naming `file:line`;
- `task_type`: "classification", "regression" (the label is a number; one
  output), or "auto": regression when every training label is a number and
  one of them is not an integer (as transformers' `run_glue` decides from
  the label column's type), classification otherwise.

Example:

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "train.csv")
>>> _ = open(path, "w").write("review,sentiment\\ngreat film,positive\\ndull,negative\\n")
>>> task = file_task(train_file=path, text_column="review", label_column="sentiment")
>>> task.labels, task.is_regression
(('negative', 'positive'), False)
>>> [(e.text_a, e.label) for e in task.read("train")[0]]
[('great film', 1), ('dull', 0)]
"""

import csv
import dataclasses
import json
import math
import os
import re
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from albert_tf.finetuning.base import ReadReport
from albert_tf.options import option
from albert_tf.tasks.glue import Columns, Example, GlueDataError, TsvTask
from albert_tf.tasks.text_files import ReplacedLines, not_utf8

TASK_TYPES = ("auto", "classification", "regression")
DELIMITERS = {".tsv": "\t", ".csv": ","}
JSON_LINES = (".jsonl", ".json", ".ndjson")
SPLIT_FLAGS = {"train": "--train_file", "dev": "--dev_file", "test": "--test_file"}
# Column numbers read every line as data: a header line's label then looks like one no other line has.
HEADER_HINT = (
    "a header? With column numbers every line is data: name the columns by the header's names instead "
    "(--text_column <name> --label_column <name>)"
)


class DataFileError(GlueDataError):
    """A data file (or column/label flag) that cannot be used; the message names the file and line."""


@dataclasses.dataclass(frozen=True)
class ColumnNames:
    """The text, second text and label columns: header names / JSON keys, or numbers (header-less)."""

    text: str
    text_b: Optional[str] = None
    label: str = "label"

    @property
    def by_number(self) -> bool:
        given = [c for c in (self.text, self.text_b, self.label) if c is not None]
        return all(c.isdigit() for c in given)


@dataclasses.dataclass(frozen=True)
class FileTask(TsvTask):
    """A `TsvTask` reading the files of `files` (split → path) with `columns`."""

    files: Tuple[Tuple[str, str], ...] = ()
    columns: ColumnNames = ColumnNames("text")

    @property
    def pairs(self) -> bool:
        return self.columns.text_b is not None

    def binding(self) -> dict:
        return {**super().binding(), "columns": [self.columns.text, self.columns.text_b, self.columns.label]}

    def path(self, split: str) -> str:
        path = dict(self.files).get(split)
        if not path:
            raise DataFileError(f"{SPLIT_FLAGS.get(split, split)}: not given (the {split} split is needed)")
        return path

    def inputs(self, split: str) -> List[str]:
        return [self.path(split)]

    def has_data(self, split: str) -> bool:
        return bool(dict(self.files).get(split))  # a file named and missing is an error, not absent data

    def read(self, split: str) -> Tuple[List[Example], ReadReport]:
        path = self.path(split)
        report = ReadReport(path)
        examples = []
        with_label = split != "test"
        previous, on_line = None, 0
        for line, row in records(path, self.columns):
            report.rows += 1
            on_line = on_line + 1 if line == previous else 0  # the objects of a one-line JSON array
            previous = line
            text_a = field(row, self.columns.text, path, line)
            text_b = field(row, self.columns.text_b, path, line) if self.columns.text_b is not None else None
            label = None
            if with_label:
                try:
                    label = label_value(self, field(row, self.columns.label, path, line), path, line)
                except DataFileError as error:
                    if self.columns.by_number and report.rows == 1:
                        raise DataFileError(f"{error}: {HEADER_HINT}") from None
                    raise
            examples.append(Example(f"{split}-{line}" + (f".{on_line}" if on_line else ""), text_a, text_b, label))
        if not examples:
            raise DataFileError(f"{path}: no examples")
        return examples, report


@dataclasses.dataclass(frozen=True)
class FileOptions:
    """Your own data files and their columns: run_classifier's flags for them (each field is its flag).

    Example:

    >>> FileOptions(train_file="reviews.csv", labels="negative,positive").label_names()
    ('negative', 'positive')
    """

    train_file: str = option("", "Your own training data: .tsv, .csv or .jsonl (instead of --task_name).")
    dev_file: str = option("", "Your own dev data (picks the best checkpoint; --do_eval scores it).")
    test_file: str = option("", "Your own unlabelled data; --do_predict writes test_predictions.tsv.")
    text_column: str = option("text", "Column (header name, JSON key, or 0-based number).")
    text_b_column: str = option("", "The second text's column, for pairs.")
    label_column: str = option("label", "The label's column.")
    labels: str = option("", "Class names in order, a,b,c (default: the training file's, sorted).")
    task_type: str = option(
        "auto", "auto: regression when every training label is a number and one is not an integer.", choices=TASK_TYPES
    )

    @property
    def given(self) -> bool:
        """Whether any file is named (else the run is a GLUE task's)."""
        return bool(self.train_file or self.dev_file or self.test_file)

    def label_names(self) -> Tuple[str, ...]:
        return tuple(name.strip() for name in (self.labels or "").split(",") if name.strip())

    def task(self) -> "FileTask":
        """The task of these files (`file_task`)."""
        return file_task(
            self.train_file or "",
            self.dev_file or "",
            self.test_file or "",
            self.text_column if self.text_column is not None else "text",
            self.text_b_column or None,
            self.label_column if self.label_column is not None else "label",
            self.label_names(),
            self.task_type or "auto",
        )


def file_task(
    train_file: str = "",
    dev_file: str = "",
    test_file: str = "",
    text_column: str = "text",
    text_b_column: Optional[str] = None,
    label_column: str = "label",
    labels: Sequence[str] = (),
    task_type: str = "auto",
    metric: str = "",
) -> FileTask:
    """The task of these files; labels and task type as the module says (read from the train file if needed)."""
    if task_type not in TASK_TYPES:
        raise DataFileError(f"--task_type {task_type}: expected one of {', '.join(TASK_TYPES)}")
    text_b = None if text_b_column in (None, "") else str(text_b_column)
    columns = ColumnNames(str(text_column), text_b, str(label_column))
    splits = (("train", train_file), ("dev", dev_file), ("test", test_file))
    files = tuple((split, path) for split, path in splits if path)
    if not files:
        raise DataFileError("--train_file, --dev_file or --test_file: give the files to read")
    roles = [("--text_column", columns.text), ("--text_b_column", columns.text_b)]
    if train_file or dev_file:  # a test file's label column is never read
        roles.append(("--label_column", columns.label))
    for i, (flag, column) in enumerate(roles):
        other = next((other for other, name in roles[:i] if column is not None and name == column), None)
        if other:
            raise DataFileError(f"{flag} {column}: the same column as {other}; each role needs a column of its own")
    for _, path in files:
        data_format(path)  # an unknown extension fails before any work
    labels = tuple(str(label) for label in labels)
    if len(set(labels)) != len(labels):
        raise DataFileError(f"--labels {','.join(labels)}: a label is given twice")
    if len(labels) == 1:
        raise DataFileError(f"--labels {labels[0]}: one label only; a classifier needs two or more")
    if task_type == "regression" and labels:
        raise DataFileError("--labels: a regression task has no labels (its label column is a number)")
    if task_type != "regression" and not labels:
        source = train_file or dev_file
        if not source:
            raise DataFileError("--labels: needed when there is no --train_file or --dev_file to read them from")
        # Stripped as `label_value` strips them: `positive ` is the class `positive`, not another.
        found = [(line, field(row, columns.label, source, line).strip()) for line, row in records(source, columns)]
        values = [value for _, value in found]
        if columns.by_number and len(found) > 2 and values[0] not in values[1:]:
            raise DataFileError(
                f"{source}:{found[0][0]}: label {values[0]!r} is on line {found[0][0]} only: {HEADER_HINT}; "
                "or give --labels if that line is data"
            )
        if task_type == "auto" and values and all(_is_number(v) for v in values):
            line, value = next(((line, v) for line, v in found if not _is_finite_number(v)), (None, None))
            if line is not None:
                raise DataFileError(
                    f"{source}:{line}: label {value!r} is not a finite number, in a column of numbers; fix the "
                    "row, or give --task_type classification to read every label as a class name"
                )
            if not all(float(v).is_integer() for v in values):
                task_type = "regression"
        if task_type != "regression":
            for line, value in found:
                check_label_name(value, source, line)
            labels = tuple(sorted(set(values), key=_label_order))
            if len(labels) < 2:
                raise DataFileError(f"{source}: one label only ({', '.join(labels) or 'none'}); need two or more")
    regression = task_type == "regression"
    return FileTask(
        name=os.path.splitext(os.path.basename(train_file or dev_file or test_file))[0],
        labels=() if regression else labels,
        train=Columns(0, None, None, False),  # unused: rows are read by name (`columns`)
        metric=metric or ("pearson" if regression else "accuracy"),
        submission="test_predictions.tsv",
        files=files,
        columns=columns,
    )


def _is_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _is_finite_number(value: str) -> bool:
    """A number a target can be: not nan, not inf, not one that overflows to inf (1e400)."""
    return _is_number(value) and math.isfinite(float(value))


def _label_order(label: str):
    """Numbers in numeric order (`2` before `10`), then names alphabetically."""
    return (0, float(label), label) if _is_finite_number(label) else (1, 0.0, label)


def data_format(path: str) -> str:
    """`tsv`, `csv` or `jsonl`, from the extension; anything else is an error naming the file."""
    extension = os.path.splitext(path)[1].lower()
    if extension in DELIMITERS:
        return extension[1:]
    if extension in JSON_LINES:
        return "jsonl"
    raise DataFileError(
        f"{path}: unknown data format {extension or '(no extension)'!r}; "
        f"expected .tsv, .csv or JSON lines ({', '.join(JSON_LINES)})"
    )


def records(path: str, columns: ColumnNames) -> Iterator[Tuple[int, Dict]]:
    """(line number, row) of a data file; a row maps a column name/number (as a string) to its text."""
    kind = data_format(path)
    try:
        encoding = not_utf8(path)
        # UTF-8's byte-order mark (Excel's "CSV UTF-8") is read past, not taken into the first column's name.
        handle = open(path, encoding="utf-8-sig", errors="surrogateescape", newline="")
    except OSError as error:
        raise DataFileError(f"{path}: cannot read ({error.strerror})") from None
    with handle:
        if encoding:
            raise DataFileError(f"{path}: {encoding}")
        lines = ReplacedLines(handle, path)
        if kind == "jsonl":
            rows = _json_records(lines, path, columns.label)
        else:
            rows = _table_records(lines, path, DELIMITERS["." + kind], columns)
        empty = True
        for row in rows:
            empty = False
            yield row
    if empty:
        raise DataFileError(f"{path}: the file is empty (no rows)")


class _KeyTwice(Exception):
    """A JSON object naming one key twice (`json` would keep the last value silently)."""


def _object(pairs) -> dict:
    keys = [key for key, _ in pairs]
    twice = next((key for key in keys if keys.count(key) > 1), None)
    if twice is not None:
        raise _KeyTwice(twice)
    return dict(pairs)


_DECODER = json.JSONDecoder(object_pairs_hook=_object)
_SPACE = re.compile(r"[ \t\n\r]*")
JSON_TYPES = {str: "string", bool: "boolean", int: "number", float: "number"}


def _decode(text: str, position: int, path: str, first_line: int, line: int):
    """(value, end) of the JSON value starting at `position` on `line` of `text` (which starts on `first_line`)."""
    try:
        return _DECODER.raw_decode(text, position)
    except json.JSONDecodeError as error:
        raise DataFileError(f"{path}:{first_line + error.lineno - 1}: not JSON ({error.msg})") from None
    except _KeyTwice as error:
        raise DataFileError(f"{path}:{line}: the key {error.args[0]!r} is given twice in one object") from None


def _json_values(lines, path) -> Iterator[Tuple[int, object, str]]:
    """(line, value, what was expected) of each object: one a line, or the items of one JSON array."""
    lines, read = iter(lines), False
    for line, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        if read or not text.lstrip().startswith("["):
            read = True
            value, end = _decode(text, _SPACE.match(text).end(), path, line, line)
            if text[end:].strip():
                raise DataFileError(f"{path}:{line}: not JSON (extra data after the value: one object a line)")
            yield line, value, "an object per line"
            continue
        # A JSON array (a pretty-printed file): each item's line is where the item starts.
        text += "".join(lines)
        start, position, counted, first = line, text.index("[") + 1, 0, True
        while True:
            position = _SPACE.match(text, position).end()
            line, counted = line + text.count("\n", counted, position), position
            if first and text.startswith("]", position):
                position += 1
                break
            value, position = _decode(text, position, path, start, line)
            yield line, value, "an object in the array"
            position = _SPACE.match(text, position).end()
            first = False
            if text.startswith(",", position):
                position += 1
            elif text.startswith("]", position):
                position += 1
                break
            else:
                line += text.count("\n", counted, position)
                raise DataFileError(f"{path}:{line}: not JSON (expected ',' or ']' after an item of the array)")
        position = _SPACE.match(text, position).end()
        if position < len(text):
            line += text.count("\n", counted, position)
            raise DataFileError(f"{path}:{line}: not JSON (more after the array's closing ']')")
        return


def _json_records(lines, path, label: str) -> Iterator[Tuple[int, Dict]]:
    first = None  # (line, JSON type) of the first label: one column holds one type
    for line, value, expected in _json_values(lines, path):
        if not isinstance(value, dict):
            raise DataFileError(f"{path}:{line}: a JSON {type(value).__name__}, expected {expected}")
        kind = JSON_TYPES.get(type(value.get(label)))
        if kind:
            first = first or (line, kind)
            if kind != first[1]:
                raise DataFileError(
                    f"{path}:{line}: label {json.dumps(value[label])} is a {kind}, line {first[0]}'s a {first[1]}; "
                    "one label column holds one JSON type"
                )
            value[label] = _label_text(value[label])
        yield line, value


def _label_text(value):
    """A JSON label as JSON writes it: `true`/`false` (not Python's True), a whole number without `.0`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value


def _table_records(lines, path, delimiter, columns: ColumnNames) -> Iterator[Tuple[int, Dict]]:
    # TSV is read as written (no quoting: a field may start with `"`), as GLUE's readers do; CSV quotes.
    quoted = delimiter != "\t"
    quoting = csv.QUOTE_MINIMAL if quoted else csv.QUOTE_NONE
    reader = csv.reader(lines, delimiter=delimiter, quoting=quoting, strict=True)
    read = {c for c in (columns.text, columns.text_b, columns.label) if c is not None}
    header = header_line = None
    rows = 0
    while True:
        first_line = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            if header is not None and not rows:
                raise DataFileError(f"{path}: a header (line {header_line}) and no rows") from None
            return
        except csv.Error as error:
            unclosed = quoted and "end of data" in str(error)
            raise DataFileError(f"{path}:{first_line}: {error}{' (an unclosed quote?)' if unclosed else ''}") from None
        if not row or row == [""]:
            continue
        if reader.line_num > first_line:  # a quoted field ran over line breaks: rows would be swallowed
            names = header or [str(i) for i in range(len(row))]
            column = next((name for name, value in zip(names, row) if "\n" in value or "\r" in value), "?")
            raise DataFileError(
                f"{path}:{first_line}: column {column!r}: a quoted field runs over lines {first_line}-"
                f"{reader.line_num} (an unclosed quote?); rows here are one line each (texts with line "
                "breaks: JSON lines)"
            )
        if columns.by_number:
            rows += 1
            yield reader.line_num, {str(i): value for i, value in enumerate(row)}
        elif header is None:
            # A column the task reads, named twice, would be read from its last place: refused. Others
            # (blank names of a spreadsheet's trailing columns) are never read.
            twice = sorted({name for name in row if row.count(name) > 1} & read)
            if twice:
                raise DataFileError(f"{path}:{reader.line_num}: the header names {', '.join(map(repr, twice))} twice")
            header, header_line = row, reader.line_num
        else:
            if len(row) != len(header):
                raise DataFileError(f"{path}:{reader.line_num}: {len(row)} fields, the header has {len(header)}")
            rows += 1
            yield reader.line_num, dict(zip(header, row))


def field(row: Dict, column: str, path: str, line: int) -> str:
    if column not in row:
        known = ", ".join(map(str, list(row)[:20]))
        raise DataFileError(f"{path}:{line}: no column {column!r} (the row has: {known})")
    value = row[column]
    if value is None or isinstance(value, (dict, list)):
        raise DataFileError(f"{path}:{line}: column {column!r} is {json.dumps(value)}, expected text")
    return str(value)


def check_label_name(name: str, path: str, line: int) -> None:
    """A class name must fit one column of `dev_predictions.tsv` (no tab, no line break) and be text."""
    if not name:
        raise DataFileError(f"{path}:{line}: the label is empty")
    if any(c in name for c in "\t\n\r"):
        raise DataFileError(f"{path}:{line}: label {name!r} holds a tab or a line break (a class name is one field)")


def label_value(task: FileTask, raw: str, path: str, line: int):
    raw = raw.strip()
    if task.is_regression:
        if not _is_finite_number(raw):
            raise DataFileError(f"{path}:{line}: label {raw!r} is not a finite number (a regression task's target)")
        return float(raw)
    if raw not in task.labels:
        raise DataFileError(f"{path}:{line}: unknown label {raw!r} (expected one of {', '.join(task.labels)})")
    return task.labels.index(raw)
