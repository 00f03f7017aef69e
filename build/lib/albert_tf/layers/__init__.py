"""Keras layers of ALBERT, written with keras.ops only."""

from albert_tf.layers.attention import AlbertAttention
from albert_tf.layers.embedding import AlbertEmbedding
from albert_tf.layers.feedforward import AlbertFeedForward
from albert_tf.layers.heads import AlbertMaskedLMHead

__all__ = [
    "AlbertAttention",
    "AlbertEmbedding",
    "AlbertFeedForward",
    "AlbertMaskedLMHead",
]
