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

The tokenizer is the one saved beside the weights (`tokenizer.json` with
`spm.model` or `vocab.txt`; for Google's archives their `*.model` file or
`vocab.txt`, lowercasing) unless one is given; its size must be the config's
`vocab_size`.

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
import json
import os
import zipfile
from typing import Optional

import keras

from albert_tf import checkpoints
from albert_tf.errors import AlbertError
from albert_tf.interop import detect
from albert_tf.models import (  # noqa: F401  (.keras)
    classifier,
    multiple_choice,
    span_qa,
    span_qa_answerability,
    token_classifier,
)
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.tokenization import Tokenizer, check_vocab_size, resolve_tokenizer

KERAS_MODEL_FILE = "model.keras"
RUN_SUBDIRS = ("final", "best")  # run_pretraining's outputs, in order of preference
MLM_HEAD_VARIABLE = "cls/predictions/output_bias"


class ModelFileError(AlbertError, ValueError):
    """A path that holds no loadable model; the message says what was looked for."""


@dataclasses.dataclass
class LoadedModel:
    model: keras.Model
    source: str  # the file or directory the weights came from
    tokenizer: Optional[Tokenizer] = None  # the one saved with the model (or given), None if there is none
    zero_filled: tuple = ()  # weights a peer's file lacks (e.g. keras-hub's SOP head), set to zeros

    @property
    def spm_model_file(self) -> Optional[str]:
        return self.tokenizer.model_file if self.tokenizer and self.tokenizer.kind == "sentencepiece" else None

    @property
    def vocab_file(self) -> Optional[str]:
        return self.tokenizer.model_file if self.tokenizer and self.tokenizer.kind == "wordpiece" else None


def model_directory(path: str) -> str:
    """The directory whose files go with the model at `path` (vocabulary, config)."""
    if os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, KERAS_MODEL_FILE)) and checkpoints.find_keras_weights(path)[0] is None:
            for sub in RUN_SUBDIRS:  # a run_pretraining / fine-tuning output directory
                if os.path.isdir(os.path.join(path, sub)):
                    return os.path.join(path, sub)
        return path
    return os.path.dirname(path)


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
        checkpoints.check_weight_values(path, weight.path, weight.numpy())
    return model


def _load_original(path: str, albert_config_file: Optional[str]) -> keras.Model:
    import tensorflow as tf  # TF1 checkpoints only: the model itself runs on any Keras backend

    prefix = tf.train.latest_checkpoint(path) if os.path.isdir(path) else path
    names = {name for name, _ in tf.train.list_variables(prefix)} if prefix else set()
    if checkpoints.TF2_CHECKPOINT_KEY in names:
        raise ModelFileError(f"{path}: {checkpoints.TRAINING_CHECKPOINT_ADVICE}")
    directory = path if os.path.isdir(path) else os.path.dirname(path)
    config_file = albert_config_file or os.path.join(directory, checkpoints.CONFIG_FILE)
    if not os.path.isfile(config_file):
        raise ModelFileError(
            f"{path}: a TF1 checkpoint without {checkpoints.CONFIG_FILE} beside it; "
            "pass its config with --albert_config_file"
        )
    backbone = AlbertBackbone.from_albert_config(config_file)
    has_heads = any(name.endswith(MLM_HEAD_VARIABLE) for name in names)  # TF-Hub exports prefix module/
    model = AlbertPretrainer(backbone) if has_heads else backbone
    checkpoints.load_original_checkpoint(model, path)
    return model


def load_model(
    path: str,
    albert_config_file: Optional[str] = None,
    spm_model_file: Optional[str] = None,
    vocab_file: Optional[str] = None,
    do_lower_case: Optional[bool] = None,
) -> LoadedModel:
    """Loads the model at `path` (see the module docstring for what is accepted).

    Raises:
        ModelFileError: nothing loadable at `path`; the message lists what was expected.
        CheckpointError: a checkpoint that does not fit its config.
    """
    if not os.path.exists(path) and not os.path.exists(path + ".index"):
        raise ModelFileError(f"{path}: does not exist")
    directory = path if os.path.isdir(path) else os.path.dirname(path)
    if detect.detect_format(path) in (detect.HF, detect.KERAS_HUB):
        model, peer_spm, report = detect.load_peer(path)
        if not (spm_model_file or vocab_file) and peer_spm:
            spm_model_file = peer_spm
            if do_lower_case is None:
                do_lower_case = _peer_lower_case(path)
        tokenizer = resolve_tokenizer(spm_model_file, vocab_file, do_lower_case, required=False)
        if tokenizer is not None:
            check_vocab_size(backbone_of(model).albert_config.vocab_size, tokenizer, path)
        return LoadedModel(model, path, tokenizer, tuple(report.zero_filled))
    if path.endswith(".keras") and os.path.isfile(path):
        model, source = _load_keras_file(path), path
    elif os.path.isfile(os.path.join(path, KERAS_MODEL_FILE)):
        source = os.path.join(path, KERAS_MODEL_FILE)
        model = _load_keras_file(source)
    elif checkpoints.find_keras_weights(path)[0] is not None:
        weights_file, has_heads = checkpoints.find_keras_weights(path)
        config_file = albert_config_file or os.path.join(directory, checkpoints.CONFIG_FILE)
        if not os.path.isfile(config_file):
            raise ModelFileError(f"{weights_file}: no {checkpoints.CONFIG_FILE} beside it; pass --albert_config_file")
        backbone = AlbertBackbone.from_albert_config(config_file)
        model = AlbertPretrainer(backbone) if has_heads else backbone
        checkpoints.load_checkpoint(model, weights_file)
        source = weights_file
    elif any(os.path.isdir(os.path.join(path, sub)) for sub in RUN_SUBDIRS):
        sub = next(s for s in RUN_SUBDIRS if os.path.isdir(os.path.join(path, s)))
        return load_model(os.path.join(path, sub), albert_config_file, spm_model_file, vocab_file, do_lower_case)
    elif os.path.exists(path + ".index") or (os.path.isdir(path) and os.path.isfile(os.path.join(path, "checkpoint"))):
        model, source = _load_original(path, albert_config_file), path
    else:
        raise ModelFileError(
            f"{path}: holds no model. Expected a .keras file, a directory with {KERAS_MODEL_FILE}, "
            f"our model directory ({checkpoints.CONFIG_FILE} + *.weights.h5), a run_pretraining "
            "output directory (final/ or best/), or a TF1 checkpoint (prefix or directory)"
        )
    tokenizer = resolve_tokenizer(spm_model_file, vocab_file, do_lower_case, directory, required=False)
    if tokenizer is not None:
        check_vocab_size(backbone_of(model).albert_config.vocab_size, tokenizer, source)
    return LoadedModel(model, source, tokenizer)


def _peer_lower_case(path: str) -> bool:
    """HF's `tokenizer_config.json` `do_lower_case`; True otherwise (the released ALBERTs are uncased).

    keras-hub presets record no lowercasing (keras-hub does none), but their weights are Google's uncased
    models, which expect lowercased text as the original's tokenizer makes it.
    """
    config = os.path.join(path, "tokenizer_config.json")
    if os.path.isfile(config):
        try:
            with open(config, encoding="utf-8") as f:
                return bool(json.load(f).get("do_lower_case", True))
        except (OSError, ValueError):
            return True
    return True


def backbone_of(model: keras.Model):
    return getattr(model, "backbone", model)
