"""ALBERT's pretraining heads: the tied masked-LM head and the SOP head."""

import keras
from keras import ops

from albert_tf.layers.activations import get_activation
from albert_tf.layers.precision import layer_norm


def gather_positions(sequence, positions):
    """Gathers `sequence[b, positions[b, p], :]` into `[B, P, H]`."""
    positions = ops.cast(positions, "int32")
    return ops.take_along_axis(sequence, ops.expand_dims(positions, -1), axis=1)


class AlbertMaskedLMHead(keras.layers.Layer):
    """Masked-LM logits at the masked positions only.

    `logits = LayerNorm(act(x W_t + b_t)) Eᵀ + output_bias`, where `E` is the
    word-embedding table (tied: the head owns only `transform`, `layer_norm`
    and `output_bias`). Logits come out in float32 under mixed precision.

    Args:
        word_embeddings: the backbone's `keras.layers.Embedding` to tie to.
        hidden_act: a config activation name.
        initializer_range: stddev of the truncated-normal initializer.
        layer_norm_epsilon: LayerNorm epsilon.

    Example:

    >>> table = keras.layers.Embedding(50, 8)
    >>> table.build((None,))
    >>> head = AlbertMaskedLMHead(table, "gelu", 0.02)
    >>> seq = keras.ops.ones((2, 6, 16))
    >>> positions = keras.ops.array([[1, 2], [0, 5]])
    >>> tuple(head(seq, positions).shape)
    (2, 2, 50)
    """

    def __init__(
        self,
        word_embeddings,
        hidden_act,
        initializer_range,
        layer_norm_epsilon=1e-12,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.word_embeddings = word_embeddings
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        self.vocab_size = word_embeddings.input_dim
        self.embedding_size = word_embeddings.output_dim
        self.transform = keras.layers.Dense(
            self.embedding_size,
            activation=get_activation(hidden_act),
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            name="transform",
            dtype=self.dtype_policy,
        )
        self.layer_norm = layer_norm(layer_norm_epsilon, "layer_norm", self.dtype_policy)

    def build(self, sequence_output_shape, masked_lm_positions_shape=None):
        self.transform.build(tuple(sequence_output_shape))
        self.layer_norm.build(tuple(sequence_output_shape)[:-1] + (self.embedding_size,))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,), initializer="zeros")
        self.built = True

    def call(self, sequence_output, masked_lm_positions):
        x = gather_positions(sequence_output, masked_lm_positions)
        x = self.layer_norm(self.transform(x))
        table = ops.cast(self.word_embeddings.embeddings, self.compute_dtype)
        logits = ops.matmul(ops.cast(x, self.compute_dtype), ops.transpose(table))
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def compute_output_shape(self, sequence_output_shape, masked_lm_positions_shape):
        return tuple(masked_lm_positions_shape) + (self.vocab_size,)

    def get_config(self):
        # The tied embedding is a layer reference, not config: the owner model
        # passes it again when it is rebuilt.
        config = super().get_config()
        config.update(
            {
                "hidden_act": self.hidden_act,
                "initializer_range": self.initializer_range,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config
