"""The checks a request to an exported model gets on the Python side, before the model sees it (no TensorFlow).

A TFLite file's builtin ops have no assertion: an out-of-range value reaches GATHER, whose
"index out of bounds" names no input. So `check_tflite_inputs` checks the names, shapes, value
ranges and length first, naming the input (`albert_tf.tflite_file.TFLiteRunner` calls it). The
same ranges drive the SavedModel's in-graph assertions (`albert_tf.export.input_checks`), and
`check_patience` is early exit's `patience` rule everywhere.

Example:

>>> import dataclasses
>>> import numpy as np
>>> from albert_tf.config import AlbertConfig
>>> config = dataclasses.replace(AlbertConfig.from_json_file("configs/albert_tiny.json"), vocab_size=100)
>>> ids = np.array([[2, -7, 3]], "int32")
>>> check_tflite_inputs({"input_ids": ids}, config, {"input_ids": (1, -1)}, max_seq_length=8)
Traceback (most recent call last):
...
albert_tf.request_checks.ServingInputError: input_ids: -7 at [0, 1] is outside [0, 100)
"""

from typing import Dict, Optional, Tuple

import numpy as np

from albert_tf.errors import AlbertError

MLM_POSITIONS = "masked_lm_positions"
SAME_SHAPE_AS_IDS = ("input_mask", "segment_ids")


class PredictError(AlbertError, ValueError):
    """A request the model cannot serve (`predict`, `albert_tf.inference`); the message says why."""


class ServingInputError(AlbertError, ValueError):
    """A request to an exported model with values or shapes the model would silently misread."""


def value_ranges(config, sequence_length) -> Dict[str, Tuple[int, int]]:
    """{input: (low, high)}: the half-open range of valid values."""
    return {
        "input_ids": (0, config.vocab_size),
        "segment_ids": (0, config.type_vocab_size),
        "input_mask": (0, 2),
        MLM_POSITIONS: (0, sequence_length),
    }


def patience_message(num_exits: int) -> str:
    return f"patience: must be a scalar in [1, {num_exits}] ({num_exits} layer applications; {num_exits} is full depth)"


def check_patience(patience, num_exits: int) -> None:
    """Raises `ServingInputError` unless `patience` is an integer scalar in [1, num_exits]."""
    value = np.asarray(patience)
    if value.ndim != 0 or not np.issubdtype(value.dtype, np.integer) or not 1 <= int(value) <= num_exits:
        raise ServingInputError(f"{patience_message(num_exits)}, got {value.tolist()!r}")


def check_tflite_inputs(
    inputs: Dict[str, np.ndarray], config, shapes: Dict[str, Tuple[int, ...]], max_seq_length: Optional[int] = None
) -> None:
    """Raises `ServingInputError` naming the input whose names, shape or values the file cannot take.

    `shapes` are the file's (-1: any size, the sequence length); `max_seq_length`
    (the file's, None: `shapes` fix it) bounds the sequence length.
    """
    missing = sorted(set(shapes) - set(inputs))
    unknown = sorted(set(inputs) - set(shapes))
    if missing or unknown:
        raise ServingInputError(f"inputs: expected {sorted(shapes)}, missing {missing}, unknown {unknown}")
    for name, shape in shapes.items():
        value = np.asarray(inputs[name])
        wanted = tuple(got if want == -1 else want for want, got in zip(shape, value.shape))
        if value.ndim != len(shape) or tuple(value.shape) != wanted:
            wanted = tuple(shape) if value.ndim != len(shape) else wanted
            raise ServingInputError(f"{name}: shape {tuple(value.shape)}, but the file takes {wanted}")
        if not np.issubdtype(value.dtype, np.integer):
            raise ServingInputError(f"{name}: dtype {value.dtype}, expected integers")
    ids_shape = np.shape(inputs["input_ids"])
    for name in SAME_SHAPE_AS_IDS:
        if name in inputs and np.shape(inputs[name]) != ids_shape:
            raise ServingInputError(f"{name}: shape {np.shape(inputs[name])}, but input_ids has {ids_shape}")
    sequence_length = ids_shape[-1]
    longest = max_seq_length if max_seq_length is not None else shapes["input_ids"][-1]
    if not 1 <= sequence_length <= longest:
        raise ServingInputError(
            f"input_ids: sequence length {sequence_length}, but the file takes 1 to max_seq_length={longest}"
        )
    for name, (low, high) in value_ranges(config, sequence_length).items():
        if name in inputs:
            value = np.asarray(inputs[name])
            bad = np.argwhere((value < low) | (value >= high))
            if len(bad):
                where = tuple(int(i) for i in bad[0])
                raise ServingInputError(f"{name}: {value[where]} at {list(where)} is outside [{low}, {high})")
