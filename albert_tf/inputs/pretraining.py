"""Reads the pretraining TFRecords that `data_prep.create_pretraining_data` writes.

`metadata.json` beside the shards describes them (feature lengths, vocabulary,
counts); the training CLI checks it against the model before it starts.

Example:

>>> spec = feature_description({"max_seq_length": 8, "max_predictions_per_seq": 2})
>>> sorted(spec)[:3]
['input_ids', 'input_mask', 'masked_lm_ids']
"""

import json
import os
from typing import Dict, List, Optional

import tensorflow as tf

METADATA_FILE = "metadata.json"
SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids", "token_boundary")
PREDICTION_FEATURES = ("masked_lm_positions", "masked_lm_ids")


class DataError(ValueError):
    """Pretraining data that cannot be read or does not fit the model."""


def load_metadata(path: str) -> dict:
    """`metadata.json` of a dataset directory (or the file itself).

    Raises:
        DataError: no metadata (not a data_prep output, or a run that did not finish).
    """
    file = path if path.endswith(".json") else os.path.join(path, METADATA_FILE)
    if not tf.io.gfile.exists(file):
        raise DataError(f"{file} not found: {path} is not a finished data_prep output "
                        "(metadata.json is written last)")
    with tf.io.gfile.GFile(file) as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as error:
            raise DataError(f"{file}: line {error.lineno}: not JSON ({error.msg})") from None


def feature_description(metadata: dict) -> Dict[str, tf.io.FixedLenFeature]:
    """`tf.io.parse_example` spec of the original features (all int64 but the weights)."""
    seq, pred = metadata["max_seq_length"], metadata["max_predictions_per_seq"]
    spec = {name: tf.io.FixedLenFeature([seq], tf.int64) for name in SEQUENCE_FEATURES}
    spec.update({name: tf.io.FixedLenFeature([pred], tf.int64) for name in PREDICTION_FEATURES})
    spec["masked_lm_weights"] = tf.io.FixedLenFeature([pred], tf.float32)
    spec["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)
    return spec


def decode_batch(serialized: tf.Tensor, spec: Dict[str, tf.io.FixedLenFeature]) -> Dict[str, tf.Tensor]:
    """Parses a batch of Examples; int64 becomes int32 as the original's input_fn."""
    features = tf.io.parse_example(serialized, spec)
    return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in features.items()}


def shard_files(data_dir: str, metadata: Optional[dict] = None) -> List[str]:
    metadata = metadata or load_metadata(data_dir)
    return [os.path.join(data_dir, name) for name in metadata["shards"]]


MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")


def expand_patterns(patterns: str) -> List[str]:
    """Comma-separated TFRecord files/globs → sorted files.

    Raises:
        DataError: a pattern that matches nothing, or no file at all.
    """
    files = []
    for pattern in [p.strip() for p in patterns.split(",") if p.strip()]:
        if tf.io.gfile.isdir(pattern):  # a data_prep output directory
            matched = sorted(tf.io.gfile.glob(os.path.join(pattern, "part-*.tfrecord")))
        else:
            matched = sorted(f for f in tf.io.gfile.glob(pattern) if not tf.io.gfile.isdir(f))
        if not matched:
            raise DataError(f"--input_file pattern {pattern!r} matches no file")
        files.extend(matched)
    if not files:
        raise DataError("--input_file is empty")
    empty = [f for f in files if tf.io.gfile.stat(f).length == 0]
    if len(empty) == len(files):
        raise DataError(f"every input file is empty: {', '.join(files[:3])}")
    return files


