"""The original SQuAD v2 head (XLNet style): start, end given a start, and an answerability logit."""

import keras
from keras import ops

from albert_tf.layers.precision import layer_norm

NEG_INF = -1e30


class AlbertAnswerabilityHead(keras.layers.Layer):
    """Start logits, end logits conditioned on start positions, and `cls_logits` (answerable or not).

    - start: `dense(H→1)`, masked by `p_mask` (1 = may not be in an answer).
    - end: `dense_1(LayerNorm(tanh(dense_0([h; h_start]))))` for each given
      start; a start position < 0 takes the next of the top `start_n_top`
      starts (inference: pass `-1`s; training: the gold start).
    - answerability: `dense_1(dropout(tanh(dense_0([Σ softmax(start)·h; h_cls]))))`,
      no bias on `dense_1`.

    Call args:
        sequence_output: `[B, S, H]`.
        p_mask: `[B, S]`, 1 where no answer may start or end.
        start_positions: int `[B, K]`: the gold starts (training); None: the
            top `start_n_top` starts by start logit (inference, K = `start_n_top`).

    Returns:
        dict: `start_logits [B, S]`, `end_logits [B, K, S]` (both masked),
        `start_positions [B, K]` (the starts used), `cls_logits [B]`, all float32
        but the positions.

    Example:

    >>> head = AlbertAnswerabilityHead(hidden_size=8, start_n_top=3)
    >>> out = head(keras.ops.ones((2, 6, 8)), keras.ops.zeros((2, 6)))
    >>> tuple(out["end_logits"].shape), tuple(out["cls_logits"].shape)
    ((2, 3, 6), (2,))
    >>> tuple(head(keras.ops.ones((2, 6, 8)), keras.ops.zeros((2, 6)), keras.ops.array([[1], [4]]))["end_logits"].shape)
    (2, 1, 6)
    """

    def __init__(
        self, hidden_size, start_n_top=5, dropout=0.1, initializer_range=0.02, layer_norm_epsilon=1e-12, **kwargs
    ):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.start_n_top = start_n_top
        self.dropout_rate = dropout
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon

        def dense(units, name, activation=None, use_bias=True):
            return keras.layers.Dense(
                units,
                activation=activation,
                use_bias=use_bias,
                name=name,
                kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
                dtype=self.dtype_policy,
            )

        self.start_dense = dense(1, "start_dense")
        self.end_dense_0 = dense(hidden_size, "end_dense_0", activation="tanh")
        self.end_layer_norm = layer_norm(layer_norm_epsilon, "end_layer_norm", self.dtype_policy)
        self.end_dense_1 = dense(1, "end_dense_1")
        self.answer_dense_0 = dense(hidden_size, "answer_class_dense_0", activation="tanh")
        self.answer_dropout = keras.layers.Dropout(dropout, name="answer_class_dropout", dtype=self.dtype_policy)
        self.answer_dense_1 = dense(1, "answer_class_dense_1", use_bias=False)

    def build(self, sequence_output_shape, p_mask_shape=None, start_positions_shape=None):
        h = self.hidden_size
        self.start_dense.build((None, None, h))
        self.end_dense_0.build((None, None, 2 * h))
        self.end_layer_norm.build((None, None, h))
        self.end_dense_1.build((None, None, h))
        self.answer_dense_0.build((None, 2 * h))
        self.answer_dense_1.build((None, h))
        self.built = True

    def _masked(self, logits, p_mask):
        p_mask = ops.cast(p_mask, "float32")
        return ops.cast(logits, "float32") * (1.0 - p_mask) + NEG_INF * p_mask

    def call(self, sequence_output, p_mask, start_positions=None, training=None):
        start_logits = self._masked(ops.squeeze(self.start_dense(sequence_output), -1), p_mask)
        if start_positions is None:
            starts = ops.cast(ops.top_k(start_logits, k=self.start_n_top)[1], "int32")
        else:
            starts = ops.cast(start_positions, "int32")
        start_states = ops.take_along_axis(sequence_output, ops.expand_dims(starts, -1), axis=1)  # [B, K, H]
        tiled_sequence = ops.expand_dims(sequence_output, 1) + ops.zeros_like(ops.expand_dims(start_states, 2))
        tiled_start = ops.expand_dims(start_states, 2) + ops.zeros_like(tiled_sequence)
        end_hidden = self.end_layer_norm(self.end_dense_0(ops.concatenate([tiled_sequence, tiled_start], -1)))
        end_logits = self._masked(ops.squeeze(self.end_dense_1(end_hidden), -1), ops.expand_dims(p_mask, 1))
        # Answerability from the start distribution's expected state and [CLS].
        start_probs = ops.softmax(start_logits, axis=-1)
        expected_start = ops.einsum("bs,bsh->bh", ops.cast(start_probs, sequence_output.dtype), sequence_output)
        features = ops.concatenate([expected_start, sequence_output[:, 0]], -1)
        answer_hidden = self.answer_dropout(self.answer_dense_0(features), training=training)
        cls_logits = ops.cast(ops.squeeze(self.answer_dense_1(answer_hidden), -1), "float32")
        return {
            "start_logits": start_logits,
            "end_logits": end_logits,
            "start_positions": starts,
            "cls_logits": cls_logits,
        }

    def compute_output_spec(self, sequence_output, p_mask, start_positions=None, training=None):
        b, s = sequence_output.shape[0], sequence_output.shape[1]
        k = self.start_n_top if start_positions is None else start_positions.shape[1]
        return {
            "start_logits": keras.KerasTensor((b, s), "float32"),
            "end_logits": keras.KerasTensor((b, k, s), "float32"),
            "start_positions": keras.KerasTensor((b, k), "int32"),
            "cls_logits": keras.KerasTensor((b,), "float32"),
        }

    def get_config(self):
        return {
            **super().get_config(),
            "hidden_size": self.hidden_size,
            "start_n_top": self.start_n_top,
            "dropout": self.dropout_rate,
            "initializer_range": self.initializer_range,
            "layer_norm_epsilon": self.layer_norm_epsilon,
        }
