"""Our model directory: the one module that writes it and reads it.

A model directory holds the config, the weights and the tokenizer, so that
every command can load it with no other flag:

- `albert_config.json` (Google's field names);
- `pretrainer.weights.h5` or `backbone.weights.h5` for the encoder (with or
  without the pretraining heads), or `model.keras` for a fine-tuned task model;
- the tokenizer: `spm.model` or `vocab.txt` plus `tokenizer.json`.

`run_pretraining`'s `final/` and `best/`, the fine-tuning runners' `best/` and
`convert_checkpoint`'s default output are all written by `save`, so they are
whole by construction. A bare `.keras` file or `.weights.h5` file is read too.

Example:

>>> import tempfile
>>> from albert_tf import AlbertBackbone
>>> directory = tempfile.mkdtemp()
>>> FORMAT.save(AlbertBackbone.from_albert_config("configs/albert_tiny.json"), directory)
>>> sorted(os.listdir(directory))
['albert_config.json', 'backbone.weights.h5']
>>> type(FORMAT.load(directory).model).__name__
'AlbertBackbone'
"""

import os
import tempfile
import zipfile
from typing import Optional, Set, Tuple

import h5py
import keras

from albert_tf.formats.base import Format, tokenizer_beside
from albert_tf.formats.loaded import LoadedModel, ModelFileError
from albert_tf.formats.table import CheckpointError, LoadReport, NoHeadsError, backbone_of, check_weight_values
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.run_layout import CONFIG_FILE

NAME = "albert_tf"
BACKBONE_WEIGHTS = "backbone.weights.h5"
PRETRAINER_WEIGHTS = "pretrainer.weights.h5"
KERAS_MODEL_FILE = "model.keras"


def find_weights(path: str) -> Tuple[Optional[str], bool]:
    """(file, holds_heads) for a `.weights.h5` file or a directory holding one; (None, False) otherwise."""
    if os.path.isfile(path) and path.endswith(".weights.h5"):
        return path, os.path.basename(path) == PRETRAINER_WEIGHTS
    for name, heads in ((PRETRAINER_WEIGHTS, True), (BACKBONE_WEIGHTS, False)):
        candidate = os.path.join(path, name)
        if os.path.isfile(candidate):
            return candidate, heads
    return None, False


def keras_file(path: str) -> Optional[str]:
    """The `.keras` file at `path` (the file itself, or `model.keras` in the directory), or None."""
    if path.endswith(".keras") and os.path.isfile(path):
        return path
    inside = os.path.join(path, KERAS_MODEL_FILE)
    return inside if os.path.isfile(inside) else None


def _load_keras_file(path: str) -> keras.Model:
    try:
        model = keras.saving.load_model(path, compile=False)
    except (ValueError, TypeError, OSError, zipfile.BadZipFile) as error:
        raise ModelFileError(f"{path}: not a loadable .keras model ({error})") from None
    backbone = model if isinstance(model, AlbertBackbone) else getattr(model, "backbone", None)
    if not isinstance(backbone, AlbertBackbone):
        raise ModelFileError(
            f"{path}: a .keras model ({type(model).__name__}) that is not an albert_tf model "
            "(expected an AlbertBackbone, or a model with one as `.backbone`)"
        )
    for weight in model.weights:
        check_weight_values(path, weight.path, weight.numpy())
    return model


def _tensor_names(weights_file: str) -> Set[str]:
    """The dataset paths of a `.weights.h5` file; one clear error if it is not a complete HDF5 file."""
    names = set()
    try:
        with h5py.File(weights_file, "r") as f:  # HDF5 checks the stored end of file on open
            f.visititems(lambda name, item: names.add(name) if isinstance(item, h5py.Dataset) else None)
    except OSError as e:  # h5py's error for a truncated or non-HDF5 file
        raise CheckpointError(
            f"{weights_file}: not a readable .weights.h5 file; it is truncated or corrupt ({e})"
        ) from None
    return names


