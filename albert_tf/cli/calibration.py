"""`--representative_data`: the text full-integer TFLite calibrates on, read here and handed to the export.

A plain text file (one example per non-blank line) or a GLUE task's TSV (`--representative_task`: text
pairs keep their second segment). The export library takes the (text_a, text_b) pairs themselves
(`export_tflite(calibration_texts=...)`), so it reads no task's files.
"""

import os
from typing import List, Optional, Tuple

from absl import flags

from albert_tf.export.common import ExportError
from albert_tf.export.representative import MIN_SAMPLES, RepresentativeDataError
from albert_tf.tasks import glue

FLAGS = flags.FLAGS
FLAG = "--representative_data"
CALIBRATION_FLAGS = ("representative_data", "representative_task")


def calibration_from_flags(format_name: str, quantize: str) -> Optional[Tuple[Tuple[str, Optional[str]], ...]]:
    """The calibration texts the flags name (None unless `--format tflite --quantize full_int8`)."""
    given = [name for name in CALIBRATION_FLAGS if FLAGS[name].value]
    if given and format_name != "tflite":
        raise ExportError(
            f"--{given[0]}: only --format tflite --quantize full_int8 calibrates (got --format {format_name})"
        )
    if quantize != "full_int8":
        if given:
            raise ExportError(f"--{given[0]}: only --quantize full_int8 calibrates (got --quantize {quantize})")
        return None
    return calibration_texts(FLAGS.representative_data, FLAGS.representative_task, FLAGS.representative_samples)


def calibration_texts(
    path: Optional[str], task_name: Optional[str], count: int
) -> Tuple[Tuple[str, Optional[str]], ...]:
    """The first `count` examples of `path`, at least `MIN_SAMPLES` of them."""
    if count < MIN_SAMPLES:
        raise RepresentativeDataError(
            f"--representative_samples {count}: must be at least {MIN_SAMPLES} "
            "(the int8 ranges come from these examples; a handful gives ranges that clip real text)"
        )
    texts = read_texts(path, task_name, count)
    if len(texts) < MIN_SAMPLES:
        raise RepresentativeDataError(
            f"{FLAG} {path}: holds {len(texts)} example(s); full_int8 calibration needs at least {MIN_SAMPLES}"
        )
    return tuple(texts)


def read_texts(path: Optional[str], task_name: Optional[str], count: int) -> List[Tuple[str, Optional[str]]]:
    """Up to `count` (text_a, text_b) pairs from `path`, in file order."""
    if not path:
        raise RepresentativeDataError(
            f"--quantize full_int8 needs {FLAG}: a text file (one example per line), or a GLUE TSV "
            "with --representative_task"
        )
    if count < 1:
        raise RepresentativeDataError(f"--representative_samples {count}: must be at least 1")
    if not os.path.isfile(path):
        why = "a directory, not a file" if os.path.isdir(path) else "no such file"
        raise RepresentativeDataError(f"{FLAG} {path}: cannot be read ({why})")
    if task_name:
        if task_name.lower() not in glue.TASKS:
            raise RepresentativeDataError(
                f"--representative_task {task_name}: expected one of {', '.join(sorted(glue.TASKS))}"
            )
        task = glue.get_task(task_name)
        try:
            examples, _ = glue.read_examples(task, path, "dev")
        except glue.GlueDataError as error:
            raise RepresentativeDataError(f"{FLAG} {path}: {error}") from None
        texts = [(e.text_a, e.text_b) for e in examples[:count]]
    else:
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as error:
            raise RepresentativeDataError(f"{FLAG} {path}: cannot be read ({error.strerror})") from None
        text = _plain_text(raw, path)
        texts = [(line.strip(), None) for line in text.splitlines() if line.strip()][:count]
    if not texts:
        raise RepresentativeDataError(f"{FLAG} {path}: holds no text")
    return texts


def _plain_text(raw: bytes, path: str) -> str:
    """`raw` as text; binary bytes and a GLUE-style TSV (which would calibrate on its header and labels) refused."""
    if b"\0" in raw:
        line = raw.count(b"\n", 0, raw.index(b"\0")) + 1
        raise RepresentativeDataError(f"{FLAG} {path}: line {line} holds NUL bytes: a binary file, not text")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise RepresentativeDataError(f"{FLAG} {path}: line {line} is not UTF-8 text (a binary file?)") from None
    lines = [line for line in text.splitlines() if line.strip()]
    columns = {line.count("\t") for line in lines}
    if len(lines) > 1 and len(columns) == 1 and columns != {0}:
        header = lines[0].strip().lstrip("\ufeff").replace("\t", " | ")
        raise RepresentativeDataError(
            f"{FLAG} {path}: a table (header '{header}', {columns.pop() + 1} tab-separated columns on every "
            "line), which as plain text would calibrate on its header and labels; give --representative_task "
            "(its GLUE task) to read the text column(s)"
        )
    return text
