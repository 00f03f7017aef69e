"""The encoder's projections run as 2-D GEMMs with their bias fused (issue 33).

What TF executes, not only what is traced: after Grappler, every q/k/v/output and
FFN projection of the graph-mode forward is one `MatMul` fused with its bias add,
and the only batched matmuls left are the two per layer inside attention. The
numbers are the plain ones: `test_models`/parity tests check those; speed is
measured by `bench/lean_ab.py` and `bench/graph_profile.py`, never here.
"""

import collections
import dataclasses
import glob
import json
import os

import numpy as np
import tensorflow as tf
from tensorflow.tsl.profiler.protobuf import xplane_pb2

from albert_tf import AlbertBackbone, AlbertConfig


def tiny():
    with open("configs/albert_tiny.json") as f:
        return AlbertConfig.from_dict(json.load(f))


def executed_op_types(function, tmp_path):
    """Op types of one call, as the TF profiler records them (after Grappler's rewrites)."""
    function()
    tf.profiler.experimental.start(str(tmp_path))
    function()
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    with open(glob.glob(os.path.join(str(tmp_path), "**", "*.xplane.pb"), recursive=True)[0], "rb") as f:
        space.ParseFromString(f.read())
    types = collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if ":" in name and not name.startswith("__"):
                    types[name.split(":")[-1].strip()] += 1
    return types


def test_projections_are_fused_2d_matmuls(tmp_path):
    config = tiny()
    backbone = AlbertBackbone.from_albert_config(config)
    ids = np.arange(2 * 16, dtype="int32").reshape(2, 16) % config.vocab_size
    inputs = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    forward = tf.function(lambda: backbone(inputs, training=False)["pooled_output"])
    types = executed_op_types(forward, tmp_path)
    layers = config.num_hidden_layers
    batched = sum(n for op, n in types.items() if "BatchMatMul" in op)
    plain = sum(n for op, n in types.items() if op.endswith("MatMul") and "Batch" not in op)
    # Per layer: q·kᵀ and p·v batched; q, k, v, output, FFN in and out plain.
    assert batched == 2 * layers, types
    # Plus the embedding projection and the pooler.
    assert plain == 6 * layers + 2, types
    # Every layer's bias add went into its matmul; one separate BiasAdd is left, the
    # embedding projection's (a Dense on [B, S, E], outside the layers).
    assert types["BiasAdd"] <= 1, types


def kernel_casts(config, policy):
    """Casts of variable reads in the traced graph-mode forward of an inference call."""
    backbone = AlbertBackbone.from_albert_config(config, dtype=policy)
    ids = np.arange(2 * 16, dtype="int32").reshape(2, 16) % config.vocab_size
    inputs = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    graph = tf.function(lambda: backbone(inputs, training=False)["sequence_output"]).get_concrete_function().graph
    return (
        sum(op.type == "Cast" and op.inputs[0].op.type == "ReadVariableOp" for op in graph.get_operations()),
        backbone,
        inputs,
    )


def test_mixed_precision_casts_each_shared_kernel_once_per_forward():
    counts = {}
    for layers in (2, 6):
        config = dataclasses.replace(tiny(), num_hidden_layers=layers)
        counts[layers], backbone, inputs = kernel_casts(config, "mixed_bfloat16")
    # Three times the layers, the same casts: the shared block's 12 weights once, not per layer.
    assert counts[2] == counts[6] > 12, counts
    # The same values as casting at every application (the training path, which has no cast
    # scope; the tiny config has no dropout).
    backbone.chain_shared_weights = False
    inference = backbone(inputs, training=False)["sequence_output"]
    per_application = backbone(inputs, training=True)["sequence_output"]
    np.testing.assert_array_equal(np.asarray(inference, "float32"), np.asarray(per_application, "float32"))
    # float32 models have no casts to share.
    assert kernel_casts(config, "float32")[0] == 0