def pretraining_dataset(files: List[str], metadata: dict, batch_size: int, is_training: bool = True,
                        seed: int = 12345, input_context: Optional[tf.distribute.InputContext] = None,
                        shuffle_buffer: int = 100, skip_batches: int = 0) -> tf.data.Dataset:
    """Batches of (model inputs, labels) from pretraining TFRecords.

    As the original input_fn for training: file order shuffled, repeated,
    interleaved over up to 4 files, shuffled, batched with drop_remainder;
    int64 cast to int32. Deterministic for a seed (so an interrupted run
    resumes onto the same batches). Under tf.distribute each input pipeline
    reads its own share of the files (of the records if files are fewer).

    Args:
        files: TFRecord files.
        metadata: the dataset's metadata (feature lengths).
        batch_size: examples per batch of this input pipeline.
        is_training: shuffle and repeat; else read in order, repeated.
        seed: shuffling seed.
        input_context: from `distribute_datasets_from_function`.
        shuffle_buffer: examples in the shuffle buffer (the original: 100).
        skip_batches: batches to skip (undecoded), to resume where a run stopped.
    """
    spec = feature_description(metadata)
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(files))
    pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    shard_files = pipelines > 1 and len(files) >= pipelines
    if shard_files:
        dataset = dataset.shard(pipelines, pipeline_id)
    if is_training:
        dataset = dataset.shuffle(len(files), seed=seed).repeat()
        dataset = dataset.interleave(tf.data.TFRecordDataset, cycle_length=min(4, len(files)),
                                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    else:
        dataset = tf.data.TFRecordDataset(dataset).repeat()
    if pipelines > 1 and not shard_files:
        dataset = dataset.shard(pipelines, pipeline_id)
    if is_training:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed)
    dataset = dataset.batch(batch_size, drop_remainder=True)
    if skip_batches:
        dataset = dataset.skip(skip_batches)
    dataset = dataset.map(lambda records: _to_inputs_and_labels(decode_batch(records, spec)),
                          num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return dataset.prefetch(tf.data.AUTOTUNE)


def _to_inputs_and_labels(features):
    inputs = {k: features[k] for k in MODEL_INPUTS}
    labels = {"masked_lm_ids": features["masked_lm_ids"],
              "masked_lm_weights": features["masked_lm_weights"],
              "next_sentence_labels": features["next_sentence_labels"]}
    return inputs, labels


def check_compatible(metadata: dict, source: str, max_seq_length: int, max_predictions_per_seq: int,
                     vocab_size: int) -> None:
    """Refuses data that does not fit the model or the flags (names both sides)."""
    problems = []
    if metadata["max_seq_length"] != max_seq_length:
        problems.append(f"sequence length {metadata['max_seq_length']} (--max_seq_length is {max_seq_length})")
    if metadata["max_predictions_per_seq"] != max_predictions_per_seq:
        problems.append(f"{metadata['max_predictions_per_seq']} masked positions per sequence "
                        f"(--max_predictions_per_seq is {max_predictions_per_seq})")
    if metadata.get("vocab_size") is not None and metadata["vocab_size"] != vocab_size:
        problems.append(f"vocabulary of {metadata['vocab_size']} pieces (the config's vocab_size is {vocab_size})")
    if problems:
        raise DataError(f"{source}: the data has " + "; ".join(problems))


def metadata_for_files(files: List[str]) -> dict:
    """The metadata.json beside the files; else read off the first record (no vocab check)."""
    directories = sorted({os.path.dirname(f) for f in files})
    found = [d for d in directories if tf.io.gfile.exists(os.path.join(d, METADATA_FILE))]
    if found:
        metadatas = [load_metadata(d) for d in found]
        for other, directory in zip(metadatas[1:], found[1:]):
            for key in ("max_seq_length", "max_predictions_per_seq", "vocab_size"):
                if other.get(key) != metadatas[0].get(key):
                    raise DataError(f"{directory} and {found[0]} differ in {key}")
        return metadatas[0]
    for file in files:
        for record in tf.data.TFRecordDataset(file).take(1):
            example = tf.train.Example.FromString(record.numpy())
            feature = example.features.feature
            if "input_ids" not in feature or "masked_lm_positions" not in feature:
                raise DataError(f"{file}: not pretraining data (no input_ids/masked_lm_positions)")
            return {"max_seq_length": len(feature["input_ids"].int64_list.value),
                    "max_predictions_per_seq": len(feature["masked_lm_positions"].int64_list.value),
                    "vocab_size": None, "source": file}
    raise DataError("the input files hold no records")
