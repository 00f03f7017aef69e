"""Every model format albert_tf reads and writes, behind four calls: `detect`, `load`, `save`, `load_weights`.

| format | what is on disk | module |
|---|---|---|
| `albert_tf` | our model directory: `albert_config.json` + `*.weights.h5` or `model.keras` + tokenizer | `native` |
| `original` | Google's TF1 checkpoint (prefix or directory), `albert_config.json` beside it | `original` |
| `hf` | an HF transformers directory (`config.json` + `model.safetensors`) | `hf` |
| `keras_hub` | a keras-hub preset directory (`config.json` + `model.weights.h5`) | `keras_hub` |
| `plbert` | a PL-BERT checkpoint directory (`config.yml` + `step_<N>.t7`), as StyleTTS 2 loads it | `plbert` |

Each is a `base.Format` registered below; these calls loop over the
registered formats and never name one. A `run_pretraining` / fine-tuning
output directory is read as the model it published (its `final/`, else
`best/`: `run_dir.resolve`). The foreign formats go through one name-table
engine (`table`), which checks every value it loads (float, finite,
plausible magnitude) whatever the format. `load_weights` fills an existing
model from any of them (warm starts, growing `num_hidden_groups` from group
0). Training state (optimizer slots, step, data position) is no model
format: it stays with `albert_tf.pretraining.run_state`.

A new format is one module with a `base.Format` subclass and one
`register(...)` line here (tests/test_interop.py registers a toy one).

Example:

>>> import tempfile
>>> from albert_tf import AlbertBackbone
>>> directory = tempfile.mkdtemp()
>>> _ = save(AlbertBackbone.from_albert_config("configs/albert_tiny.json"), directory)
>>> detect(directory)
'albert_tf'
>>> loaded = load(directory)
>>> type(loaded.model).__name__, loaded.tokenizer is None
('AlbertBackbone', True)
"""

import os
from typing import Dict, List, Optional, Tuple

from albert_tf.formats import hf, keras_hub, native, original, plbert, run_dir
from albert_tf.formats.base import Format
from albert_tf.formats.loaded import LoadedModel, ModelFileError
from albert_tf.formats.table import CheckpointError, LoadReport, NoHeadsError, backbone_of
from albert_tf.models import (  # noqa: F401  (registers the task models that a .keras file may hold)
    classifier,
    early_exit,
    multiple_choice,
    span_qa,
    span_qa_answerability,
    token_classifier,
)  # (albert_tf.formats.plbert imports and registers PlbertPretrainer)
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.tokenization import Tokenizer, check_vocab_size

__all__ = [
    "CheckpointError",
    "Format",
    "LoadReport",
    "LoadedModel",
    "ModelFileError",
    "NoHeadsError",
    "backbone_of",
    "detect",
    "load",
    "load_weights",
    "model_directory",
    "names",
    "register",
    "save",
    "unwritten",
]

REGISTRY: Dict[str, Format] = {}  # name -> format, in detection order


def register(format: Format) -> Format:
    """Adds `format` to what `detect`, `load`, `save` and `--output_format` know; returns it."""
    if not format.name or format.name in REGISTRY:
        raise ValueError(f"format name {format.name!r} is empty or taken")
    REGISTRY[format.name] = format
    return format


# Detection order: the peers' directories are marked by their config.json; ours by its files.
register(keras_hub.FORMAT)
register(hf.FORMAT)
register(native.FORMAT)
register(original.FORMAT)
register(plbert.FORMAT)


def names() -> Tuple[str, ...]:
    """Every registered format's name (what `--output_format` takes)."""
    return tuple(REGISTRY)


def _format_at(path: str) -> Optional[Format]:
    return next((format for format in REGISTRY.values() if format.claims(path)), None)


def detect(path: str) -> Optional[str]:
    """The name of the format at `path` (a run directory: the model it published), or None."""
    format = _format_at(run_dir.resolve(path))
    return None if format is None else format.name


def _near_miss(path: str) -> Optional[str]:
    """Why `path`, which looks like one format's, is none (a missing file), or None."""
    near_misses = (candidate.near_miss(path) for candidate in REGISTRY.values())
    return next((problem for problem in near_misses if problem), None)


def _exists(path: str) -> bool:
    return os.path.exists(path) or os.path.exists(path + ".index")


def model_directory(path: str) -> str:
    """The directory whose files go with the model at `path` (vocabulary, config)."""
    if os.path.isdir(path):
        return run_dir.resolve(path)
    return os.path.dirname(path)


