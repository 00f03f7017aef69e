"""Finds and loads a whole model (architecture + weights) from what users have on disk.

`load_model(path)` accepts:

- a `.keras` file, or a directory holding `model.keras` (fine-tuned task
  models are saved this way, so any Keras model of ours loads);
- our model directory (`albert_config.json` + `pretrainer.weights.h5` or
  `backbone.weights.h5`): `run_pretraining`'s `final/` and `best/`, and
  `convert_checkpoint`'s output;
- a `run_pretraining` output directory (its `final/`, else its `best/`);
- Google's TF1 checkpoint (prefix or directory), with `albert_config.json`
  beside it or `albert_config_file` given; with the `cls/` head variables it
  loads as an `AlbertPretrainer`, otherwise as an `AlbertBackbone`;
- an HF transformers directory (`config.json` + `model.safetensors`) or a
  keras-hub preset directory (`config.json` + `model.weights.h5`), through
  `albert_tf.interop` (their `spiece.model` / `assets/tokenizer/vocabulary.spm`).

The vocabulary is found beside the weights unless one is given: the
SentencePiece model (`spm.model`, or the `*.model` file Google's release
archives carry), else a WordPiece `vocab.txt` (the Chinese models).

Example:

>>> import tempfile
>>> from albert_tf import AlbertBackbone
>>> from albert_tf.checkpoints import save_model_dir
>>> directory = save_model_dir(AlbertBackbone.from_albert_config("configs/albert_tiny.json"),
...                            tempfile.mkdtemp())
>>> found = load_model(directory)
>>> type(found.model).__name__, found.spm_model_file, found.vocab_file
('AlbertBackbone', None, None)
"""

import dataclasses
import glob
import os
from typing import Optional

import keras

from albert_tf import checkpoints
from albert_tf.interop import detect
from albert_tf.models import classifier, multiple_choice, span_qa, span_qa_v2, token_classifier  # noqa: F401  (.keras)
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.models.pretrainer import AlbertPretrainer

KERAS_MODEL_FILE = "model.keras"
SPM_MODEL_FILE = "spm.model"
WORDPIECE_VOCAB_FILE = "vocab.txt"
RUN_SUBDIRS = ("final", "best")  # run_pretraining's outputs, in order of preference
MLM_HEAD_VARIABLE = "cls/predictions/output_bias"
TF2_CHECKPOINT_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"  # object-based (TF2) checkpoints have it


class ModelFileError(ValueError):
    """A path that holds no loadable model; the message says what was looked for."""


@dataclasses.dataclass
class LoadedModel:
    model: keras.Model
    source: str  # the file or directory the weights came from
    spm_model_file: Optional[str]
    vocab_file: Optional[str] = None  # WordPiece vocab.txt (when there is no spm model)


def find_spm_model(directory: str) -> Optional[str]:
    """`spm.model` in `directory`, else its only `*.model` file (e.g. Google's `30k-clean.model`)."""
    if not os.path.isdir(directory):
        return None
    preferred = os.path.join(directory, SPM_MODEL_FILE)
    if os.path.isfile(preferred):
        return preferred
    candidates = sorted(glob.glob(os.path.join(directory, "*.model")))
    return candidates[0] if len(candidates) == 1 else None


def find_vocab_file(directory: str) -> Optional[str]:
    """`vocab.txt` in `directory` (Google's Chinese releases, our WordPiece outputs), if any."""
    path = os.path.join(directory, WORDPIECE_VOCAB_FILE)
    return path if os.path.isfile(path) else None


def _load_keras_file(path: str) -> keras.Model:
    try:
        return keras.saving.load_model(path, compile=False)
    except (ValueError, TypeError, OSError) as error:
        raise ModelFileError(f"{path}: not a loadable .keras model ({error})") from None


