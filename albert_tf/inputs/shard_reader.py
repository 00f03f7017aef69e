"""tf.data reader of the pretraining TFRecords that `data_prep.create_pretraining_data` writes.

The format (features, lengths, shard names, `metadata.json`) is owned by
`albert_tf.shard_set`; this module turns it into batches.

Example:

>>> spec = feature_description(8, 2)
>>> sorted(spec)[:3]
['input_ids', 'input_mask', 'masked_lm_ids']
"""

import dataclasses
import os
from typing import Callable, Dict, List, Optional

import tensorflow as tf

from albert_tf.shard_set import (
    SHARD_PATTERN,
    DataError,
    PretrainingData,
    feature_spec,
    is_shard_name,
    labels,
    model_inputs,
)

_DTYPES = {"int64": tf.int64, "float": tf.float32}


@dataclasses.dataclass(frozen=True)
class PretrainingInput:
    """The shard files a run reads and the contract they follow (checked to agree across directories)."""

    data: PretrainingData
    files: List[str]


def feature_description(
    max_seq_length: int, predictions: int, max_instances_per_row: int = 1
) -> Dict[str, tf.io.FixedLenFeature]:
    """`tf.io.parse_example` spec of the original features (and of packed rows')."""
    return {
        name: tf.io.FixedLenFeature([f["length"]], _DTYPES[f["dtype"]])
        for name, f in feature_spec(max_seq_length, predictions, max_instances_per_row).items()
    }


def data_feature_description(data: PretrainingData) -> Dict[str, tf.io.FixedLenFeature]:
    """`tf.io.parse_example` spec of a data directory's rows, whatever its objective (ALBERT's or PL-BERT's)."""
    return {name: tf.io.FixedLenFeature([f["length"]], _DTYPES[f["dtype"]]) for name, f in data.features().items()}


def decode_batch(serialized: tf.Tensor, spec: Dict[str, tf.io.FixedLenFeature]) -> Dict[str, tf.Tensor]:
    """Parses a batch of Examples; int64 becomes int32 as the original's input_fn."""
    features = tf.io.parse_example(serialized, spec)
    return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in features.items()}


def resolve_input(patterns: str, flag: str = "--input_file") -> PretrainingInput:
    """Comma-separated data_prep directories, globs or shard files → the listed shards.

    Only shards that the directory's `metadata.json` lists are read: a glob
    such as `data/*` also matches `metadata.json` and staging leftovers, which
    are ignored.

    Raises:
        DataError: a pattern that matches nothing, a directory without
            metadata.json, directories that disagree, or no shard at all.
    """
    datasets: Dict[str, PretrainingData] = {}
    files: List[str] = []
    for pattern in [p.strip() for p in patterns.split(",") if p.strip()]:
        if tf.io.gfile.isdir(pattern):
            data = datasets.setdefault(pattern, PretrainingData.load(pattern))
            files.extend(data.shard_paths())
            continue
        matched = sorted(f for f in tf.io.gfile.glob(pattern) if is_shard_name(f))
        if not matched:
            raise DataError(f"{flag} pattern {pattern!r} matches no file (data_prep's shards are {SHARD_PATTERN})")
        for path in matched:
            directory = os.path.dirname(path)
            data = datasets.setdefault(directory, PretrainingData.load(directory))
            if os.path.basename(path) in data.metadata["shards"]:
                files.append(path)
    if not files:
        raise DataError(f"{flag} {patterns!r}: no shard listed in the metadata.json of the matched directories")
    first, *others = datasets.values()
    for other in others:
        if other.objective != first.objective:
            raise DataError(
                f"{other.directory} and {first.directory}: {other.objective} and {first.objective} data in one run"
            )
        if other.max_instances_per_row != first.max_instances_per_row:
            raise DataError(
                f"{other.directory} and {first.directory}: {packing(other)} and {packing(first)} in one run; "
                "make both with the same create_pretraining_data --max_instances_per_row"
            )
        for key in ("max_seq_length", "max_predictions_per_seq", "vocab_size", "vocab_sha256", "word_vocab_sha256"):
            if other.metadata.get(key) != first.metadata.get(key):
                raise DataError(f"{other.directory} and {first.directory} differ in {key}")
    for data in datasets.values():
        data.check_sizes(lambda path: tf.io.gfile.stat(path).length)
    if all(tf.io.gfile.stat(f).length == 0 for f in files):
        raise DataError(f"every input file is empty: {', '.join(files[:3])}")
    source = PretrainingInput(first, sorted(dict.fromkeys(files)))
    _check_record_lengths(source)
    return source


def packing(data: PretrainingData) -> str:
    """How the data's rows are laid out, in words."""
    if not data.packed:
        return "one instance a row"
    return f"packed rows (up to {data.max_instances_per_row} instances)"