def load(
    path: str,
    albert_config_file: Optional[str] = None,
    tokenizer: Optional[Tokenizer] = None,
    do_lower_case: Optional[bool] = None,
) -> LoadedModel:
    """The model at `path`, whatever its format, with the tokenizer saved beside it (or `tokenizer`).

    `do_lower_case` overrides the saved tokenizer's setting (a given `tokenizer` keeps its own).

    `notes` says what the user should know: tensors set to zeros, no vocabulary,
    a vocabulary nothing proves is the model's.

    Raises:
        ModelFileError: nothing loadable at `path`; the message lists what was expected.
        CheckpointError: weights that do not fit their config, or values that cannot be trusted.
        TokenizerError: a vocabulary that is unreadable or not the model's.
    """
    if not _exists(path):
        raise ModelFileError(f"{path}: does not exist")
    path = run_dir.resolve(path)
    format = _format_at(path)
    if format is None:
        near_miss = _near_miss(path)
        if near_miss:
            raise ModelFileError(f"{near_miss}; so {path} holds no model")
        raise ModelFileError(
            f"{path}: holds no model. Expected a .keras file, a directory with {native.KERAS_MODEL_FILE}, "
            f"our model directory ({native.CONFIG_FILE} + *.weights.h5), a run_pretraining "
            "output directory (final/ or best/), a TF1 checkpoint (prefix or directory), "
            "an HF transformers directory, a keras-hub preset or a PL-BERT directory (config.yml + step_<N>.t7)"
        )
    loaded = format.load(path, albert_config_file, tokenizer, do_lower_case)
    if loaded.tokenizer is None:
        hint = f" ({loaded.no_tokenizer_hint})" if loaded.no_tokenizer_hint else ""
        loaded.notes += (f"{path}: holds no vocabulary; the model comes without a tokenizer{hint}",)
    check_vocab_size(loaded.config.vocab_size, loaded.tokenizer, loaded.source)
    return loaded


def save(model, directory: str, format: str = native.NAME, tokenizer=None) -> List[str]:
    """Writes `model` (and its `tokenizer`) into the existing `directory` in `format`; returns the file names.

    Callers publish `directory` whole (`albert_tf.publish`); our format and the
    original's carry the tokenizer as `spm.model`/`vocab.txt` + `tokenizer.json`,
    the peers' formats as their own tokenizer files (SentencePiece only).
    """
    _registered(format).save(model, directory, tokenizer)
    return sorted(os.listdir(directory))


def unwritten(model, format: str) -> List[str]:
    """What of `model` `format` cannot hold (said by `convert_checkpoint`, never silent)."""
    return _registered(format).unwritten(model)


def _registered(name: str) -> Format:
    if name not in REGISTRY:
        raise CheckpointError(f"unknown output format {name!r}; one of {', '.join(names())}")
    return REGISTRY[name]


def _encoder_of(model):
    """The backbone or pretrainer inside any model of ours (Google's layout has no task heads)."""
    return model if isinstance(model, (AlbertBackbone, AlbertPretrainer)) else model.backbone


def load_weights(model, path: str, from_group0: bool = False) -> LoadReport:
    """Fills a backbone or pretrainer from the model at `path`, in any format; all or nothing.

    Google's TF1 checkpoints are read by variable name (no config needed beside
    them); every other format is loaded and its weights carried over through
    the original's name table. A pretrainer's weights fill a bare backbone (the
    heads are skipped); an encoder alone cannot fill a pretrainer (`NoHeadsError`).
    `from_group0`: the original's `--init_from_group0`: every group the source
    lacks starts as its group 0 (the paper's way to grow `num_hidden_groups`).
    """
    if not _exists(path):
        raise CheckpointError(f"{path}: checkpoint does not exist")
    path = run_dir.resolve(path)
    format = _format_at(path)
    backbone = backbone_of(model)
    if format is None:  # a format's directory missing a file says so; otherwise the TF1 reader says what is missing
        near_miss = _near_miss(path)
        if near_miss:
            raise CheckpointError(near_miss)
        source, values = original.read_original_checkpoint(path)
    else:
        report = format.fill(model, path, from_group0)
        if report is not None:
            return report
        variables = format.tf1_variables(path)
        if variables is None:  # read through its own config, so its groups are its own, not the model's
            loaded = load(path)
            variables = loaded.source, original.original_variables(_encoder_of(loaded.model))
        source, values = variables
    if from_group0:
        values = original.fill_missing_groups_from_group0(backbone.albert_config, values)
    if model is not backbone and not any(name.startswith("cls/") for name in values):
        raise NoHeadsError(f"{source}: holds a backbone only; the pretraining heads cannot be filled from it")
    return original.load_original_checkpoint(model, source, values)
