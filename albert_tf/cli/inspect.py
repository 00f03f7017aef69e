"""`python -m albert_tf.inspect PATH`: what a model, run, .tflite file or pretraining data directory holds.

    python -m albert_tf.inspect runs/sst2            # a fine-tuning run: its best/ model, labels, flags
    python -m albert_tf.inspect exports/tflite/albert_float32.tflite
    python -m albert_tf.inspect data/pretrain        # create_pretraining_data's output

Prints one JSON object: the format and class of the model, its config's sizes and parameter
count, its class names (a classifier fine-tuned with them), its tokenizer, and, for a run
directory, the command and flags that made it (its `settings.json`). Nothing is written.
"""

import dataclasses
import json
import os
import stat
from typing import Optional

from albert_tf.cli.app import run_cli
from albert_tf.cli.flags import define_option_flags, settings_from_flags
from albert_tf.errors import AlbertError
from albert_tf.json_records import read_json
from albert_tf.options import option
from albert_tf.run_layout import MODEL_SUBDIRS, SETTINGS_FILE

CONFIG_FIELDS = (
    "vocab_size",
    "embedding_size",
    "hidden_size",
    "num_hidden_layers",
    "num_hidden_groups",
    "inner_group_num",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "max_position_embeddings",
)


class InspectError(AlbertError, ValueError):
    """A path that holds nothing this command can describe."""


@dataclasses.dataclass(frozen=True)
class InspectSettings:
    """What `python -m albert_tf.inspect PATH` is asked besides the path (its flags of the same names)."""

    weights: bool = option(True, "Load the model to count its parameters (--noweights: config and files only).")


def define_flags():
    define_option_flags(InspectSettings)


def describe(path: str, load_weights: bool = True) -> dict:
    """What `path` holds, as `python -m albert_tf.inspect` prints it."""
    if not os.path.exists(path):
        raise InspectError(f"{path}: no such file or directory")
    if not (os.path.isfile(path) or os.path.isdir(path)):  # a FIFO would block the first read
        raise InspectError(f"{path}: {_kind(path)}, not a model, run, .tflite file or data directory")
    from albert_tf.shard_set import METADATA_FILE
    from albert_tf.tflite_file import is_tflite_path

    if is_tflite_path(path):
        return _tflite(path)
    directory = os.path.dirname(path) if os.path.basename(path) == METADATA_FILE else path  # its data directory
    metadata = os.path.join(directory, METADATA_FILE)
    # data_prep's metadata.json carries our format_version; a keras-hub preset's has fields of its own
    if os.path.isfile(metadata) and "format_version" in _object_or_empty(read_json(metadata)):
        return _data(directory)
    from albert_tf import formats  # Keras loads here: a data directory is described without it

    if formats.detect(path) is None and os.path.isfile(metadata):
        raise InspectError(
            f"{path}: not ours: {metadata} has no format_version (not data_prep's) and no registered model "
            f"format ({', '.join(formats.names())}) claims the directory"
        )
    return _model(path, load_weights)


def _object_or_empty(value) -> dict:
    return value if isinstance(value, dict) else {}


