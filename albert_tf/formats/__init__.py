"""Every model format albert_tf reads and writes, behind three calls: `detect`, `load`, `save`.

| format | what is on disk | module |
|---|---|---|
| `albert_tf` | our model directory: `albert_config.json` + `*.weights.h5` or `model.keras` + tokenizer | `native` |
| `run_dir` | a `run_pretraining` / fine-tuning output directory (its `final/`, else `best/`) | `run_dir` |
| `original` | Google's TF1 checkpoint (prefix or directory), `albert_config.json` beside it | `original` |
| `hf` | an HF transformers directory (`config.json` + `model.safetensors`) | `hf` |
| `keras_hub` | a keras-hub preset directory (`config.json` + `model.weights.h5`) | `keras_hub` |

The foreign formats go through one name-table engine (`table`), which checks
every value it loads (float, finite, plausible magnitude) whatever the format.
`load_weights` fills an existing model from any of them (warm starts, growing
`num_hidden_groups` from group 0). Training state (optimizer slots, step,
data position) is no model format: it stays with `albert_tf.pretraining.run_state`.

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
from typing import List, Optional

from albert_tf.formats import hf, keras_hub, native, original, run_dir
from albert_tf.formats.loaded import LoadedModel, ModelFileError
from albert_tf.formats.table import CheckpointError, LoadReport, NoHeadsError, backbone_of
from albert_tf.models import (  # noqa: F401  (registers the task models that a .keras file may hold)
    classifier,
    early_exit,
    multiple_choice,
    span_qa,
    span_qa_answerability,
    token_classifier,
)
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.tokenization import check_vocab_size, resolve_tokenizer

__all__ = [
    "CheckpointError",
    "LoadReport",
    "LoadedModel",
    "ModelFileError",
    "OUTPUT_FORMATS",
    "NoHeadsError",
    "backbone_of",
    "detect",
    "load",
    "load_weights",
    "model_directory",
    "save",
    "unwritten",
]

# Detection order: the peers' directories are marked by their config.json; ours by its files.
DETECTION_ORDER = (keras_hub, hf, native, run_dir, original)
WRITERS = {module.NAME: module for module in (native, original, hf, keras_hub)}
OUTPUT_FORMATS = tuple(WRITERS)
PEERS = (hf, keras_hub)


def detect(path: str) -> Optional[str]:
    """The name of the format at `path` (see the table above), or None."""
    for module in DETECTION_ORDER:
        if module.claims(path):
            return module.NAME
    return None


def _exists(path: str) -> bool:
    return os.path.exists(path) or os.path.exists(path + ".index")


def model_directory(path: str) -> str:
    """The directory whose files go with the model at `path` (vocabulary, config)."""
    if os.path.isdir(path):
        return run_dir.model_dir(path) or path
    return os.path.dirname(path)


def load(
    path: str,
    albert_config_file: Optional[str] = None,
    spm_model_file: Optional[str] = None,
    vocab_file: Optional[str] = None,
    do_lower_case: Optional[bool] = None,
) -> LoadedModel:
    """The model at `path`, whatever its format, with the tokenizer saved beside it (or the one given).

    Raises:
        ModelFileError: nothing loadable at `path`; the message lists what was expected.
        CheckpointError: weights that do not fit their config, or values that cannot be trusted.
        TokenizerError: a vocabulary that is unreadable or not the model's.
    """
    if not _exists(path):
        raise ModelFileError(f"{path}: does not exist")
    found = detect(path)
    if found is None:
        raise ModelFileError(
            f"{path}: holds no model. Expected a .keras file, a directory with {native.KERAS_MODEL_FILE}, "
            f"our model directory ({native.CONFIG_FILE} + *.weights.h5), a run_pretraining "
            "output directory (final/ or best/), a TF1 checkpoint (prefix or directory), "
            "an HF transformers directory or a keras-hub preset"
        )
    if found == run_dir.NAME:
        return load(run_dir.model_dir(path), albert_config_file, spm_model_file, vocab_file, do_lower_case)
    zero_filled = ()
    if found in (hf.NAME, keras_hub.NAME):
        peer = hf if found == hf.NAME else keras_hub
        model, report, peer_spm = peer.load(path)
        zero_filled, source = tuple(report.zero_filled), path
        if not (spm_model_file or vocab_file) and peer_spm:
            spm_model_file = peer_spm
            do_lower_case = peer.lower_case(path) if do_lower_case is None else do_lower_case
        tokenizer = resolve_tokenizer(spm_model_file, vocab_file, do_lower_case, required=False)
    else:
        if found == native.NAME:
            model, source = native.load(path, albert_config_file)
        else:
            model, source = original.load(path, albert_config_file)[0], path
        directory = path if os.path.isdir(path) else os.path.dirname(path)
        tokenizer = resolve_tokenizer(spm_model_file, vocab_file, do_lower_case, directory, required=False)
    if tokenizer is not None:
        check_vocab_size(backbone_of(model).albert_config.vocab_size, tokenizer, source)
    return LoadedModel(model, source, tokenizer, zero_filled, found)


def save(model, directory: str, format: str = native.NAME, tokenizer=None) -> List[str]:
    """Writes `model` (and its `tokenizer`) into the existing `directory` in `format`; returns the file names.

    Callers publish `directory` whole (`albert_tf.publish`); our format and the
    original's carry the tokenizer as `spm.model`/`vocab.txt` + `tokenizer.json`,
    the peers' formats as their own tokenizer files (SentencePiece only).
    """
    if format not in WRITERS:
        raise CheckpointError(f"unknown output format {format!r}; one of {', '.join(OUTPUT_FORMATS)}")
    if format == original.NAME:
        original.save(model, directory)
        if tokenizer is not None:
            tokenizer.save(directory)
    else:
        WRITERS[format].save(model, directory, tokenizer)
    return sorted(os.listdir(directory))


def unwritten(model, format: str) -> List[str]:
    """What of `model` `format` cannot hold (said by `convert_checkpoint`, never silent)."""
    return WRITERS[format].unwritten(model) if format in (hf.NAME, keras_hub.NAME) else []


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
    found = detect(path)
    backbone = backbone_of(model)
    if found in (native.NAME, run_dir.NAME) and not from_group0:
        weights_file, holds_heads = native.find_weights(run_dir.model_dir(path) or path)
        if weights_file is not None:
            return native.load_weights_file(model, weights_file, holds_heads)
    if found == original.NAME or found is None:
        source, values = original.read_original_checkpoint(path)
    else:  # read through its own config, so its groups are its own, not the model's
        loaded = load(path)
        source, values = loaded.source, original.original_variables(_encoder_of(loaded.model))
    if from_group0:
        values = original.fill_missing_groups_from_group0(backbone.albert_config, values)
    if model is not backbone and not any(name.startswith("cls/") for name in values):
        raise NoHeadsError(f"{source}: holds a backbone only; the pretraining heads cannot be filled from it")
    return original.load_original_checkpoint(model, source, values)
