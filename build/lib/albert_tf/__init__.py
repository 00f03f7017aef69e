"""albert_tf: ALBERT (Lan et al., 2020) in Keras 3 with a TensorFlow pipeline.

The model classes are imported lazily, so `albert_tf.tokenization` (used by the
Beam workers of `data_prep`) loads neither Keras nor TensorFlow. Keras is
imported on first use of a model class; TensorFlow only by the modules that
need it (checkpoints, data, export), so the model also runs on the other Keras
backends. Importing the package has no side effects (the CLIs quiet TensorFlow
in `albert_tf.cli`).
"""

import importlib

__version__ = "0.2.0"  # the one version number: pyproject reads it, MODULE.bazel is tested against it

_LAZY = {
    "AlbertConfig": "albert_tf.config",
    "ConfigError": "albert_tf.config",
    "AlbertBackbone": "albert_tf.models.backbone",
    "AlbertPretrainer": "albert_tf.models.pretrainer",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'albert_tf' has no attribute {name!r}")
