"""The fine-tuning inputs: shuffled, repeated training batches and in-order predictions, length-grouped.

With `length_grouping` (the default) rows of similar length share a batch and
each batch is cut to its longest row, or, when training compiles every shape
(XLA, TPU), to the smallest of `fine_bucket_lengths(max_seq_length)` that holds
it (`albert_tf.inputs.length_batching`); without it, every row is padded to
`max_seq_length`, as the original.
"""

from typing import Dict

import numpy as np
import tensorflow as tf

from albert_tf.finetuning.settings import FineTuneError
from albert_tf.inputs import length_batching
from albert_tf.inputs.length_batching import LengthBatchingError, cut_lengths


def train_dataset(
    features: Dict[str, np.ndarray],
    labels,
    batch_size: int,
    seed: int,
    length_grouping: bool = True,
    compiled: bool = False,
) -> tf.data.Dataset:
    """Shuffled, repeated batches of `(features, labels)`; an array of labels is `{"logits": labels}`.

    `compiled`: the step is compiled per shape (`Compute.compiles_every_shape`).
    """
    width = np.shape(features["input_ids"])[-1]
    try:
        return length_batching.train_dataset(
            features, labels, batch_size, seed, length_grouping=length_grouping, buckets=cut_lengths(width, compiled)
        )
    except LengthBatchingError as error:
        raise FineTuneError(str(error)) from None


def predict(
    model,
    features: Dict[str, np.ndarray],
    batch_size: int,
    length_grouping: bool = True,
    min_width: int = 1,
    compiled: bool = False,
):
    """`model.predict(features)`, computed on length-grouped batches and returned in input order.

    Each batch is cut to its longest row, or to `min_width` (`Task.min_batch_width`) if that is wider:
    prediction runs one graph traced for any width. `compiled` (`Compute.predicts_per_shape`): Keras'
    own predict step compiles each width, so batches are cut to a few bucket widths instead.
    """
    width = np.shape(features["input_ids"])[-1]
    try:
        return length_batching.predict_in_order(
            model,
            features,
            batch_size,
            length_grouping=length_grouping,
            buckets=cut_lengths(width, compiled=compiled, min_width=min_width),
            keras_predict=compiled,
        )
    except LengthBatchingError as error:
        raise FineTuneError(str(error)) from None
