"""PL-BERT's whole-word masking, a TensorFlow function for the tf.data pipeline.

The reference masks in its dataloader (yl4579/PL-BERT `dataloader.py`), word by
word: a word is picked with probability `word_mask_prob` = 0.15; a picked word
then, with probability 1 - `replace_prob` = 0.8, has every phoneme replaced by the
mask symbol "M"; with `phoneme_mask_prob` = 0.1, by phonemes drawn at random from
its row's phonemes (uniformly over the row's positions, so by frequency); and with
`replace_prob` - `phoneme_mask_prob` = 0.1 it is kept. That is the issue's
"80 % mask, 10 % random, 10 % kept", decided per word, not per phoneme, and
"random" means drawn from the same row (here: the same instance), not from the
symbol table. Every phoneme of a picked word is a label (the three cases alike);
the separator after a word is never masked. Word labels: `word_ids` at every real
position (the reference's word loss covers every real position).

Deterministic: stateless random ops keyed by (`seed`, the row's index in the
stream), so a row is masked the same way on every run and every worker.

Rows follow the PL-BERT data contract (`data_prep.create_pretraining_data
--objective plbert`): `input_ids`, `input_mask` (the instance from 1, 0 on
padding), `word_ids`, `word_positions` (the word of the row from 1, 0 on padding).

Example:

>>> import numpy as np
>>> row = {"input_ids": np.array([40, 41, 16, 42, 16, 0]), "input_mask": np.array([1, 1, 1, 1, 1, 0]),
...        "word_ids": np.array([7, 7, 3, 9, 3, 0]), "word_positions": np.array([1, 1, 1, 2, 2, 0])}
>>> features, labels = mask_words(row, seed=0, row_index=0, word_mask_prob=1.0, replace_prob=0.0)
>>> features["input_ids"].numpy().tolist()  # every word masked, separators and padding kept
[29, 29, 16, 29, 16, 0]
>>> labels["phoneme_weights"].numpy().tolist()
[1.0, 1.0, 0.0, 1.0, 0.0, 0.0]
"""

import tensorflow as tf

from albert_tf.models.plbert import MASK_ID, PHONEME_MASK_PROB, REPLACE_PROB, SEPARATOR_ID, WORD_MASK_PROB


def mask_words(
    row,
    seed,
    row_index,
    word_mask_prob=WORD_MASK_PROB,
    replace_prob=REPLACE_PROB,
    phoneme_mask_prob=PHONEME_MASK_PROB,
    separator_id=SEPARATOR_ID,
    mask_id=MASK_ID,
):
    """(features, labels) of one unbatched row: the model's inputs and the objective's labels.

    features: `input_ids` (masked) and `input_mask`, int32 `[S]`.
    labels: `phoneme_labels` (the original ids) with `phoneme_weights` (1.0 at the
    masked words' phonemes), `word_labels` (`word_ids`) with `word_weights` (1.0 at
    every real position), for `albert_tf.pretraining.plbert_objective`.
    """
    ids = tf.cast(row["input_ids"], tf.int32)
    instance = tf.cast(row["input_mask"], tf.int32)
    word = tf.cast(row["word_positions"], tf.int32)
    length = tf.shape(ids)[0]
    # One draw per word (by its number) for each decision, one per position for the random phoneme.
    key = tf.stack([tf.cast(seed, tf.int64), tf.cast(row_index, tf.int64)])
    draws = tf.random.stateless_uniform([3, length + 1], seed=key)
    per_word = tf.gather(draws[:2], word, axis=1)
    phoneme = tf.logical_and(instance > 0, tf.not_equal(ids, separator_id))
    picked = tf.logical_and(tf.logical_and(phoneme, word > 0), per_word[0] < word_mask_prob)
    # The reference's nested draws (replace_prob, then phoneme_mask_prob / replace_prob), as one draw.
    masked = tf.logical_and(picked, per_word[1] < 1.0 - replace_prob)
    randomized = tf.logical_and(picked, tf.logical_not(masked))
    randomized = tf.logical_and(randomized, per_word[1] < 1.0 - replace_prob + phoneme_mask_prob)
    random_ids = _random_phonemes_of_instance(ids, instance, phoneme, draws[2, :length])
    masked_ids = tf.where(masked, mask_id, tf.where(randomized, random_ids, ids))
    features = {"input_ids": masked_ids, "input_mask": instance}
    labels = {
        "phoneme_labels": ids,
        "phoneme_weights": tf.cast(picked, tf.float32),
        "word_labels": tf.cast(row["word_ids"], tf.int32),
        "word_weights": tf.cast(instance > 0, tf.float32),
    }
    return features, labels


def _random_phonemes_of_instance(ids, instance, candidate, uniform):
    """For each position, the id at a position drawn uniformly among its instance's `candidate` positions."""
    count_of = tf.cast(candidate, tf.int32)
    seen = tf.cumsum(count_of)  # candidates up to and including each position
    segments = tf.reduce_max(instance) + 1
    count = tf.gather(tf.math.unsorted_segment_sum(count_of, instance, segments), instance)
    before = tf.gather(tf.math.unsorted_segment_min(seen - count_of, instance, segments), instance)
    rank = tf.minimum(tf.cast(uniform * tf.cast(count, tf.float32), tf.int32), count - 1)
    position = tf.searchsorted(seen, before + rank + 1, side="left")  # the candidate of that rank
    return tf.gather(ids, tf.clip_by_value(position, 0, tf.shape(ids)[0] - 1))


def mask_dataset(dataset, seed, **probabilities):
    """`dataset` of unbatched contract rows -> (features, labels), each row keyed by its index in the stream."""
    return dataset.enumerate().map(
        lambda index, row: mask_words(row, seed, index, **probabilities), num_parallel_calls=tf.data.AUTOTUNE
    )
