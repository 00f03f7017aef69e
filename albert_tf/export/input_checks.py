"""Requests an exported model must refuse, rather than answer for other inputs.

Keras' `take` reads a negative index from the end (id -7 is id `vocab_size - 7`),
and TF broadcasts a batch-1 mask over a batch-2 request; a GPU gather answers
zeros for an id past the vocabulary. So every exported entry point checks:

- `input_ids` in [0, vocab_size), `segment_ids` in [0, type_vocab_size),
  `input_mask` in {0, 1}, `masked_lm_positions` in [0, sequence length);
- `input_mask`/`segment_ids` of `input_ids`' shape, `masked_lm_positions` of its batch;
  a sequence length in [1, `max_position_embeddings`].

How each format refuses:

- SavedModel (`serving_tensors`): `tf.debugging` assertions, an `InvalidArgument`
  whose message names the input; the server goes on serving.
- TFLite (`tflite_tensors`): builtin ops have no assertion, so a value out of range
  is turned into an index past the end of a table the model gathers from, and the
  interpreter's GATHER refuses it ("gather index out of bounds"); that message
  names no input, so `albert_tf.request_checks.check_tflite_inputs` checks the same on the Python side
  before invoking (`run_tflite` does), naming the input. The batch is 1; the
  sequence length is any in [1, max_seq_length] (a length past the file's
  `max_seq_length` makes every id an index past the vocabulary: refused too).

Early exit's `patience` must be a scalar in [1, num_exits] (`num_exits` is full
depth), everywhere: `predict --patience`, the SavedModel's early-exit signatures
(`serving_patience`) and the early-exit TFLite file (`tflite_patience`, GATHER
from a table of the valid values; `check_patience` names it in Python).
"""

from typing import Dict

import tensorflow as tf

from albert_tf.request_checks import (  # noqa: F401  (the Python-side checks, re-exported with the graph's)
    MLM_POSITIONS,
    SAME_SHAPE_AS_IDS,
    ServingInputError,
    check_patience,
    check_tflite_inputs,
    patience_message,
    value_ranges,
)


def serving_tensors(inputs: Dict[str, tf.Tensor], config, rank: int = 2) -> Dict[str, tf.Tensor]:
    """`inputs`, after assertions that raise `InvalidArgument` naming the first bad input.

    `rank` is the model's `input_ids` rank: 2, or 3 for multiple choice ([batch, choices, length]).
    """
    ids = inputs["input_ids"]
    # Past the position table a GPU gather answers zeros (a CPU one fails without naming the input).
    # Empty sequences have no [CLS] for the pooler to read.
    length_message = (
        f"input_ids: the sequence length must be in [1, max_position_embeddings={config.max_position_embeddings}]"
    )
    # First: with 1-D ids every later check reads the wrong axis and blames another input.
    rank_message = (
        "input_ids must be 2-D: [batch size, sequence length] (a single sequence is a batch of 1)"
        if rank == 2
        else f"input_ids must be {rank}-D: [batch size, choices, sequence length]"
    )
    with tf.control_dependencies([tf.debugging.assert_equal(tf.rank(ids), rank, message=rank_message)]):
        ids = tf.identity(ids)
    checks = [
        tf.debugging.assert_less_equal(tf.shape(ids)[-1], config.max_position_embeddings, message=length_message),
        tf.debugging.assert_greater_equal(tf.shape(ids)[-1], 1, message=length_message),
    ]
    for name in SAME_SHAPE_AS_IDS:
        if name in inputs:
            checks.append(
                tf.debugging.assert_equal(
                    tf.shape(inputs[name]),
                    tf.shape(ids),
                    message=f"{name} must have the shape of input_ids (same batch size and sequence length)",
                )
            )
    if MLM_POSITIONS in inputs:
        checks.append(
            tf.debugging.assert_equal(
                tf.shape(inputs[MLM_POSITIONS])[0],
                tf.shape(ids)[0],
                message=f"{MLM_POSITIONS} must have the batch size of input_ids",
            )
        )
    with tf.control_dependencies(checks):
        for name, (low, high) in value_ranges(config, tf.shape(ids)[-1]).items():
            if name in inputs:
                message = f"{name}: every value must be in [{low}, {high})"
                if name == MLM_POSITIONS:
                    message = f"{name}: every value must be in [0, sequence length of input_ids)"
                checks.append(tf.debugging.assert_greater_equal(inputs[name], low, message=message))
                checks.append(
                    tf.debugging.assert_less(inputs[name], tf.cast(high, inputs[name].dtype), message=message)
                )
    with tf.control_dependencies(checks):
        return {name: tf.identity(value) for name, value in inputs.items()}


def tflite_tensors(inputs: Dict[str, tf.Tensor], config, max_seq_length: int) -> Dict[str, tf.Tensor]:
    """`inputs` with every out-of-range value made an index the model's GATHER refuses.

    Values already in range are unchanged (bitwise the same outputs). Only
    negative values need it for ids, segments and positions: past the end, the
    model's own gathers refuse them already. The mask is no index: it goes
    through a gather from [0, 1]. A sequence longer than `max_seq_length` has
    every id moved past the vocabulary.
    """
    result = dict(inputs)
    sequence_length = tf.shape(inputs["input_ids"])[-1]
    too_long = sequence_length > max_seq_length
    for name, (_, high) in value_ranges(config, sequence_length).items():
        if name not in inputs or name == "input_mask":
            continue
        value = inputs[name]
        out_of_range = value < 0
        if name == "input_ids":
            out_of_range = tf.logical_or(out_of_range, too_long)
        result[name] = tf.where(out_of_range, tf.cast(high, value.dtype), value)
    if "input_mask" in inputs:
        result["input_mask"] = tf.gather(tf.constant([0, 1], inputs["input_mask"].dtype), inputs["input_mask"])
    return result


def serving_patience(patience: tf.Tensor, num_exits: int) -> tf.Tensor:
    """`patience` (any shape in the signature) as a scalar, after assertions naming it (SavedModel)."""
    message = patience_message(num_exits)
    checks = [tf.debugging.assert_rank(patience, 0, message=message)]
    with tf.control_dependencies(checks):
        scalar = tf.reshape(patience, [])
        checks += [
            tf.debugging.assert_greater_equal(scalar, 1, message=message),
            tf.debugging.assert_less_equal(scalar, num_exits, message=message),
        ]
    with tf.control_dependencies(checks):
        return tf.identity(scalar)


def tflite_patience(patience: tf.Tensor, num_exits: int) -> tf.Tensor:
    """`patience`, gathered from [1, num_exits]: any other value is an index GATHER refuses (TFLite)."""
    return tf.gather(tf.range(1, num_exits + 1, dtype=patience.dtype), tf.reshape(patience, []) - 1)
