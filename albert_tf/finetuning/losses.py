"""The fine-tuning losses, by model output: classification, regression, answerability, early exit's.

Early exit (PABEE) trains every layer's classifier on the same label, the
losses summed with the paper's depth weights (classifier j of N gets j / Σ j).

Example:

>>> depth_weights(4)
[0.1, 0.2, 0.3, 0.4]
"""

# Keras is imported when a loss is built, not with the module: the commands' flags load without it.


def classification_loss(labels, logits):
    import keras

    return keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)


def binary_loss(labels, logits):
    """Sigmoid cross-entropy per example (SQuAD v2 answerability)."""
    from keras import ops

    return ops.binary_crossentropy(ops.cast(labels, "float32"), logits, from_logits=True)


def regression_loss(labels, logits):
    from keras import ops

    return ops.square(logits[:, 0] - ops.cast(labels, logits.dtype))


def depth_weights(num_exits):
    """The paper's loss weights: classifier j (1-based) gets j / Σ j."""
    total = num_exits * (num_exits + 1) / 2
    return [j / total for j in range(1, num_exits + 1)]


def depth_weighted_loss(per_exit_loss):
    """`per_exit_loss(labels [B, N], logits [B, N, C]) -> [B, N]` → a loss on `exit_logits` `[B, N, C]`."""

    def loss(labels, exit_logits):
        from keras import ops

        num_exits = exit_logits.shape[1]
        labels = ops.repeat(ops.expand_dims(ops.reshape(labels, (-1,)), 1), num_exits, axis=1)
        weights = ops.convert_to_tensor(depth_weights(num_exits), "float32")
        return ops.sum(per_exit_loss(labels, exit_logits) * weights, axis=1)

    return loss


def exit_classification_loss(labels, exit_logits):
    import keras

    return keras.losses.sparse_categorical_crossentropy(labels, exit_logits, from_logits=True)


def exit_regression_loss(labels, exit_logits):
    from keras import ops

    return ops.square(exit_logits[..., 0] - ops.cast(labels, exit_logits.dtype))
