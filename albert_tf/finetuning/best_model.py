"""`best/`: the fine-tuned model of the best evaluation, published whole, and where to find one.

Example:

>>> import tempfile
>>> fine_tuned_dir(tempfile.mkdtemp()) is None
True
"""

import os
from typing import Optional

import keras

from albert_tf import formats
from albert_tf.formats.native import KERAS_MODEL_FILE
from albert_tf.json_records import write_json
from albert_tf.publish import staged_dir
from albert_tf.run_layout import BEST_DIR, BEST_RESULTS_FILE


def save(model, output_dir: str, metrics: dict, tokenizer=None) -> None:
    """Publishes `model` (with `tokenizer` and `metrics`) as `output_dir/best/`, whole or not at all."""
    model = in_float32(model)
    with staged_dir(os.path.join(output_dir, BEST_DIR)) as staging:
        formats.save(model, staging, tokenizer=tokenizer)  # the model carries its tokenizer
        write_json(os.path.join(staging, BEST_RESULTS_FILE), metrics)


def in_float32(model):
    """`model`, or a float32 copy of a mixed-precision one (`--mixed_precision`): what best/ holds."""
    backbone = getattr(model, "backbone", model)
    if backbone.dtype_policy.name == "float32":
        return model
    config = model.get_config()
    backbone_config = config if model is backbone else config["backbone"]["config"]
    backbone_config["dtype"] = "float32"
    copy = type(model).from_config(config)
    copy.set_weights(model.get_weights())
    return copy


def fine_tuned_dir(path: str) -> Optional[str]:
    """The `best/` that `path` names: a fine-tuning output directory's, or a `best/` given directly."""
    for candidate in (os.path.join(path, BEST_DIR), path):
        if os.path.isfile(os.path.join(candidate, KERAS_MODEL_FILE)):
            return candidate
    return None


def model_file(path: str) -> str:
    """`best/model.keras` of `path` (see `fine_tuned_dir`); where it would be, when there is none."""
    found = fine_tuned_dir(path)
    return os.path.join(found or os.path.join(path, BEST_DIR), KERAS_MODEL_FILE)


def load(path: str) -> keras.Model:
    return formats.load(model_file(path)).model
