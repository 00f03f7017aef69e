"""albert_tf: ALBERT (Lan et al., 2020) in Keras 3 with a TensorFlow pipeline.

Importing the package imports Keras only; TensorFlow is imported by the
modules that need it (checkpoints, data, export), so the model also runs on
the other Keras backends.
"""

from albert_tf.config import AlbertConfig, ConfigError
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.models.pretrainer import AlbertPretrainer

__all__ = ["AlbertBackbone", "AlbertConfig", "AlbertPretrainer", "ConfigError"]
