"""Instances as the original's `tf.train.Example`s, and a compact form for Beam's shuffle.

The feature names and lengths are the contract's (`albert_tf.shard_set`).
"""

import array
import struct
from typing import Sequence

from data_prep.errors import DataPrepError
from data_prep.instances import Instance
from data_prep.tfrecord import encode_example


def serialize_instance(instance: Instance, max_seq_length: int, max_predictions_per_seq: int) -> bytes:
    """One instance as a tf.train.Example, zero-padded like the original."""
    length = len(instance.input_ids)
    seq_pad = [0] * (max_seq_length - length)
    n = len(instance.masked_lm_positions)
    pred_pad = [0] * (max_predictions_per_seq - n)
    return encode_example(
        [
            ("input_ids", "int64", instance.input_ids + seq_pad),
            ("input_mask", "int64", [1] * length + seq_pad),
            ("segment_ids", "int64", instance.segment_ids + seq_pad),
            ("token_boundary", "int64", instance.token_boundary + seq_pad),
            ("masked_lm_positions", "int64", instance.masked_lm_positions + pred_pad),
            ("masked_lm_ids", "int64", instance.masked_lm_ids + pred_pad),
            ("masked_lm_weights", "float", [1.0] * n + [0.0] * (max_predictions_per_seq - n)),
            ("next_sentence_labels", "int64", [1 if instance.is_random_next else 0]),
        ]
    )


def serialize_row(
    instances: Sequence[Instance], max_seq_length: int, prediction_slots: int, max_instances_per_row: int
) -> bytes:
    """Several instances as one packed Example (`albert_tf.shard_set.feature_spec` with instances > 1).

    Tokens are the instances' concatenated; `input_mask` numbers each token's instance from 1 (0: padding);
    masked positions are shifted to the row; one SOP label, weight and `[CLS]` position per instance slot.
    """
    ids, segments, boundary, mask, starts = [], [], [], [], []
    positions, labels = [], []
    for number, instance in enumerate(instances, start=1):
        starts.append(len(ids))
        positions += [len(ids) + p for p in instance.masked_lm_positions]
        labels += instance.masked_lm_ids
        ids += instance.input_ids
        segments += instance.segment_ids
        boundary += instance.token_boundary
        mask += [number] * len(instance.input_ids)
    seq_pad = [0] * (max_seq_length - len(ids))
    if len(positions) > prediction_slots or len(ids) > max_seq_length:  # packing.prediction_slots is a bound
        raise DataPrepError(f"a row of {len(ids)} tokens and {len(positions)} masked positions does not fit")
    pred_pad = [0] * (prediction_slots - len(positions))
    slot_pad = [0] * (max_instances_per_row - len(instances))
    return encode_example(
        [
            ("input_ids", "int64", ids + seq_pad),
            ("input_mask", "int64", mask + seq_pad),
            ("segment_ids", "int64", segments + seq_pad),
            ("token_boundary", "int64", boundary + seq_pad),
            ("masked_lm_positions", "int64", positions + pred_pad),
            ("masked_lm_ids", "int64", labels + pred_pad),
            ("masked_lm_weights", "float", [1.0] * len(positions) + [0.0] * len(pred_pad)),
            ("next_sentence_labels", "int64", [int(i.is_random_next) for i in instances] + slot_pad),
            ("next_sentence_weights", "float", [1.0] * len(instances) + [0.0] * len(slot_pad)),
            ("cls_positions", "int64", starts + slot_pad),
        ]
    )


def pack_instance(instance: Instance) -> bytes:
    """A compact form for the shuffle (~3x smaller than the Example): ids as uint16 when they fit."""
    ids = instance.input_ids + instance.masked_lm_ids
    typecode = "H" if max(ids) < 65536 else "I"
    sep = instance.segment_ids.index(1) - 1
    header = struct.pack(
        "<cHHBB",
        typecode.encode(),
        len(instance.input_ids),
        sep,
        int(instance.is_random_next),
        len(instance.masked_lm_positions),
    )
    return b"".join(
        [
            header,
            array.array(typecode, ids).tobytes(),
            array.array("H", instance.masked_lm_positions).tobytes(),
            bytes(instance.token_boundary),
        ]
    )


def compact_length(packed: bytes) -> int:
    """Tokens of a `pack_instance` instance, read from its header."""
    return struct.unpack_from("<cHHBB", packed)[1]


def unpack_instance(packed: bytes) -> Instance:
    typecode, length, sep, is_random_next, n = struct.unpack_from("<cHHBB", packed)
    typecode = typecode.decode()
    offset = struct.calcsize("<cHHBB")
    ids = array.array(typecode)
    ids.frombytes(packed[offset : offset + ids.itemsize * (length + n)])
    offset += ids.itemsize * (length + n)
    positions = array.array("H")
    positions.frombytes(packed[offset : offset + 2 * n])
    boundary = list(packed[offset + 2 * n :])
    ids = ids.tolist()
    return Instance(
        ids[:length],
        [0] * (sep + 1) + [1] * (length - sep - 1),
        boundary,
        positions.tolist(),
        ids[length:],
        bool(is_random_next),
        False,
        [],
        [],
    )
