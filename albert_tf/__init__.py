"""albert_tf: ALBERT (Lan et al., 2020) in Keras 3 with a TensorFlow pipeline.

The model classes are imported lazily, so `albert_tf.tokenization` (used by the
Beam workers of `data_prep`) loads neither Keras nor TensorFlow. Keras is
imported on first use of a model class; TensorFlow only by the modules that
need it (checkpoints, data, export), so the model also runs on the other Keras
backends.
"""

import importlib
import os
import sys


def _launched_as_one_of_our_clis() -> bool:
    # `python -m albert_tf.<cli>` imports this package while argv[0] is still "-m"; console scripts are albert-*.
    launcher = os.path.basename(sys.argv[0]) if sys.argv else ""
    return launcher == "-m" or launcher.startswith("albert-")


if _launched_as_one_of_our_clis():
    # TensorFlow prints its C++ start-up lines (CUDA probing, CPU features) when it is imported, which
    # the CLI modules do before any of their code runs: the level must be set before that.
    from albert_tf.cli.app import verbosity_from_argv  # CLIs only: library users need no absl here

    if verbosity_from_argv(sys.argv) < 1:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

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
