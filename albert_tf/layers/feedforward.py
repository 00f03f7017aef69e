"""The feed-forward half of ALBERT's post-LN transformer block."""

import keras
from keras import ops

from albert_tf.layers.activations import get_activation
from albert_tf.layers.precision import layer_norm
from albert_tf.layers.remat import recompute_in_backward
from albert_tf.layers.weight_cast import dense_on_rows
from albert_tf.layers.weight_chain import chain_shared_weights


class AlbertFeedForward(keras.layers.Layer):
    """`LayerNorm(a + dropout(W_2 · act(W_1 · a)))`, no dropout after `act`.

    Sublayer names are stable (the checkpoint converter targets them):
    `intermediate` (`[H, I]`), `output` (`[I, H]`) and `layer_norm`.

    Args:
        hidden_size: width H.
        intermediate_size: inner width I.
        hidden_act: a config activation name (`gelu` is the tanh form).
        initializer_range: stddev of the truncated-normal initializer.
        dropout: dropout on the output, before the residual.
        layer_norm_epsilon: LayerNorm epsilon.
        remat: in training, keep only the input for the backward pass and
            recompute the rest there (see `albert_tf.layers.remat`).

    Example:

    >>> layer = AlbertFeedForward(16, 32, "gelu", 0.02, 0.0)
    >>> tuple(layer(keras.ops.ones((2, 5, 16))).shape)
    (2, 5, 16)
    """

    def __init__(
        self,
        hidden_size,
        intermediate_size,
        hidden_act,
        initializer_range,
        dropout,
        layer_norm_epsilon=1e-12,
        remat=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.remat = remat
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.activation = get_activation(hidden_act)

        self.intermediate = keras.layers.Dense(
            intermediate_size,
            kernel_initializer=self._initializer(),
            name="intermediate",
            dtype=self.dtype_policy,
        )
        self.output_dense = keras.layers.Dense(
            hidden_size,
            kernel_initializer=self._initializer(),
            name="output",
            dtype=self.dtype_policy,
        )
        self.dropout_layer = keras.layers.Dropout(dropout, name="dropout", dtype=self.dtype_policy)
        self.layer_norm = layer_norm(layer_norm_epsilon, "layer_norm", self.dtype_policy)

    def _initializer(self):
        # One instance per weight: Keras 3 gives an unseeded instance one fixed
        # seed, so sharing it would make one kernel a reshaped copy of the other.
        return keras.initializers.TruncatedNormal(stddev=self.initializer_range)

    def build(self, input_shape):
        input_shape = tuple(input_shape)
        self.intermediate.build(input_shape)
        self.output_dense.build(input_shape[:-1] + (self.intermediate_size,))
        self.layer_norm.build(input_shape)
        self.built = True

    @chain_shared_weights
    def call(self, inputs, training=None):
        if self.remat and training:
            return recompute_in_backward(lambda x: self._feed_forward(x, training), (self.dropout_layer,), inputs)
        return self._feed_forward(inputs, training)

    def _feed_forward(self, inputs, training):
        # On the B·S rows as 2-D matmuls: TF fuses each with its bias add (oneDNN), where
        # a 3-D input went through a reshape that kept them apart (bench/journal/2026-11-24-batch1-graph.md).
        rows = ops.reshape(inputs, (-1, self.hidden_size))
        x = self.activation(dense_on_rows(rows, self.intermediate, self.compute_dtype))
        x = dense_on_rows(x, self.output_dense, self.compute_dtype)
        if self.dropout > 0:
            x = self.dropout_layer(x, training=training)
        return ops.reshape(self.layer_norm(x + rows), ops.shape(inputs))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hidden_size": self.hidden_size,
                "intermediate_size": self.intermediate_size,
                "hidden_act": self.hidden_act,
                "initializer_range": self.initializer_range,
                "dropout": self.dropout,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "remat": self.remat,
            }
        )
        return config
