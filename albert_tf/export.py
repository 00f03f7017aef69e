"""SavedModel export with named serving signatures (TF Serving layout `<dir>/<version>/`).

The `serving_default` signature takes int32 `input_ids`, `input_mask` and
`segment_ids` [batch, seq] (plus `masked_lm_positions` [batch, predictions]
for the pretraining model) and returns the model's named outputs. The ALBERT
config (and the SentencePiece model, when given) are SavedModel assets. The
export is written to a staging directory, loaded back and checked, then
renamed into place: a failed export leaves no version directory behind.

Example:

>>> import tempfile
>>> from albert_tf import AlbertBackbone
>>> backbone = AlbertBackbone.from_albert_config("configs/albert_tiny.json")
>>> path = export_saved_model(backbone, tempfile.mkdtemp(), version=1)
>>> loaded = tf.saved_model.load(path)
>>> sorted(loaded.signatures["serving_default"].structured_outputs)
['pooled_output', 'sequence_output']
"""

import os
import shutil
import tempfile
from typing import Optional

import numpy as np
import tensorflow as tf

from albert_tf.models.pretrainer import AlbertPretrainer

ID_INPUTS = ("input_ids", "input_mask", "segment_ids")


class ServingModule(tf.Module):
    """Holds the Keras model, its assets and the serving function."""

    def __init__(self, model, config_file: str, spm_model_file: Optional[str] = None):
        super().__init__()
        self.model = model
        self.albert_config = tf.saved_model.Asset(config_file)
        if spm_model_file:
            self.spm_model = tf.saved_model.Asset(spm_model_file)
        specs = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in ID_INPUTS}
        if isinstance(model, AlbertPretrainer):
            specs["masked_lm_positions"] = tf.TensorSpec([None, None], tf.int32, name="masked_lm_positions")
        self.serve = tf.function(self._serve, input_signature=[specs])

    def _serve(self, inputs):
        return self.model(inputs, training=False)


def export_saved_model(model, export_base: str, version: int = 1, spm_model_file: Optional[str] = None) -> str:
    """Exports `model` (backbone or pretrainer) to `export_base/<version>`; returns that path."""
    backbone = model.backbone if isinstance(model, AlbertPretrainer) else model
    target = os.path.join(export_base, str(version))
    os.makedirs(export_base, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{version}.staging-", dir=export_base)
    assets_source = tempfile.mkdtemp(prefix="albert_tf_assets_")
    try:
        config_file = os.path.join(assets_source, "albert_config.json")
        backbone.albert_config.to_json_file(config_file)
        spm_copy = None
        if spm_model_file:
            spm_copy = os.path.join(assets_source, "spm.model")
            shutil.copy(spm_model_file, spm_copy)
        module = ServingModule(model, config_file, spm_copy)
        signature = module.serve.get_concrete_function()
        shutil.rmtree(staging)
        tf.saved_model.save(module, staging, signatures={"serving_default": signature})
        _verify(model, staging)
        if os.path.exists(target):
            shutil.rmtree(target)
        os.rename(staging, target)
        return target
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(assets_source, ignore_errors=True)


def _verify(model, path: str):
    """The export must give the Keras model's outputs on a small batch."""
    rng = np.random.default_rng(0)
    vocab = model.backbone.albert_config.vocab_size if isinstance(model, AlbertPretrainer) \
        else model.albert_config.vocab_size
    inputs = {"input_ids": rng.integers(0, vocab, (2, 8)).astype("int32"),
              "input_mask": np.ones((2, 8), "int32"), "segment_ids": np.zeros((2, 8), "int32")}
    if isinstance(model, AlbertPretrainer):
        inputs["masked_lm_positions"] = np.array([[1, 2], [3, 4]], "int32")
    expected = model(inputs, training=False)
    got = tf.saved_model.load(path).signatures["serving_default"](
        **{k: tf.constant(v) for k, v in inputs.items()})
    for name, value in expected.items():
        if not np.allclose(np.asarray(value), got[name].numpy(), atol=1e-5):
            raise RuntimeError(f"exported {name} differs from the Keras model")
