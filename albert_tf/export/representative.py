"""The representative dataset for full-integer TFLite: real text, tokenised as the exported model's.

Full-integer quantization fixes every activation's int8 range from what the
model computes on these samples (the converter's calibration), so they must be
text of the kind the model will see: a plain text file (one example per
non-blank line) or a GLUE task's TSV (`task_name` given: text pairs keep their
second segment). Each sample is one batch-1 row of the TFLite signature; MLM
models get 15% of their word pieces replaced by the mask id, at the positions
they are asked about, as in pretraining.
"""

import os
from typing import Dict, List, Optional, Tuple

import numpy as np

from albert_tf.export.common import ExportError
from albert_tf.export.input_checks import MLM_POSITIONS
from albert_tf.tasks import glue

DEFAULT_SAMPLES = 500
MIN_SAMPLES = 16  # fewer fix each activation's int8 range from a handful of values
MASKED_FRACTION = 0.15
FLAG = "--representative_data"


class RepresentativeDataError(ExportError):
    """The representative text is missing, unreadable or empty."""


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


def representative_samples(
    texts: List[Tuple[str, Optional[str]]],
    tokenizer,
    input_names,
    max_seq_length: int,
    max_predictions_per_seq: int,
    seed: int = 0,
) -> List[Dict[str, np.ndarray]]:
    """One batch-1 input dict per text, shaped as the TFLite signature (padded to `max_seq_length`)."""
    rng = np.random.default_rng(seed)
    # Packed and padded as fine-tuning packs them.
    examples = [glue.Example(str(index), text_a, text_b, None) for index, (text_a, text_b) in enumerate(texts)]
    features = glue.encode_examples(examples, tokenizer, max_seq_length)
    samples = []
    for row in range(len(examples)):
        sample = {name: values[row : row + 1].copy() for name, values in features.items()}
        if MLM_POSITIONS in input_names:
            ids = sample["input_ids"][0, : sample["input_mask"][0].sum()]
            pieces = [i for i, token in enumerate(ids) if token not in (tokenizer.cls_id, tokenizer.sep_id)]
            count = min(max_predictions_per_seq, max(1, round(MASKED_FRACTION * len(pieces))), len(pieces))
            chosen = np.sort(rng.choice(pieces, count, replace=False)) if pieces else np.zeros(0, "int64")
            sample["input_ids"][0, chosen] = tokenizer.mask_id
            sample[MLM_POSITIONS] = np.zeros((1, max_predictions_per_seq), "int32")
            sample[MLM_POSITIONS][0, : len(chosen)] = chosen
        samples.append({name: sample[name] for name in input_names})
    return samples
