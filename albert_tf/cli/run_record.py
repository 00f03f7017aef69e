"""`settings.json`: how an output directory was made, written by every CLI that writes one.

Like Model Garden's `params.yaml` and HF's saved training arguments: every
flag's value, the command line, the package version, and the sha256 of the
inputs the flags name (data files and directories, the vocabulary), so a run
can be reproduced and its inputs checked later. A data_prep directory is
hashed through its `metadata.json` (which holds every shard's sha256).

The record is replaced atomically; a rerun in the same directory (a resumed
pretraining run) records its own invocation and keeps the earlier ones in
`previous`.
"""

import datetime
import glob
import hashlib
import json
import os
import sys
from typing import Dict, Iterable, Optional

from absl import flags

import albert_tf
from albert_tf.cli.app import our_flags
from albert_tf.formats import run_dir
from albert_tf.publish import staged_file
from albert_tf.run_layout import SETTINGS_FILE

# Flags that name inputs: their files are hashed.
INPUT_FLAGS = (
    "input",
    "input_file",
    "eval_file",
    "data_dir",
    "train_file",
    "predict_file",
    "albert_config_file",
    "init_checkpoint",
    "model_dir",
    "spm_model_file",
    "vocab_file",
)
DATA_METADATA = "metadata.json"  # a data_prep directory: its shards' hashes are inside
KEPT_PREVIOUS = 20


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _files_of(value: str) -> Iterable[str]:
    """The files a flag value names: comma-separated paths, globs, TF1 prefixes, directories."""
    for piece in filter(None, (p.strip() for p in str(value).split(","))):
        matches = sorted(glob.glob(piece)) or sorted(glob.glob(piece + ".*"))
        for match in matches:
            if os.path.isfile(match):
                yield match
            elif os.path.isfile(os.path.join(match, DATA_METADATA)):
                yield os.path.join(match, DATA_METADATA)
            elif os.path.isdir(match):  # a run directory: the model it published, not its training state
                for root, dirs, names in os.walk(run_dir.model_dir(match) or match):
                    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                    yield from (os.path.join(root, n) for n in sorted(names) if not n.startswith("."))


def input_hashes(values: Dict[str, object]) -> Dict[str, Dict[str, str]]:
    """{flag: {file: sha256}} for the input flags that are set."""
    hashes = {}
    for name in INPUT_FLAGS:
        if values.get(name):
            hashes[name] = {path: _sha256(path) for path in _files_of(values[name])}
    return hashes


def flag_values(flag_values_: Optional[flags.FlagValues] = None) -> Dict[str, object]:
    """Every flag the program defined (absl's and TensorFlow's own excepted) with its value."""
    values = {}
    for flag in our_flags(flag_values_):
        values[flag.name] = list(flag.value) if isinstance(flag.value, tuple) else flag.value
    return dict(sorted(values.items()))


def write_settings(output_dir: str, tokenizer=None, flag_values_: Optional[flags.FlagValues] = None) -> str:
    """Writes `output_dir/settings.json` for this invocation; returns its path."""
    values = flag_values(flag_values_)
    record = {
        "command": os.path.basename(sys.argv[0]) if sys.argv else "",
        "argv": sys.argv[1:],
        "albert_tf_version": albert_tf.__version__,
        "written_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "flags": values,
        "input_sha256": input_hashes(values),
        "vocabulary_sha256": tokenizer.model_sha256 if tokenizer is not None else None,
    }
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, SETTINGS_FILE)
    if os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as f:
                earlier = json.load(f)
            previous = earlier.pop("previous", [])
            record["previous"] = (previous + [earlier])[-KEPT_PREVIOUS:]
        except (OSError, ValueError, AttributeError):
            pass  # an unreadable record is replaced, not a reason to stop the run
    with staged_file(path) as staged, open(staged, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2, default=str)
    return path
