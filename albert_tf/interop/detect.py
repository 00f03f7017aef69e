"""Which format a path holds: Google's TF1 checkpoint, ours, an HF directory or a keras-hub preset.

Example:

>>> import tempfile
>>> from albert_tf import AlbertBackbone
>>> from albert_tf.checkpoints import save_model_dir
>>> directory = save_model_dir(AlbertBackbone.from_albert_config("configs/albert_tiny.json"),
...                            tempfile.mkdtemp())
>>> detect_format(directory)
'albert_tf'
>>> detect_format(tempfile.mkdtemp()) is None
True
"""

import os
from typing import Optional

from albert_tf import checkpoints
from albert_tf.interop import hf, keras_hub

ALBERT_TF, ORIGINAL, HF, KERAS_HUB = "albert_tf", "original", "hf", "keras_hub"
FORMATS = (ALBERT_TF, ORIGINAL, HF, KERAS_HUB)


def detect_format(path: str) -> Optional[str]:
    """One of `FORMATS` for what `path` holds, or None."""
    from albert_tf import loading as model_files  # here: loading imports this module

    if keras_hub.is_preset_dir(path):
        return KERAS_HUB
    if hf.is_hf_dir(path):
        return HF
    if path.endswith(".keras") and os.path.isfile(path):
        return ALBERT_TF
    if os.path.isdir(path) and (
        os.path.isfile(os.path.join(path, model_files.KERAS_MODEL_FILE))
        or any(os.path.isdir(os.path.join(path, s)) for s in model_files.RUN_SUBDIRS)
    ):
        return ALBERT_TF
    if checkpoints.find_keras_weights(path)[0] is not None:
        return ALBERT_TF
    if os.path.exists(path + ".index") or (os.path.isdir(path) and os.path.isfile(os.path.join(path, "checkpoint"))):
        return ORIGINAL
    return None


def load_peer(path: str):
    """(model, spm model file or None, ImportReport) of an HF directory or a keras-hub preset."""
    if keras_hub.is_preset_dir(path):
        model, report = keras_hub.load_preset(path)
        return model, keras_hub.find_spm(path), report
    model, report = hf.load_hf_dir(path)
    return model, hf.find_spm(path), report
