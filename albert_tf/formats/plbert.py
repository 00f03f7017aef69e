"""PL-BERT checkpoint directories (yl4579/PL-BERT's layout), which StyleTTS 2 and Kokoro load.

A directory holds `config.yml` (its `model_params` are HF `AlbertConfig` keyword
arguments) and `step_<N>.t7` files: `torch.save` of `{"net": state_dict, "step": N}`
(the reference adds `optimizer`), whose keys are the DataParallel-wrapped
`MultiTaskModel`'s: `module.encoder.<HF AlbertModel key>` (with the
`embeddings.position_ids` buffer, which StyleTTS 2's `load_plbert` deletes),
`module.mask_predictor.{weight,bias}` and `module.word_predictor.{weight,bias}`.
StyleTTS 2 reads the highest step, keeps the `encoder.` keys and loads them into
transformers' `AlbertModel`; so do we, into a `PlbertPretrainer` (or the backbone
alone: `read_plbert_dir(..., backbone_only=True)`).

The encoder's tensors go through the HF format's name table
(`albert_tf.formats.hf.name_table`); the heads are plain torch Linears. PyTorch is
needed for this format only (`pip install torch`); the `.t7` pickles are read with
`torch.load(weights_only=True)`, which restores tensors and plain containers only.
A model without PL-BERT's heads (a backbone, ALBERT's pretrainer) is written as
the encoder alone. No tokenizer is written: PL-BERT's symbol table is fixed.

Example (the name table, no torch needed):

>>> from albert_tf.models.plbert import plbert_config
>>> [m.name for m in name_table(plbert_config())][-2:]
['word_predictor.weight', 'word_predictor.bias']
"""

import collections
import os
import re
from typing import Dict, List, Optional, Tuple

import numpy as np

from albert_tf.config import REQUIRED_FIELDS, AlbertConfig, ConfigError
from albert_tf.formats import hf
from albert_tf.formats.base import Format
from albert_tf.formats.loaded import LoadedModel
from albert_tf.formats.table import (
    MODEL,
    SAME,
    TRANSPOSED,
    CheckpointError,
    LoadReport,
    NoHeadsError,
    TensorMapping,
    backbone_of,
    export_table,
    fill_missing_groups,
    load_table,
)
from albert_tf.models import plbert as plbert_model
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.models.plbert import PlbertPretrainer

NAME = "plbert"
CONFIG_FILE = "config.yml"
STEP_FILE = re.compile(r"^step_(\d+)\.t7$")
DATA_PARALLEL_PREFIX = "module."  # the reference saves its DataParallel wrapper's state dict
ENCODER_PREFIX = "encoder."
POSITION_IDS = "encoder.embeddings.position_ids"
WORD_EMBEDDINGS = "encoder.embeddings.word_embeddings.weight"
HEADS = (("mask_predictor", "phoneme_head"), ("word_predictor", "word_head"))
LAYER_GROUP = re.compile(r"albert_layer_groups\.\d+\.")  # HF's name of a layer group
WORD_HEAD_WEIGHT, WORD_HEAD_BIAS = "word_predictor.weight", "word_predictor.bias"
WORD_HEAD = (WORD_HEAD_WEIGHT, WORD_HEAD_BIAS)
NO_TOKENIZER = "PL-BERT reads phoneme ids of StyleTTS 2's symbol table, not text; see docs/plbert.md"


class PlbertFileError(CheckpointError):
    """A PL-BERT directory whose config.yml or step_<N>.t7 cannot be read; the message names the file."""


def _torch():
    try:
        import torch
    except ImportError:
        raise PlbertFileError("the plbert format needs PyTorch: pip install torch") from None
    return torch


def _yaml():
    try:
        import yaml
    except ImportError:
        raise PlbertFileError("the plbert format needs PyYAML: pip install pyyaml") from None
    return yaml


# ---- the name table ---------------------------------------------------------------------
def name_table(config: AlbertConfig) -> List[TensorMapping]:
    """Every tensor of a PL-BERT `MultiTaskModel` (without `module.`) and the weight of ours it maps to."""
    encoder = [
        TensorMapping(ENCODER_PREFIX + m.name, m.weight, m.scope, m.layout, m.optional)
        for m in hf.name_table(config, "AlbertModel")
    ]
    heads = []
    for theirs, ours in HEADS:
        heads += [
            TensorMapping(f"{theirs}.weight", f"{ours}/kernel", MODEL, TRANSPOSED),
            TensorMapping(f"{theirs}.bias", f"{ours}/bias", MODEL, SAME),
        ]
    return encoder + heads


