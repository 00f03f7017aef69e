"""A `run_pretraining` or fine-tuning output directory, read as the model it published.

Such a directory holds `checkpoints/` (training state, not a model), and the
model directories `final/` (the end of pretraining) and `best/` (the best
evaluation); loading it loads `final/`, else `best/`, in our format.

Example:

>>> import tempfile
>>> model_dir(tempfile.mkdtemp()) is None
True
"""

import os
from typing import Optional

from albert_tf.formats.native import claims as holds_our_model
from albert_tf.run_layout import MODEL_SUBDIRS  # in order of preference

NAME = "run_dir"


def model_dir(path: str) -> Optional[str]:
    """The published model directory inside the run directory `path`, or None."""
    if not os.path.isdir(path) or holds_our_model(path):
        return None
    for sub in MODEL_SUBDIRS:
        candidate = os.path.join(path, sub)
        if os.path.isdir(candidate):
            return candidate
    return None


def claims(path: str) -> bool:
    return model_dir(path) is not None
