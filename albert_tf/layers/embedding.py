"""ALBERT's factorized embedding: word + token type + position at width E."""

import keras
from keras import ops

from albert_tf.layers import packed_rows
from albert_tf.layers.precision import float32_policy, layer_norm


class AlbertEmbedding(keras.layers.Layer):
    """Sums word, token-type and position embeddings, then LayerNorm + dropout.

    The output stays at the small width `embedding_size` (E); the projection to
    the hidden width lives in the backbone (`embedding_projection`), as in the
    original, where it belongs to the encoder scope. Positions are a slice of
    the table (`[0:S]`): there is no position-ids input. With `packed_rows` set
    (an attribute, not config: pretraining on packed data sets it) positions
    restart with each instance that `input_mask` numbers (`albert_tf.layers.packed_rows`).

    Args:
        vocab_size: rows of the word table.
        embedding_size: width E.
        max_position_embeddings: rows of the position table.
        type_vocab_size: rows of the token-type table.
        initializer_range: stddev of the truncated-normal initializer.
        dropout: dropout rate on the output.
        layer_norm_epsilon: LayerNorm epsilon (1e-12 in the original).

    Example:

    >>> layer = AlbertEmbedding(100, 16, 32, 2, 0.02, 0.0)
    >>> ids = keras.ops.ones((2, 8), dtype="int32")
    >>> tuple(layer(ids, keras.ops.zeros((2, 8), dtype="int32")).shape)
    (2, 8, 16)
    """

    def __init__(
        self,
        vocab_size,
        embedding_size,
        max_position_embeddings,
        type_vocab_size,
        initializer_range,
        dropout,
        layer_norm_epsilon=1e-12,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.packed_rows = False

        self.word_embeddings = keras.layers.Embedding(
            vocab_size,
            embedding_size,
            embeddings_initializer=self._initializer(),
            name="word_embeddings",
            dtype=self.dtype_policy,
        )
        self.token_type_embeddings = keras.layers.Embedding(
            type_vocab_size,
            embedding_size,
            embeddings_initializer=self._initializer(),
            name="token_type_embeddings",
            dtype=self.dtype_policy,
        )
        self.layer_norm = layer_norm(layer_norm_epsilon, "layer_norm", self.dtype_policy)
        # Applied to the float32 LayerNorm output; keeps it float32.
        self.dropout_layer = keras.layers.Dropout(dropout, name="dropout", dtype=float32_policy(self.dtype_policy))

    def _initializer(self):
        return keras.initializers.TruncatedNormal(stddev=self.initializer_range)

    def build(self, input_ids_shape, segment_ids_shape=None, input_mask_shape=None):
        self.word_embeddings.build(input_ids_shape)
        self.token_type_embeddings.build(input_ids_shape)
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.max_position_embeddings, self.embedding_size),
            initializer=self._initializer(),
        )
        self.layer_norm.build(tuple(input_ids_shape) + (self.embedding_size,))
        self.built = True

    def call(self, input_ids, segment_ids, input_mask=None, training=None):
        seq_length = ops.shape(input_ids)[1]
        if isinstance(seq_length, int) and seq_length > self.max_position_embeddings:
            raise ValueError(
                f"sequence length {seq_length} exceeds max_position_embeddings="
                f"{self.max_position_embeddings} of the config"
            )
        table = ops.cast(self.position_embeddings, self.compute_dtype)
        if self.packed_rows:
            positions = ops.take(table, packed_rows.instance_positions(input_mask), axis=0)
        else:
            positions = ops.slice(table, (0, 0), (seq_length, self.embedding_size))[None, :, :]
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(segment_ids) + positions
        x = self.layer_norm(x)
        if self.dropout > 0:
            x = self.dropout_layer(x, training=training)
        return x

    def compute_output_shape(self, input_ids_shape, segment_ids_shape=None, input_mask_shape=None):
        return tuple(input_ids_shape) + (self.embedding_size,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "embedding_size": self.embedding_size,
                "max_position_embeddings": self.max_position_embeddings,
                "type_vocab_size": self.type_vocab_size,
                "initializer_range": self.initializer_range,
                "dropout": self.dropout,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config
