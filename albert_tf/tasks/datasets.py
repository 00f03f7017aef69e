"""The training input: shuffled, repeated batches of encoded examples."""

from typing import Dict

import numpy as np
import tensorflow as tf

from albert_tf.tasks.settings import FineTuneError


def train_dataset(features: Dict[str, np.ndarray], labels, batch_size: int, seed: int) -> tf.data.Dataset:
    """Shuffled, repeated batches of `(features, labels)`; an array of labels is `{"logits": labels}`."""
    labels = labels if isinstance(labels, dict) else {"logits": labels}
    count = len(next(iter(labels.values())))
    if count < batch_size:
        raise FineTuneError(f"{count} training examples, fewer than --train_batch_size {batch_size}")
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    return (
        dataset.shuffle(count, seed=seed, reshuffle_each_iteration=True)
        .repeat()
        .batch(batch_size, drop_remainder=True)
        .prefetch(tf.data.AUTOTUNE)
    )
