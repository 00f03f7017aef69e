"""SavedModels for TF Serving: `<export_base>/<version>/` with ids and text signatures.

Signatures are `albert_tf.export.signatures`'; assets: the config, the
vocabulary (`spm.model` or `vocab.txt`) and `serving_config.json`; TF
Serving's warm-up requests in `assets.extra/`. Written aside, loaded back and
compared with the Keras model (`verify`), then moved into place: a failed
export leaves nothing behind.

Example:

>>> import tempfile
>>> import tensorflow as tf
>>> from albert_tf import AlbertBackbone
>>> backbone = AlbertBackbone.from_albert_config("configs/albert_tiny.json")
>>> path = export_saved_model(backbone, tempfile.mkdtemp(), version=1)
>>> loaded = tf.saved_model.load(path)
>>> sorted(loaded.signatures["serving_default"].structured_outputs)
['pooled_output', 'sequence_output']
"""

import os
import shutil
from typing import Optional

from albert_tf.export import early_exit, verify
from albert_tf.export.common import ExportError, check_tokenizer_fits
from albert_tf.export.precision import VERIFY_ATOL, with_precision
from albert_tf.export.warmup import write_warmup_requests
from albert_tf.formats.table import backbone_of
from albert_tf.json_records import write_json
from albert_tf.locking import OutputDirLock
from albert_tf.publish import remove_stale_staging, staged_dir
from albert_tf.tokenization import tf_tokenizer_for

SERVING_CONFIG = "serving_config.json"


def next_version(export_base: str) -> int:
    """1 + the highest numeric version directory under `export_base` (TF Serving serves the highest)."""
    versions = [int(n) for n in os.listdir(export_base) if n.isdigit()] if os.path.isdir(export_base) else []
    return max(versions, default=0) + 1


def check_new_version(export_base: str, version: int) -> None:
    """Refuses a negative version, and one that exists: TF Serving may be serving it."""
    if version < 0:
        raise ExportError(f"--version {version}: TF Serving's versions are numbers ≥ 0")
    existing = os.path.join(export_base, str(version))
    if os.path.exists(existing):
        raise ExportError(
            f"--version {version}: {existing} exists (TF Serving may be serving it); leave --version out "
            f"for the next free one ({next_version(export_base)}), or remove that directory first"
        )


def export_saved_model(
    model,
    export_base: str,
    version: Optional[int] = None,
    tokenizer=None,
    max_seq_length: int = 128,
    top_k: int = 5,
    warmup: bool = True,
    jit_compile: bool = False,
    precision: str = "float32",
) -> str:
    """Exports `model` to `export_base/<version>`; returns that path.

    Args:
        model: any albert_tf Keras model (backbone, pretrainer, task model).
        export_base: TF Serving's model base path.
        version: the version directory (default: the next free number); an existing one is refused.
        tokenizer: the model's `Tokenizer` (e.g. `formats.load(...).tokenizer`): adds the text
            signatures (its lowercasing) and the vocabulary asset. None: ids only.
        max_seq_length: the text signatures' truncation length.
        top_k: MLM candidates returned.
        warmup: write TF Serving warm-up requests.
        jit_compile: XLA-compile the model in `serving_default` (see `ServingEndpoints`).
        precision: "bfloat16" serves the same weights computing in bf16 (`albert_tf.export.precision`).

    Staging copies left by killed exports under `export_base` are removed first.

    Raises:
        ExportError: `version` exists or is negative, or the export does not reproduce the
            model; nothing is left behind.
    """
    config = backbone_of(model).albert_config
    if version is not None:
        check_new_version(export_base, version)
    if max_seq_length > config.max_position_embeddings or max_seq_length < 3:
        raise ExportError(
            f"--max_seq_length {max_seq_length}: must be in [3, max_position_embeddings="
            f"{config.max_position_embeddings}]"
        )
    if not 1 <= top_k <= config.vocab_size:
        raise ExportError(f"--top_k {top_k}: must be in [1, vocab_size={config.vocab_size}]")
    if precision != "float32" and isinstance(model, early_exit.EARLY_EXIT_MODELS):
        raise ExportError(f"--precision {precision}: early-exit models are exported in float32 only")
    model = with_precision(model, precision)
    check_tokenizer_fits(model, tokenizer)
    vocab_tokenizer = tokenizer
    with OutputDirLock(export_base):
        remove_stale_staging(export_base)
        if version is None:
            version = next_version(export_base)
        check_new_version(export_base, version)  # again, under the lock
        _write(model, export_base, version, vocab_tokenizer, max_seq_length, top_k, warmup, jit_compile, precision)
    return os.path.join(export_base, str(version))


def _write(model, export_base, version, vocab_tokenizer, max_seq_length, top_k, warmup, jit_compile, precision):
    config = backbone_of(model).albert_config
    in_graph = tf_tokenizer_for(vocab_tokenizer) if vocab_tokenizer is not None else None
    special_ids = vocab_tokenizer.special_ids if vocab_tokenizer is not None else None
    with staged_dir(os.path.join(export_base, str(version))) as staging:
        endpoints = early_exit.endpoints_class(model)(
            model, in_graph, special_ids, max_seq_length=max_seq_length, top_k=top_k, jit_compile=jit_compile
        )
        signatures = sorted(endpoints.signatures())
        shutil.rmtree(staging)  # the archive writes a new directory
        endpoints.archive().write_out(staging, verbose=False)
        # Files for clients in assets/ (the graph holds the vocabulary as constants and reads none).
        assets = os.path.join(staging, "assets")
        os.makedirs(assets, exist_ok=True)
        config.to_json_file(os.path.join(assets, "albert_config.json"))
        if vocab_tokenizer is not None:
            vocab_tokenizer.save(assets)
        write_json(
            os.path.join(assets, SERVING_CONFIG),
            {
                "model_class": type(model).__name__,
                "signatures": signatures,
                "vocab_type": vocab_tokenizer.kind if vocab_tokenizer else None,
                "do_lower_case": vocab_tokenizer.do_lower_case if vocab_tokenizer else None,
                "max_seq_length": max_seq_length,
                "top_k": top_k,
                "precision": precision,
            },
        )
        if warmup:
            write_warmup_requests(staging, model, signatures, max_seq_length)
        verify.verify_saved_model(model, staging, vocab_tokenizer, max_seq_length, VERIFY_ATOL[precision])
        early_exit.verify_saved_model(model, staging, vocab_tokenizer, max_seq_length)