# ---- config.yml ---------------------------------------------------------------------------
def config_yml(config: AlbertConfig) -> Dict:
    """config.yml: `model_params` (HF AlbertConfig kwargs) and the reference's masking in `dataset_params`."""
    values = hf.hf_config(config, "AlbertModel")
    return {
        "dataset_params": {
            "token_separator": " ",
            "token_mask": "M",
            "max_mel_length": config.max_position_embeddings,
            "word_mask_prob": plbert_model.WORD_MASK_PROB,
            "phoneme_mask_prob": plbert_model.PHONEME_MASK_PROB,
            "replace_prob": plbert_model.REPLACE_PROB,
        },
        "model_params": {name: values[name] for name in (*REQUIRED_FIELDS, "layer_norm_eps")},
    }


def read_config_yml(path: str) -> AlbertConfig:
    """Our AlbertConfig of config.yml's `model_params` (HF's defaults for what it leaves out, as HF)."""
    yaml = _yaml()
    try:
        with open(path, encoding="utf-8") as f:
            values = yaml.safe_load(f)
    except OSError as e:
        raise PlbertFileError(f"{path}: not readable ({e.strerror})") from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise PlbertFileError(f"{path}: not YAML ({' '.join(str(e).split())})") from None
    params = values.get("model_params") if isinstance(values, dict) else None
    if not isinstance(params, dict):
        raise PlbertFileError(f"{path}: has no 'model_params' mapping (HF AlbertConfig's keyword arguments)")
    try:
        return hf.albert_config_from_hf(params, path)
    except ConfigError as e:
        raise PlbertFileError(str(e)) from None


# ---- step files ---------------------------------------------------------------------------
def step_files(directory: str) -> Dict[int, str]:
    """{N: path} of the directory's `step_<N>.t7` files."""
    found = {}
    for name in os.listdir(directory):
        match = STEP_FILE.match(name)
        if match and os.path.isfile(os.path.join(directory, name)):
            found[int(match.group(1))] = os.path.join(directory, name)
    return found


def latest_step_file(directory: str) -> str:
    """The highest `step_<N>.t7` (what the reference and StyleTTS 2 load)."""
    found = step_files(directory)
    if not found:
        raise PlbertFileError(f"{directory}: has no step_<N>.t7 checkpoint")
    return found[max(found)]


def read_step_file(path: str) -> Dict[str, np.ndarray]:
    """{name without `module.`: array} of a step file's `net` (floats as float32)."""
    torch = _torch()
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001  (torch raises anything from a broken pickle: say which file, one line)
        first_line = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise PlbertFileError(f"{path}: not a readable PyTorch checkpoint ({first_line})") from None
    net = checkpoint.get("net") if isinstance(checkpoint, dict) else None
    if not isinstance(net, dict) or not all(torch.is_tensor(v) for v in net.values()):
        raise PlbertFileError(f"{path}: has no 'net' state dict of tensors (not a PL-BERT checkpoint)")
    values = {}
    for key, tensor in net.items():
        name = key[len(DATA_PARALLEL_PREFIX) :] if key.startswith(DATA_PARALLEL_PREFIX) else key
        tensor = tensor.detach().cpu()
        values[name] = tensor.float().numpy() if tensor.is_floating_point() else tensor.numpy()
    return values


# ---- load / save --------------------------------------------------------------------------
def is_plbert_dir(path: str) -> bool:
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, CONFIG_FILE)) and bool(step_files(path))


def read_plbert_dir(directory: str, backbone_only: bool = False) -> Tuple[object, LoadReport, str]:
    """(PlbertPretrainer, or the AlbertBackbone when the file has no heads or `backbone_only`, report, step file)."""
    config = read_config_yml(os.path.join(directory, CONFIG_FILE))
    path = latest_step_file(directory)
    values = read_step_file(path)
    backbone = AlbertBackbone.from_albert_config(config)
    word_weight = values.get(WORD_HEAD_WEIGHT)
    if backbone_only or word_weight is None or word_weight.ndim != 2:
        model = backbone
    else:
        model = PlbertPretrainer(backbone, word_vocab_size=int(word_weight.shape[0]))
    return model, load_table(model, name_table(config), values, path, hf.IGNORED), path


def _of_other_words(values: Dict[str, np.ndarray], model) -> Optional[int]:
    """The word count of a well-formed word head in `values` that is not `model`'s, else None."""
    weight, bias = values.get(WORD_HEAD_WEIGHT), values.get(WORD_HEAD_BIAS)
    hidden = model.backbone.albert_config.hidden_size
    if weight is None or bias is None or weight.ndim != 2 or weight.shape[1] != hidden:
        return None
    words = int(weight.shape[0])
    return words if bias.shape == (words,) and words != model.word_vocab_size else None


