"""`settings.json`: how an output directory was made, written by every CLI that writes one.

Like Model Garden's `params.yaml` and HF's saved training arguments: every
flag's value, the command line, the package version, and the sha256 of the
inputs the flags name (data files and directories, the vocabulary), so a run
can be reproduced and its inputs checked later. A data_prep directory is
hashed through its `metadata.json` (which holds every shard's sha256).

The record is written once the run holds the directory's lock and is
accepted (`record_settings`): a run refused by its flags, by the lock or by
what the directory holds (a resume under other settings) writes nothing, nor
does a `--dry_run`. It is replaced atomically; a rerun in the same directory (a resumed
pretraining run) records its own invocation and keeps the earlier ones in
`previous`. Only regular files are hashed (a FIFO or a link to a device is
recorded as such, not read), within a budget of files and bytes.
"""

import datetime
import glob
import hashlib
import os
import stat
import sys
from typing import Callable, Dict, Iterable, List, Optional

from absl import flags

import albert_tf
from albert_tf import tokenization
from albert_tf.cli.app import our_flags
from albert_tf.json_records import read_json, write_json
from albert_tf.locking import when_accepted
from albert_tf.run_layout import SETTINGS_FILE

# Flags that name inputs: their files are hashed (and every tokenizer kind's vocabulary flag: `input_flags`).
INPUT_FLAGS = (
    "input",
    "input_file",
    "eval_file",
    "data_dir",
    "train_file",
    "dev_file",
    "test_file",
    "predict_file",
    "albert_config_file",
    "init_checkpoint",
    "model_dir",
)
DATA_METADATA = "metadata.json"  # a data_prep directory: its shards' hashes are inside
KEPT_PREVIOUS = 20
# The hashing budget of one record: an input past it is named, not hashed (a run does not wait on its record).
MAX_HASHED_FILES = 10_000
MAX_HASHED_BYTES = 8 << 30


class _Budget:
    def __init__(self):
        self.files, self.bytes = MAX_HASHED_FILES, MAX_HASHED_BYTES


def _sha256(path: str, budget: Optional[_Budget] = None) -> str:
    """The file's sha256; a FIFO, device or socket (itself or through a link) is not read: a note instead."""
    budget = budget or _Budget()
    try:
        # O_NONBLOCK: opening a FIFO does not wait for a writer; what it is is known before any read.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        return f"not read: {error.strerror}"
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "not hashed: not a regular file"
        if budget.files <= 0 or info.st_size > budget.bytes:
            return "not hashed: over the record's hashing budget"
        budget.files -= 1
        budget.bytes -= info.st_size
        digest = hashlib.sha256()
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
                from albert_tf.formats import run_dir  # here: formats imports Keras, which the data jobs never need

                for root, dirs, names in os.walk(run_dir.model_dir(match) or match):
                    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                    yield from (os.path.join(root, n) for n in sorted(names) if not n.startswith("."))


def input_flags() -> tuple:
    """`INPUT_FLAGS` and each registered tokenizer kind's flag (--spm_model_file, --vocab_file, ...)."""
    return INPUT_FLAGS + tuple(kind.flag for kind in tokenization.kinds())


def input_hashes(values: Dict[str, object]) -> Dict[str, Dict[str, str]]:
    """{flag: {file: sha256, or why it is not hashed}} for the input flags that are set."""
    hashes, budget = {}, _Budget()
    for name in input_flags():
        if values.get(name):
            hashes[name] = {path: _sha256(path, budget) for path in _files_of(values[name])}
    return hashes


def command_name() -> str:
    """The command as typed: `albert_tf.export` for `python -m albert_tf.export` (not `__main__.py`)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:
        return spec.name.removesuffix(".__main__")
    return os.path.basename(sys.argv[0]) if sys.argv else ""


def flag_values(flag_values_: Optional[flags.FlagValues] = None) -> Dict[str, object]:
    """Every flag the program defined (absl's and TensorFlow's own excepted) with its value."""
    values = {}
    for flag in our_flags(flag_values_):
        values[flag.name] = list(flag.value) if isinstance(flag.value, tuple) else flag.value
    return dict(sorted(values.items()))


def record_settings(
    output_dir: str,
    tokenizer=None,
    flag_values_: Optional[flags.FlagValues] = None,
    *,
    tokenizer_loader: Optional[Callable[[], object]] = None,
    facts: Optional[dict] = None,
) -> None:
    """Writes `output_dir/settings.json` once this process holds the directory's lock and the run is accepted.

    Call it after the flags are checked and before the work: the run's
    library call takes the lock and accepts the run once its checks pass
    (`locking.when_accepted`), and the record is written then; a refused run
    writes none. `tokenizer` (or `tokenizer_loader()`, called then) supplies
    `vocabulary_sha256`; `facts` are what the flags do not say (the processes a run found), recorded as given.
    """

    def write() -> List[str]:
        tokenizer_ = tokenizer_loader() if tokenizer_loader else tokenizer
        return [write_settings(output_dir, tokenizer_, flag_values_, facts)]

    when_accepted(output_dir, write)


def write_settings(
    output_dir: str, tokenizer=None, flag_values_: Optional[flags.FlagValues] = None, facts: Optional[dict] = None
) -> str:
    """Writes `output_dir/settings.json` for this invocation now; returns its path (`record_settings` waits)."""
    values = flag_values(flag_values_)
    record = {
        "command": command_name(),
        "argv": sys.argv[1:],
        "albert_tf_version": albert_tf.__version__,
        "written_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "flags": values,
        "input_sha256": input_hashes(values),
        "vocabulary_sha256": tokenizer.model_sha256 if tokenizer is not None else None,
        **(facts or {}),
    }
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, SETTINGS_FILE)
    if os.path.isfile(path):
        try:
            earlier = read_json(path)
            previous = earlier.pop("previous", [])
            record["previous"] = (previous + [earlier])[-KEPT_PREVIOUS:]
        except (OSError, ValueError, AttributeError):
            pass  # an unreadable record is replaced, not a reason to stop the run
    write_json(path, record, default=str)
    return path