def check_same_layout(train: PretrainingInput, evaluation: PretrainingInput) -> None:
    """One model reads one row layout: packed training data needs packed eval data, and the other way."""
    if train.data.packed != evaluation.data.packed:
        raise DataError(
            f"{evaluation.data.directory} (--eval_file) holds {packing(evaluation.data)} but "
            f"{train.data.directory} (--input_file) holds {packing(train.data)}; make both with the same "
            "create_pretraining_data --max_instances_per_row"
        )


def _check_record_lengths(source: PretrainingInput) -> None:
    """The first record has the shapes of the metadata (an edited metadata.json fails here, not at step 0)."""
    for path in source.files:
        for record in tf.data.TFRecordDataset(path).take(1):
            found = {}
            for name, feature in tf.train.Example.FromString(record.numpy()).features.feature.items():
                kind = feature.WhichOneof("kind")
                dtype = {"int64_list": "int64", "float_list": "float"}.get(kind, kind)
                found[name] = (dtype, len(getattr(feature, kind).value) if kind else 0)
            source.data.check_record(path, found)
            return


def find_corrupt_shard(source: PretrainingInput) -> str:
    """Names the shard(s) behind a DataLossError: by checksum when recorded, else by reading each."""
    corrupt = source.data.corrupt_shards() if source.data.shard_files else []
    if not corrupt:
        for path in source.files:
            try:
                for _ in tf.data.TFRecordDataset(path):
                    pass
            except tf.errors.DataLossError:
                corrupt.append(path)
    return ", ".join(corrupt) or "one of " + ", ".join(source.files[:3])


def pretraining_dataset(
    source: PretrainingInput,
    batch_size: int,
    is_training: bool = True,
    seed: int = 12345,
    input_context: Optional[tf.distribute.InputContext] = None,
    shuffle_buffer: int = 100,
    skip_batches: int = 0,
    make_batches: Optional[Callable] = None,
) -> tf.data.Dataset:
    """Batches of (model inputs, labels) from pretraining TFRecords.

    As the original input_fn for training: file order shuffled, repeated,
    interleaved over up to 4 files, shuffled, batched with drop_remainder;
    int64 cast to int32. Deterministic for a seed (so an interrupted run
    resumes onto the same batches). Under tf.distribute each input pipeline
    reads its own share of the files (of the records if files are fewer).

    Args:
        source: the shard files and their contract (from `resolve_input`).
        batch_size: examples per batch of this input pipeline.
        is_training: shuffle and repeat; else read in order, repeated.
        seed: shuffling seed.
        input_context: from `distribute_datasets_from_function`.
        shuffle_buffer: examples in the shuffle buffer.
        skip_batches: batches to skip (undecoded), to resume where a run stopped.
        make_batches: `(records, batch_size, skip_batches) → batches of (inputs, labels)` (the run's
            objective's, `pretraining.objectives`); default: ALBERT's rows (`albert_batches`).
    """
    files = source.files
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(files))
    pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    by_file = pipelines > 1 and len(files) >= pipelines
    if by_file:
        dataset = dataset.shard(pipelines, pipeline_id)
    # This pipeline's own files: a cycle longer than their number would read one file several times at
    # once (a worker with 1 of 3 files would see every record 3 times in a row).
    own_files = len(files[pipeline_id::pipelines]) if by_file else len(files)
    if is_training:
        dataset = dataset.shuffle(own_files, seed=seed).repeat()
        dataset = dataset.interleave(
            tf.data.TFRecordDataset,
            cycle_length=min(4, own_files),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
    else:
        dataset = tf.data.TFRecordDataset(dataset).repeat()
    if pipelines > 1 and not by_file:
        dataset = dataset.shard(pipelines, pipeline_id)
    if is_training:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed)
    make_batches = make_batches or (lambda records, size, skip: albert_batches(records, source.data, size, skip))
    return make_batches(dataset, batch_size, skip_batches).prefetch(tf.data.AUTOTUNE)


def albert_batches(records: tf.data.Dataset, data: PretrainingData, batch_size: int, skip_batches: int = 0):
    """Serialized ALBERT rows → batches of (model inputs, labels); `skip_batches` skipped undecoded."""
    spec = feature_description(data.max_seq_length, data.predictions_per_row, data.max_instances_per_row)
    dataset = records.batch(batch_size, drop_remainder=True)
    if skip_batches:
        dataset = dataset.skip(skip_batches)
    return dataset.map(
        lambda batch: _to_inputs_and_labels(decode_batch(batch, spec), data.packed),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )


def _to_inputs_and_labels(features, packed: bool):
    return {k: features[k] for k in model_inputs(packed)}, {k: features[k] for k in labels(packed)}
