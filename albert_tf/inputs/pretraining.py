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