def _check_no_extra_tensors(target, weights_file: str, stored: Set[str]) -> None:
    """Keras ignores tensors the model has no place for: refuse them, listed (a file of another model)."""
    if len(stored) <= len(target.weights):
        return
    with tempfile.TemporaryDirectory() as scratch:  # only on this error path: the names Keras writes
        expected_file = os.path.join(scratch, "expected.weights.h5")
        target.save_weights(expected_file)
        extra = sorted(stored - _tensor_names(expected_file))
    raise CheckpointError(
        f"{weights_file}: holds {len(extra)} tensor(s) the {type(target).__name__} has no place for: "
        f"{', '.join(extra[:10])}{' …' if len(extra) > 10 else ''}"
    )


def load_weights_file(model, weights_file: str, holds_heads: bool) -> LoadReport:
    """Loads our `.weights.h5` into a backbone or pretrainer; a pretrainer's file fills a bare backbone too."""
    backbone = backbone_of(model)
    if model is not backbone and not holds_heads:
        raise NoHeadsError(f"{weights_file}: holds a backbone only; the pretraining heads cannot be filled from it")
    target = AlbertPretrainer(backbone) if holds_heads and model is backbone else model
    if isinstance(model, AlbertPretrainer) and model.packed_rows:
        # Its graph also calls the pooler on each instance, which renumbers the layers the file is keyed by;
        # the weights (and their order) are a plain pretrainer's.
        plain = AlbertPretrainer(AlbertBackbone.from_albert_config(backbone.albert_config))
        report = load_weights_file(plain, weights_file, holds_heads)
        model.set_weights(plain.get_weights())
        return report
    stored = _tensor_names(weights_file)
    try:
        target.load_weights(weights_file)
    except ValueError as e:
        raise CheckpointError(f"{weights_file}: does not fit the model: {e}") from None
    _check_no_extra_tensors(target, weights_file, stored)
    # After loading, so names are the model's; a failed check leaves `model` unusable
    # (every caller discards it on the error).
    for weight in target.weights:
        check_weight_values(weights_file, weight.path, weight.numpy())
    return LoadReport(len(target.weights))


class NativeFormat(Format):
    """Our model directory (or a bare `.keras` / `.weights.h5` file)."""

    name = NAME

    def claims(self, path: str) -> bool:
        return keras_file(path) is not None or find_weights(path)[0] is not None

    def load(self, path, albert_config_file=None, tokenizer=None, do_lower_case=None) -> LoadedModel:
        whole = keras_file(path)
        if whole is not None:
            model, source = _load_keras_file(whole), whole
        else:
            weights_file, holds_heads = find_weights(path)
            if weights_file is None:
                raise ModelFileError(f"{path}: no {KERAS_MODEL_FILE}, {PRETRAINER_WEIGHTS} or {BACKBONE_WEIGHTS}")
            config_file = albert_config_file or os.path.join(os.path.dirname(weights_file), CONFIG_FILE)
            if not os.path.isfile(config_file):
                raise ModelFileError(f"{weights_file}: no {CONFIG_FILE} beside it; pass --albert_config_file")
            backbone = AlbertBackbone.from_albert_config(config_file)
            model = AlbertPretrainer(backbone) if holds_heads else backbone
            load_weights_file(model, weights_file, holds_heads)
            source = weights_file
        notes = []
        if tokenizer is None:
            tokenizer, notes = tokenizer_beside(os.path.dirname(source), do_lower_case)
        return LoadedModel(model, source, tokenizer, format=NAME, notes=tuple(notes))

    def save(self, model, directory, tokenizer=None) -> None:
        """The encoder (with or without the pretraining heads) as config + `.weights.h5`; any
        other model of ours as the whole Keras model, its config beside it for people and tools."""
        backbone = backbone_of(model)
        os.makedirs(directory, exist_ok=True)
        backbone.albert_config.to_json_file(os.path.join(directory, CONFIG_FILE))
        if isinstance(model, AlbertPretrainer):
            model.save_weights(os.path.join(directory, PRETRAINER_WEIGHTS))
        elif isinstance(model, AlbertBackbone):
            model.save_weights(os.path.join(directory, BACKBONE_WEIGHTS))
        else:
            model.save(os.path.join(directory, KERAS_MODEL_FILE))
        if tokenizer is not None:
            tokenizer.save(directory)

    def fill(self, model, path, from_group0=False) -> Optional[LoadReport]:
        if from_group0:  # Google's name table grows the groups
            return None
        weights_file, holds_heads = find_weights(path)
        return None if weights_file is None else load_weights_file(model, weights_file, holds_heads)


FORMAT = NativeFormat()
