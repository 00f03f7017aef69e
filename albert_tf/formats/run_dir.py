"""A `run_pretraining` or fine-tuning output directory resolved to the model it published (not a format).

Such a directory holds `checkpoints/` (training state, not a model), and the
model directories `final/` (the end of pretraining) and `best/` (the best
evaluation); `albert_tf.formats` reads `final/`, else `best/`, wherever a
model path is given.

Example:

>>> import tempfile
>>> model_dir(tempfile.mkdtemp()) is None
True
"""

import os
from typing import Optional

from albert_tf.formats.native import FORMAT as NATIVE
from albert_tf.run_layout import MODEL_SUBDIRS  # in order of preference


def model_dir(path: str) -> Optional[str]:
    """The published model directory inside the run directory `path`, or None."""
    if not os.path.isdir(path) or NATIVE.claims(path):
        return None
    for sub in MODEL_SUBDIRS:
        candidate = os.path.join(path, sub)
        if os.path.isdir(candidate):
            return candidate
    return None


def resolve(path: str) -> str:
    """The model directory a run directory published, else `path` itself."""
    return model_dir(path) or path
