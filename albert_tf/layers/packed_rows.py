"""Packed rows: several pretraining instances in one row, kept apart (`data_prep.packing` writes them).

`input_mask` numbers each token's instance from 1 (0 is padding). A token attends only to
its own instance's tokens, and its position restarts at 0 where its instance starts, so an
instance computes in a packed row what it computes alone in a row of its own. For a mask of
0s and 1s (one instance a row) both are the original's: every real key, positions 0..S-1
(padding queries attend to every real key, as there).

Example:

>>> import numpy as np
>>> mask = np.array([[1, 1, 2, 2, 2, 0]])
>>> np.asarray(instance_positions(mask)).tolist()
[[0, 1, 0, 1, 2, 5]]
>>> np.asarray(attention_allowed(mask))[0, 0, 2].astype(int).tolist()  # the third token sees its instance
[0, 0, 1, 1, 1, 0]
"""

from keras import ops


def _same_instance(input_mask):
    """[B, S, S]: key k counts for query q (same instance, or q is padding)."""
    mask = ops.cast(input_mask, "int32")
    query, key = ops.expand_dims(mask, 2), ops.expand_dims(mask, 1)
    return ops.logical_or(ops.equal(query, key), ops.equal(query, 0)), key


def attention_allowed(input_mask):
    """bool [B, 1, S, S]: query q may attend to key k (k is real, and in q's instance unless q is padding)."""
    same, key = _same_instance(input_mask)
    return ops.expand_dims(ops.logical_and(same, ops.greater(key, 0)), 1)


def instance_positions(input_mask):
    """int32 [B, S]: each token's position within its instance (padding keeps its row position)."""
    same, _ = _same_instance(input_mask)
    index = ops.arange(ops.shape(input_mask)[1])
    earlier = ops.greater(ops.expand_dims(index, 1), ops.expand_dims(index, 0))  # [q, k]: k before q
    return ops.sum(ops.cast(ops.logical_and(same, earlier), "int32"), axis=-1)