def _kind(path: str) -> str:
    mode = os.stat(path).st_mode
    kinds = (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file or directory")


def _model(path: str, load_weights: bool) -> dict:
    from albert_tf import formats
    from albert_tf.models.task_base import label_names

    loaded = formats.load(path)
    config = loaded.config
    found = {
        "path": path,
        "format": loaded.format,
        "model": loaded.source,
        "model_class": type(loaded.model).__name__,
        "config": {name: getattr(config, name) for name in CONFIG_FIELDS},
        "parameters": loaded.model.count_params() if load_weights else None,
        "labels": list(label_names(loaded.model) or ()) or None,
        "tokenizer": _tokenizer(loaded.tokenizer),
        "notes": list(loaded.notes),
    }
    run = _run_record(path)
    if run is not None:
        found["run"] = run
    return found


def _tflite(path: str) -> dict:
    from albert_tf.tflite_file import TFLiteRunner
    from albert_tf.tokenization import load_tokenizer_dir

    runner = TFLiteRunner(path)
    config = runner.config
    return {
        "path": path,
        "format": "tflite",
        "max_seq_length": runner.max_seq_length,
        "labels": list(runner.labels) if runner.labels else None,
        "inputs": {name: list(shape) for name, shape in runner.input_shapes.items()},
        "outputs": runner.output_names,
        "config": {name: getattr(config, name) for name in CONFIG_FIELDS},
        "tokenizer": _tokenizer(load_tokenizer_dir(os.path.dirname(os.path.abspath(path)))),
        "file_bytes": os.path.getsize(path),
    }


def _data(path: str) -> dict:
    from albert_tf.shard_set import PLBERT, PretrainingData

    data = PretrainingData.load(path)  # every field checked: a wrong one is one line naming it
    metadata = data.metadata
    if data.objective == PLBERT:
        return _plbert_data(path, data)
    keys = ("task", "num_instances", "max_seq_length", "max_instances_per_row", "vocab_type", "vocab_size")
    found = {"path": path, "format": "pretraining data", **{k: metadata.get(k) for k in keys}}
    found["max_instances_per_row"] = data.max_instances_per_row  # 1 for data made before packing
    found["shards"] = len(data.shard_names)
    counts = metadata.get("counts") or {}
    found["counts"] = {k: counts[k] for k in ("documents", "tokens", "instances") if k in counts}
    run = _run_record(path)
    if run is not None:
        found["run"] = run
    return found


def _plbert_data(path: str, data) -> dict:
    """PL-BERT phoneme data: its language, symbol table, word vocabulary and counts."""
    metadata = data.metadata
    keys = ("objective", "language", "num_instances", "max_seq_length", "symbols", "word_vocab_size")
    found = {"path": path, "format": "pretraining data", **{k: metadata.get(k) for k in keys}}
    found["word_vocab_file"] = data.word_vocab_path
    found["max_instances_per_row"] = data.max_instances_per_row
    found["shards"] = len(data.shard_names)
    counts = metadata.get("counts") or {}
    names = ("documents", "words", "phonemes", "unknown_words", "empty_words", "unknown_symbols")
    found["counts"] = {k: counts[k] for k in names if k in counts}
    found["counts"]["rows"] = (counts.get("packing") or {}).get("rows")
    found["settings"] = metadata.get("settings")
    run = _run_record(path)
    if run is not None:
        found["run"] = {k: v for k, v in run.items() if k != "flags"}  # the other objective's flags would mislead
    return found


def _tokenizer(tokenizer) -> Optional[dict]:
    return tokenizer.metadata() | {"file": tokenizer.model_file} if tokenizer is not None else None


def _run_record(path: str) -> Optional[dict]:
    """The `settings.json` of the run `path` is (or whose `best/`/`final/` it is): its command and flags."""
    directory = os.path.abspath(path if os.path.isdir(path) else os.path.dirname(path))
    for candidate in (directory, os.path.dirname(directory)):
        settings = os.path.join(candidate, SETTINGS_FILE)
        if candidate != directory and os.path.basename(directory) not in MODEL_SUBDIRS:
            continue
        if os.path.isfile(settings):
            try:
                record = read_json(settings)
            except (OSError, ValueError) as error:
                return {"settings": settings, "unreadable": str(error)}
            if isinstance(record, dict):
                return {"settings": settings, "command": record.get("command"), "flags": record.get("flags")}
    return None


def main(argv):
    if len(argv) != 2:
        raise InspectError("give one path: python -m albert_tf.inspect PATH (a model, run, .tflite file or data dir)")
    settings = settings_from_flags(InspectSettings)
    print(json.dumps(describe(argv[1], settings.weights), indent=2, ensure_ascii=False))


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    run_cli(main, define_flags)


if __name__ == "__main__":
    cli()
