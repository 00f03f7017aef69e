"""The representative dataset for full-integer TFLite: real text, tokenised as the exported model's.

Full-integer quantization fixes every activation's int8 range from what the
model computes on these samples (the converter's calibration), so they must be
text of the kind the model will see: (text_a, text_b) pairs, which the export
command reads from `--representative_data` (`albert_tf.cli.calibration`). Each
sample is one batch-1 row of the TFLite signature; MLM models get 15% of their
word pieces replaced by the mask id, at the positions they are asked about, as
in pretraining.
"""

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from albert_tf.export.common import ExportError
from albert_tf.request_checks import MLM_POSITIONS
from albert_tf.tokenization.packing import pack_segments

DEFAULT_SAMPLES = 500
MIN_SAMPLES = 16  # fewer fix each activation's int8 range from a handful of values
MASKED_FRACTION = 0.15


class RepresentativeDataError(ExportError):
    """The representative text is missing, unreadable, empty or too short."""


def check_calibration_texts(texts: Optional[Sequence], quantize: str) -> None:
    """Only full_int8 calibrates, and on at least `MIN_SAMPLES` examples."""
    if texts and quantize != "full_int8":
        raise ExportError(f"calibration texts: only --quantize full_int8 calibrates (got --quantize {quantize})")
    if quantize == "full_int8" and len(texts or ()) < MIN_SAMPLES:
        raise RepresentativeDataError(
            f"--quantize full_int8: calibration needs at least {MIN_SAMPLES} examples of real text, got "
            f"{len(texts or ())} (--representative_data)"
        )


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
    samples = []
    for text_a, text_b in texts:
        # Packed and padded as fine-tuning packs them.
        ids, segments = pack_segments(
            tokenizer.encode(text_a, max_ids=max_seq_length),
            tokenizer.encode(text_b, max_ids=max_seq_length) if text_b is not None else None,
            max_seq_length,
            tokenizer.cls_id,
            tokenizer.sep_id,
        )
        sample = {name: np.zeros((1, max_seq_length), "int32") for name in ("input_ids", "input_mask", "segment_ids")}
        sample["input_ids"][0, : len(ids)] = ids
        sample["input_mask"][0, : len(ids)] = 1
        sample["segment_ids"][0, : len(ids)] = segments
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
