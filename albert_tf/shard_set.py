"""The pretraining data contract: what `data_prep` writes and `albert_tf.inputs` reads.

One owner for everything both sides share: feature names, dtypes and lengths
(the original's `create_pretraining_data.py`), shard file names, `metadata.json` and its format
version. No TensorFlow or Beam import here: Beam workers and the reader both
use it.

A dataset directory holds `part-SSSSS-of-NNNNN.tfrecord` shards and
`metadata.json` (written last), whose `shards` maps each shard name to its
record count and `shard_files` to its size and sha256. Readers read exactly
the listed shards, check their sizes before training, and can check every
checksum (`run_pretraining --verify_data`, or to name the culprit of a
corrupt record).

Example:

>>> sorted(feature_spec(8, 2))[:3]
['input_ids', 'input_mask', 'masked_lm_ids']
>>> shard_name(3, 10)
'part-00003-of-00010.tfrecord'
"""

import dataclasses
import fnmatch
import hashlib
import os
from typing import Dict, List, Optional, Tuple

from albert_tf.errors import AlbertError
from albert_tf.json_records import UnreadableJsonError, parse_json, read_json

FORMAT_VERSION = 1
METADATA_FILE = "metadata.json"
SHARD_PREFIX = "part-"
SHARD_SUFFIX = ".tfrecord"
SHARD_PATTERN = SHARD_PREFIX + "*" + SHARD_SUFFIX
SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids", "token_boundary")
PREDICTION_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
LABELS = ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")
# Packed rows (several instances a row, `data_prep.packing`) add one slot per instance: its [CLS]
# position (a model input) and a weight (1 for a real instance, 0 for an empty slot).
PACKED_MODEL_INPUTS = MODEL_INPUTS + ("cls_positions",)
PACKED_LABELS = LABELS + ("next_sentence_weights",)
REQUIRED_METADATA = ("format_version", "shards", "max_seq_length", "max_predictions_per_seq")
# PL-BERT phoneme data (`data_prep.plbert`, `"objective": "plbert"` in metadata.json): four sequence
# features, no masked positions (PL-BERT masks whole words at train time). `input_ids`: StyleTTS 2's
# phoneme ids (`albert_tf.tokenization.plbert_symbols`), each word's followed by the separator " ";
# `input_mask`: the instance (window) number from 1, 0 on padding; `word_ids`: the word-vocabulary id
# (`word_vocab.txt`; 0 padding, 1 [UNK], 2 [SEP] on separators); `word_positions`: the word of its row,
# from 1, 0 on separators and padding (whole-word masking picks words by it).
ALBERT, PLBERT = "albert", "plbert"
PLBERT_FEATURES = ("input_ids", "input_mask", "word_ids", "word_positions")
PLBERT_REQUIRED_METADATA = ("format_version", "shards", "max_seq_length", "word_vocab_size", "symbols")
WORD_VOCAB_FILE = "word_vocab.txt"
# The sizes a reader shapes its tensors by: whole numbers of at least 1 (a `0` or `"3"` once reached
# tf.data as a broadcasting traceback). The others only describe the data.
SIZE_FIELDS = (
    "max_seq_length",
    "max_predictions_per_seq",
    "max_instances_per_row",
    "max_predictions_per_row",
    "word_vocab_size",
    "symbols",
)
OPTIONAL_FIELDS = {
    "num_instances": int,
    "vocab_size": int,
    "vocab_sha256": str,
    "vocab_type": str,
    "task": str,
    "settings": dict,
    "counts": dict,
    "shard_files": dict,
    "features": dict,
    "input_files": list,
    "objective": str,
    "language": str,
    "word_vocab_sha256": str,
}


class DataError(AlbertError, ValueError):
    """Pretraining data that cannot be read or does not fit the model; the message names the file."""


class HashingWriter:
    """Wraps a binary stream: counts and hashes what is written (for the shard manifest)."""

    def __init__(self, stream):
        self.stream = stream
        self.digest = hashlib.sha256()
        self.bytes = 0

    def write(self, data: bytes) -> None:
        self.digest.update(data)
        self.bytes += len(data)
        self.stream.write(data)

    def manifest_entry(self) -> dict:
        return {"bytes": self.bytes, "sha256": self.digest.hexdigest()}