def _load_original(path: str, albert_config_file: Optional[str]) -> keras.Model:
    import tensorflow as tf

    prefix = tf.train.latest_checkpoint(path) if os.path.isdir(path) else path
    names = {name for name, _ in tf.train.list_variables(prefix)} if prefix else set()
    if TF2_CHECKPOINT_KEY in names:
        raise ModelFileError(
            f"{path}: a run_pretraining training checkpoint (weights + optimizer state); export the run "
            "directory instead (its final/ or best/)")
    directory = path if os.path.isdir(path) else os.path.dirname(path)
    config_file = albert_config_file or os.path.join(directory, checkpoints.CONFIG_FILE)
    if not os.path.isfile(config_file):
        raise ModelFileError(
            f"{path}: a TF1 checkpoint without {checkpoints.CONFIG_FILE} beside it; "
            "pass its config with --albert_config_file")
    backbone = AlbertBackbone.from_albert_config(config_file)
    has_heads = any(name.endswith(MLM_HEAD_VARIABLE) for name in names)  # TF-Hub exports prefix module/
    model = AlbertPretrainer(backbone) if has_heads else backbone
    checkpoints.load_original_checkpoint(model, path)
    return model


def load_model(path: str, albert_config_file: Optional[str] = None,
               spm_model_file: Optional[str] = None, vocab_file: Optional[str] = None) -> LoadedModel:
    """Loads the model at `path` (see the module docstring for what is accepted).

    Raises:
        ModelFileError: nothing loadable at `path`; the message lists what was expected.
        CheckpointError: a checkpoint that does not fit its config.
    """
    if not os.path.exists(path) and not os.path.exists(path + ".index"):
        raise ModelFileError(f"{path}: does not exist")
    directory = path if os.path.isdir(path) else os.path.dirname(path)
    if detect.detect_format(path) in (detect.HF, detect.KERAS_HUB):
        model, peer_spm, _ = detect.load_peer(path)
        if spm_model_file or vocab_file:
            return LoadedModel(model, path, spm_model_file, vocab_file)
        return LoadedModel(model, path, peer_spm, None)
    if path.endswith(".keras") and os.path.isfile(path):
        model, source = _load_keras_file(path), path
    elif os.path.isfile(os.path.join(path, KERAS_MODEL_FILE)):
        source = os.path.join(path, KERAS_MODEL_FILE)
        model = _load_keras_file(source)
    elif checkpoints.find_keras_weights(path)[0] is not None:
        weights_file, has_heads = checkpoints.find_keras_weights(path)
        config_file = albert_config_file or os.path.join(directory, checkpoints.CONFIG_FILE)
        if not os.path.isfile(config_file):
            raise ModelFileError(f"{weights_file}: no {checkpoints.CONFIG_FILE} beside it; "
                                 "pass --albert_config_file")
        backbone = AlbertBackbone.from_albert_config(config_file)
        model = AlbertPretrainer(backbone) if has_heads else backbone
        checkpoints.load_checkpoint(model, weights_file)
        source = weights_file
    elif any(os.path.isdir(os.path.join(path, sub)) for sub in RUN_SUBDIRS):
        sub = next(s for s in RUN_SUBDIRS if os.path.isdir(os.path.join(path, s)))
        return load_model(os.path.join(path, sub), albert_config_file, spm_model_file, vocab_file)
    elif os.path.exists(path + ".index") or (os.path.isdir(path) and os.path.isfile(os.path.join(path, "checkpoint"))):
        model, source = _load_original(path, albert_config_file), path
    else:
        raise ModelFileError(
            f"{path}: holds no model. Expected a .keras file, a directory with {KERAS_MODEL_FILE}, "
            f"our model directory ({checkpoints.CONFIG_FILE} + *.weights.h5), a run_pretraining "
            "output directory (final/ or best/), or a TF1 checkpoint (prefix or directory)")
    if spm_model_file or vocab_file:
        return LoadedModel(model, source, spm_model_file, vocab_file)
    found_spm = find_spm_model(directory)
    return LoadedModel(model, source, found_spm, None if found_spm else find_vocab_file(directory))