def fill_from_plbert_dir(model, directory: str, from_group0: bool = False) -> LoadReport:
    """Loads the highest step of `directory` into an existing backbone or `PlbertPretrainer` (a warm start).

    The model's config must fit the directory's tensors (`load_table` checks every shape).
    A word head of another vocabulary (continued pretraining on a new corpus, whose words
    are its own) is not loaded: it keeps its initial values, said in `fresh_heads`.
    `from_group0`: groups the directory lacks start as its group 0 (growing `num_hidden_groups`).

    Raises:
        NoHeadsError: a `PlbertPretrainer` asked to fill from an encoder-only directory.
        CheckpointError: tensors that do not fit the model, or values that cannot be trusted.
    """
    path = latest_step_file(directory)
    values = read_step_file(path)
    table = name_table(backbone_of(model).albert_config)
    if from_group0:
        values = fill_missing_groups(table, values, LAYER_GROUP, "albert_layer_groups.0.")
    if not isinstance(model, PlbertPretrainer):
        return load_table(model, table, values, path, hf.IGNORED)
    if WORD_HEAD_WEIGHT not in values:
        raise NoHeadsError(f"{path}: holds the encoder only; PL-BERT's heads cannot be filled from it")
    other_words = _of_other_words(values, model)
    if other_words is not None:  # the word head keeps what it has (all or nothing still holds for the rest)
        values = {**values, **export_table(model, [m for m in table if m.name in WORD_HEAD])}
    report = load_table(model, table, values, path, hf.IGNORED)
    if other_words is not None:
        report.fresh_heads.append(
            f"the word head starts fresh: {directory} has {other_words} words, this model {model.word_vocab_size}"
        )
    return report


def save_plbert_dir(model, directory: str, step: int = 0) -> List[str]:
    """Writes config.yml and `step_<step>.t7` of `model` into the existing `directory`; returns the file names."""
    torch = _torch()
    yaml = _yaml()
    backbone = backbone_of(model)
    config = backbone.albert_config
    heads = isinstance(model, PlbertPretrainer)
    table = [m for m in name_table(config) if heads or m.scope != MODEL]
    tensors = export_table(model if heads else backbone, table)
    net = collections.OrderedDict()
    for name, value in tensors.items():
        net[DATA_PARALLEL_PREFIX + name] = torch.from_numpy(np.ascontiguousarray(value))
        if name == WORD_EMBEDDINGS:  # the buffer HF saved (and StyleTTS 2 deletes), after the embeddings
            positions = torch.arange(config.max_position_embeddings, dtype=torch.int64)[None, :]
            net[DATA_PARALLEL_PREFIX + POSITION_IDS] = positions
    torch.save({"net": net, "step": step}, os.path.join(directory, f"step_{step}.t7"))
    with open(os.path.join(directory, CONFIG_FILE), "w", encoding="utf-8") as f:
        yaml.safe_dump(config_yml(config), f, sort_keys=False, allow_unicode=True)
    return sorted(os.listdir(directory))


# ---- the format (albert_tf.formats) -----------------------------------------------------------
class PlbertFormat(Format):
    """A PL-BERT checkpoint directory (`config.yml` + `step_<N>.t7`), as StyleTTS 2's `load_plbert` reads it."""

    name = NAME

    def claims(self, path: str) -> bool:
        return is_plbert_dir(path)

    def load(self, path, albert_config_file=None, tokenizer=None, do_lower_case=None) -> LoadedModel:
        """The model of the highest step (config.yml's config: `albert_config_file` is not used)."""
        del albert_config_file, do_lower_case
        model, report, source = read_plbert_dir(path)
        notes = [f"{source}: has no {name}: set to zeros" for name in report.zero_filled]
        return LoadedModel(model, source, tokenizer, tuple(report.zero_filled), NAME, tuple(notes), NO_TOKENIZER)

    def fill(self, model, path: str, from_group0: bool = False) -> Optional[LoadReport]:
        """Straight into a backbone or a `PlbertPretrainer`; other models go through Google's names."""
        if isinstance(model, (AlbertBackbone, PlbertPretrainer)):
            return fill_from_plbert_dir(model, path, from_group0)
        return None

    def save(self, model, directory, tokenizer=None) -> None:
        """The model as `step_0.t7` (the model holds no step count) and config.yml; no tokenizer."""
        del tokenizer
        save_plbert_dir(model, directory)

    def near_miss(self, path: str) -> Optional[str]:
        if not os.path.isdir(path):
            return None
        has_config = os.path.isfile(os.path.join(path, CONFIG_FILE))
        has_steps = bool(step_files(path))
        if has_steps and not has_config:
            return f"{path}: has step_<N>.t7 but no {CONFIG_FILE}; a PL-BERT directory needs both"
        if has_config and not has_steps:
            return f"{path}: has {CONFIG_FILE} but no step_<N>.t7; a PL-BERT directory needs both"
        return None

    def unwritten(self, model) -> List[str]:
        """The heads of a model that is neither a backbone nor a PlbertPretrainer."""
        if isinstance(model, (AlbertBackbone, PlbertPretrainer)):
            return []
        kind = type(model).__name__
        return [f"PL-BERT's checkpoint holds the encoder and PL-BERT's heads only: the {kind}'s heads are not written"]


FORMAT = PlbertFormat()