def file_sha256(path: str, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    if "://" in path:
        from apache_beam.io.filesystems import FileSystems  # Beam only for remote paths

        handle = FileSystems.open(path)
    else:
        handle = open(path, "rb")
    with handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def shard_name(shard: int, num_shards: int) -> str:
    return f"{SHARD_PREFIX}{shard:05d}-of-{num_shards:05d}{SHARD_SUFFIX}"


def is_shard_name(name: str) -> bool:
    return fnmatch.fnmatch(os.path.basename(name), SHARD_PATTERN)


def feature_spec(max_seq_length: int, predictions: int, max_instances_per_row: int = 1) -> Dict[str, dict]:
    """Every feature's dtype (`int64` or `float`) and length, as the original writes them.

    `predictions`: masked-position slots a row (the original: `max_predictions_per_seq`). Packed rows
    (`max_instances_per_row` > 1) add one SOP label, `next_sentence_weights` and `cls_positions` per
    instance slot; `input_mask` numbers each token's instance from 1 (0 is padding).
    """
    slots = max_instances_per_row
    spec = {name: {"dtype": "int64", "length": max_seq_length} for name in SEQUENCE_FEATURES}
    spec.update({name: {"dtype": "int64", "length": predictions} for name in PREDICTION_FEATURES})
    spec["masked_lm_weights"] = {"dtype": "float", "length": predictions}
    spec["next_sentence_labels"] = {"dtype": "int64", "length": slots}
    if slots > 1:
        spec["next_sentence_weights"] = {"dtype": "float", "length": slots}
        spec["cls_positions"] = {"dtype": "int64", "length": slots}
    return spec


def plbert_feature_spec(max_seq_length: int) -> Dict[str, dict]:
    """PL-BERT rows' features (`PLBERT_FEATURES`): int64, `max_seq_length` each.

    >>> sorted(plbert_feature_spec(8))
    ['input_ids', 'input_mask', 'word_ids', 'word_positions']
    """
    return {name: {"dtype": "int64", "length": max_seq_length} for name in PLBERT_FEATURES}


def model_inputs(packed: bool):
    """The features the pretrainer takes; the rest are labels (`labels`)."""
    return PACKED_MODEL_INPUTS if packed else MODEL_INPUTS


def labels(packed: bool):
    return PACKED_LABELS if packed else LABELS


def _read_bytes(path: str) -> bytes:
    """A gs://, hdfs://, ... file, through Beam's file systems, as data_prep wrote it."""
    from apache_beam.io.filesystems import FileSystems  # Beam only for remote paths

    with FileSystems.open(path) as f:
        return f.read()


def _json_type(value) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _field_problem(value, kind, minimum=None) -> Optional[str]:
    """Why `value` is not a JSON value of `kind` (≥ `minimum`); None when it is. A boolean is no number."""
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        wanted = {int: "a whole number", str: "a string", dict: "an object", list: "a list"}[kind]
        return f"{value!r} is {_json_type(value)}, expected {wanted}" + (
            f" of at least {minimum}" if minimum is not None else ""
        )
    if minimum is not None and value < minimum:
        return f"{value!r}, must be at least {minimum}"
    return None


def check_metadata_fields(path: str, metadata: dict) -> None:
    """Every field readers rely on has its type and a possible value; `DataError` naming the field.

    The sizes (`SIZE_FIELDS`) are whole numbers ≥ 1, `shards` maps shard names to record counts;
    an optional field may be absent (data of older versions) or null.
    """
    required = required_metadata(metadata)
    for name in SIZE_FIELDS:
        if name in metadata or name in required:
            problem = _field_problem(metadata[name], int, 1)
            if problem:
                raise DataError(f"{path}: field '{name}': {problem}")
    for name, kind in OPTIONAL_FIELDS.items():
        value = metadata.get(name)
        problem = None if value is None else _field_problem(value, kind, 0 if kind is int else None)
        if problem:
            raise DataError(f"{path}: field '{name}': {problem}")
    shards = metadata["shards"]
    problem = _field_problem(shards, dict)
    if problem:
        raise DataError(f"{path}: field 'shards': {problem}")
    for name, entry in (metadata.get("shard_files") or {}).items():
        problem = _field_problem(entry, dict)
        problem = problem or _field_problem(entry.get("bytes"), int, 0) or _field_problem(entry.get("sha256"), str)
        if problem:
            raise DataError(f"{path}: field 'shard_files': {name}: {problem}")
    for name, records in shards.items():
        if os.path.basename(name) != name or not is_shard_name(name):  # a path would read outside the data
            raise DataError(f"{path}: field 'shards': {name!r} is not a shard name ({SHARD_PATTERN})")
        problem = _field_problem(records, int, 0)
        if problem:
            raise DataError(f"{path}: field 'shards': {name}: {problem}")


def required_metadata(metadata: dict):
    """The fields a metadata.json of its objective must have (PL-BERT's has no masked positions)."""
    return PLBERT_REQUIRED_METADATA if metadata.get("objective") == PLBERT else REQUIRED_METADATA


def _join(directory: str, name: str) -> str:
    return directory.rstrip("/") + "/" + name if "://" in directory else os.path.join(directory, name)


@dataclasses.dataclass(frozen=True)
class PretrainingData:
    """One data_prep output directory: its metadata, read and checked once.

    Args:
        directory: where the shards and `metadata.json` are.
        metadata: the parsed `metadata.json`.
    """

    directory: str
    metadata: dict

    @classmethod
    def load(cls, directory: str) -> "PretrainingData":
        """Reads and checks `directory/metadata.json`.

        Raises:
            DataError: no metadata (not a finished data_prep output), not JSON,
                a format version this code does not know, or missing fields.
        """
        path = _join(directory, METADATA_FILE)
        try:
            metadata = parse_json(_read_bytes(path), path) if "://" in path else read_json(path)
        except FileNotFoundError:
            raise DataError(
                f"{path} not found: {directory} is not a finished data_prep output (metadata.json is written last)"
            ) from None
        except UnreadableJsonError as error:
            raise DataError(str(error)) from None
        except OSError as error:
            raise DataError(f"{path}: cannot be read ({error.strerror or error})") from None
        if not isinstance(metadata, dict):
            raise DataError(f"{path}: expected a JSON object, got {_json_type(metadata)}")
        if metadata.get("objective", ALBERT) not in (ALBERT, PLBERT):
            raise DataError(f"{path}: objective {metadata['objective']!r}: this albert_tf reads {ALBERT} and {PLBERT}")
        missing = [key for key in required_metadata(metadata) if key not in metadata]
        if missing:
            raise DataError(f"{path}: missing field(s) {', '.join(missing)}")
        version = metadata["format_version"]
        if version != FORMAT_VERSION:
            raise DataError(
                f"{path}: format_version {version}, but this albert_tf reads version "
                f"{FORMAT_VERSION}; recreate the data with this version's data_prep "
                "(or use the albert_tf that wrote it)"
            )
        check_metadata_fields(path, metadata)
        return cls(directory, metadata)

    @property
    def max_seq_length(self) -> int:
        return self.metadata["max_seq_length"]

    @property
    def objective(self) -> str:
        """What the rows train: `albert` (MLM + SOP; data made before PL-BERT) or `plbert` (phonemes)."""
        return self.metadata.get("objective", ALBERT)

    @property
    def word_vocab_size(self) -> Optional[int]:
        """PL-BERT data: the words of `word_vocab.txt` (with [PAD], [UNK], [SEP]); None for ALBERT data."""
        return self.metadata.get("word_vocab_size")

    @property
    def word_vocab_path(self) -> Optional[str]:
        return _join(self.directory, WORD_VOCAB_FILE) if self.objective == PLBERT else None

    def features(self) -> Dict[str, dict]:
        """Every feature's dtype and length, as the rows hold them (`feature_spec` or `plbert_feature_spec`)."""
        if self.objective == PLBERT:
            return plbert_feature_spec(self.max_seq_length)
        return feature_spec(self.max_seq_length, self.predictions_per_row, self.max_instances_per_row)

    @property
    def max_predictions_per_seq(self) -> Optional[int]:
        """Masked positions a sequence holds (PL-BERT data: None, masked while training, not in the data)."""
        return self.metadata.get("max_predictions_per_seq")

    @property
    def max_instances_per_row(self) -> int:
        """Instances a row holds at most (1: the original's layout; data made before packing: 1)."""
        return self.metadata.get("max_instances_per_row", 1)

    @property
    def predictions_per_row(self) -> int:
        """Masked-position slots a row (packed rows: `data_prep.packing.prediction_slots`); PL-BERT data: every
        position (its phoneme head reads them all)."""
        return self.metadata.get("max_predictions_per_row", self.max_predictions_per_seq) or self.max_seq_length

    @property
    def packed(self) -> bool:
        return self.max_instances_per_row > 1

    @property
    def vocab_size(self) -> Optional[int]:
        return self.metadata.get("vocab_size")

    @property
    def vocab_sha256(self) -> Optional[str]:
        return self.metadata.get("vocab_sha256")

    @property
    def do_lower_case(self) -> bool:
        return self.metadata.get("settings", {}).get("do_lower_case", True)

    @property
    def shard_names(self) -> List[str]:
        return sorted(self.metadata["shards"])

    def shard_paths(self) -> List[str]:
        return [_join(self.directory, name) for name in self.shard_names]

    @property
    def shard_files(self) -> Dict[str, dict]:
        """{shard name: {"bytes", "sha256"}}; empty for data written before the manifest existed."""
        return self.metadata.get("shard_files", {})

    def check_sizes(self, file_size) -> None:
        """Every listed shard exists with its recorded size (`file_size(path)` → bytes)."""
        for name, path in zip(self.shard_names, self.shard_paths()):
            expected = self.shard_files.get(name, {}).get("bytes")
            try:
                size = file_size(path)
            except (OSError, ValueError) as error:
                raise DataError(f"{path}: listed in {METADATA_FILE} but cannot be read ({error})") from None
            if expected is not None and size != expected:
                raise DataError(
                    f"{path}: {size} bytes, but {METADATA_FILE} records {expected} (truncated or "
                    "replaced); recreate the data or restore the file"
                )

    def corrupt_shards(self) -> List[str]:
        """Shards whose sha256 differs from the manifest's (reads every byte)."""
        return [
            path
            for name, path in zip(self.shard_names, self.shard_paths())
            if name in self.shard_files and file_sha256(path) != self.shard_files[name]["sha256"]
        ]

    def field_of(self, feature: str) -> str:
        """The metadata field that sets `feature`'s length."""
        if feature in SEQUENCE_FEATURES or feature in PLBERT_FEATURES:
            return "max_seq_length"
        if feature in PREDICTION_FEATURES:
            return (
                "max_predictions_per_row" if "max_predictions_per_row" in self.metadata else "max_predictions_per_seq"
            )
        return "max_instances_per_row"

    def check_record(self, path: str, features: Dict[str, Tuple[str, int]]) -> None:
        """A shard's record (`{feature: (dtype, length)}`, its first) has the shapes `metadata.json` says.

        Raises:
            DataError: naming the shard and the field whose value the record contradicts (a feature
                the layout lacks or has in surplus: `max_instances_per_row`, which sets the layout).
        """
        metadata = _join(self.directory, METADATA_FILE)
        spec = self.features()
        wrong = {}
        for name, (dtype, length) in features.items():
            field = self.field_of(name)
            if name in spec and spec[name]["length"] != length and field not in wrong:
                wrong[field] = f"{field} {length} (metadata.json says {self.metadata.get(field, 1)})"
            elif name in spec and spec[name]["dtype"] != dtype:
                wrong[name] = f"{name} is {dtype} (the format's is {spec[name]['dtype']})"
        missing, surplus = sorted(set(spec) - set(features)), sorted(set(features) - set(spec))
        if (missing or surplus) and "max_instances_per_row" not in wrong:
            parts = [f"lack {', '.join(missing)}"] * bool(missing) + [f"hold {', '.join(surplus)}"] * bool(surplus)
            wrong["features"] = (
                f"the records {' and '.join(parts)} (metadata.json says max_instances_per_row "
                f"{self.max_instances_per_row})"
            )
        if wrong:
            raise DataError(f"{path}: its records do not match {metadata}: " + "; ".join(wrong.values()))

    def check_fits(self, max_seq_length: int, max_predictions_per_seq: int, vocab_size: int) -> None:
        """Refuses data that does not fit the flags or the model (names both sides)."""
        problems = []
        if self.max_seq_length != max_seq_length:
            problems.append(f"sequence length {self.max_seq_length} (--max_seq_length is {max_seq_length})")
        if self.max_predictions_per_seq != max_predictions_per_seq:
            problems.append(
                f"{self.max_predictions_per_seq} masked positions per sequence "
                f"(--max_predictions_per_seq is {max_predictions_per_seq})"
            )
        if self.vocab_size is not None and self.vocab_size != vocab_size:
            problems.append(f"vocabulary of {self.vocab_size} pieces (the config's vocab_size is {vocab_size})")
        symbols = self.metadata.get("symbols")  # PL-BERT data: the phoneme table's size
        if symbols is not None and symbols != vocab_size:
            problems.append(f"{symbols} phoneme symbols (the config's vocab_size is {vocab_size})")
        if problems:
            raise DataError(f"{self.directory}: the data has " + "; ".join(problems))

    def check_vocabulary(self, sha256: str, name: str) -> None:
        """The vocabulary shipped with the model must be the one the data was made with."""
        if self.vocab_sha256 and sha256 != self.vocab_sha256:
            raise DataError(
                f"{name}: not the vocabulary {self.directory} was made with (metadata.json "
                f"vocab_sha256 {self.vocab_sha256[:12]}..., vocab_type "
                f"{self.metadata.get('vocab_type')})"
            )


def metadata_record(
    *,
    num_instances: int,
    shards: Dict[str, int],
    shard_files: Dict[str, dict],
    max_seq_length: int,
    max_predictions_per_seq: int,
    max_instances_per_row: int,
    max_predictions_per_row: int,
    vocab_size: int,
    vocab_type: str,
    vocab_sha256: str,
    task: str,
    settings: dict,
    input_files: List[str],
    counts: dict,
) -> dict:
    """The `metadata.json` that data_prep writes (the fields readers rely on come first)."""
    return {
        "format_version": FORMAT_VERSION,
        "num_instances": num_instances,
        "shards": dict(sorted(shards.items())),
        "shard_files": dict(sorted(shard_files.items())),
        "features": feature_spec(max_seq_length, max_predictions_per_row, max_instances_per_row),
        "max_seq_length": max_seq_length,
        "max_predictions_per_seq": max_predictions_per_seq,
        "max_instances_per_row": max_instances_per_row,
        "max_predictions_per_row": max_predictions_per_row,
        "vocab_size": vocab_size,
        "vocab_type": vocab_type,
        "vocab_sha256": vocab_sha256,
        "task": task,
        "settings": settings,
        "input_files": input_files,
        "counts": counts,
    }


def plbert_metadata_record(
    *,
    num_instances: int,
    shards: Dict[str, int],
    shard_files: Dict[str, dict],
    max_seq_length: int,
    max_instances_per_row: int,
    word_vocab_size: int,
    word_vocab_sha256: str,
    symbols: int,
    language: str,
    settings: dict,
    input_files: List[str],
    counts: dict,
) -> dict:
    """The `metadata.json` of PL-BERT phoneme data (`data_prep.plbert`): `objective` says so."""
    return {
        "format_version": FORMAT_VERSION,
        "objective": PLBERT,
        "num_instances": num_instances,
        "shards": dict(sorted(shards.items())),
        "shard_files": dict(sorted(shard_files.items())),
        "features": plbert_feature_spec(max_seq_length),
        "max_seq_length": max_seq_length,
        "max_instances_per_row": max_instances_per_row,
        "word_vocab_size": word_vocab_size,
        "word_vocab_sha256": word_vocab_sha256,
        "symbols": symbols,
        "language": language,
        "settings": settings,
        "input_files": input_files,
        "counts": counts,
    }
