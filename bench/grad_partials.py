"""How many per-application weight-gradient partials TF's backward pass sums at once.

ALBERT applies one shared layer L times, so every shared weight receives L
gradient partials, one per application. Without the shared-weight gradient
chain (`--unchained`, as before 2026-11-24) TF's tape adds them with `AddN`;
an `AddN` needs all its inputs alive at once. With the chain
(`albert_tf.layers.weight_chain`, the default in training) each partial is
added into a running sum as it appears.

This script traces one `tf.function` training step (sum-of-squares loss on
the sequence output) of a config and reports, per shared weight, the largest
sum over its partials, twice:

- `traced`: in the graph the tape builds (the largest weight-shaped `AddN`);
- `after_grappler`: in the graph TF really runs, after Grappler's rewrites
  (read from TF's graph dump of one executed step, in a child process:
  Grappler's arithmetic optimizer merges chains of `AddN`s into one).
  A running sum counts 2 (the sum and one partial).

and the partial-gradient memory each implies when every weight is at its
largest sum at once: sum over weights of arity × size. Static inspection;
nothing is timed. Prints JSON.

    python bench/grad_partials.py [--config configs/albert_xxlarge_v2.json] [--unchained]
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

SUMMATION_OPS = ("AddN", "AddV2", "Sub", "Neg", "Identity")


def build(args):
    import tensorflow as tf

    from albert_tf import AlbertBackbone

    model = AlbertBackbone.from_albert_config(args.config)
    model.chain_shared_weights = not args.unchained
    shared = [v for block in model.block_names for v in model.get_layer(block).trainable_variables]
    # Batch 2 × 16 keeps activation shapes apart from weight shapes.
    ids = tf.ones((2, 16), tf.int32)
    features = {"input_ids": ids, "input_mask": ids, "segment_ids": tf.zeros_like(ids)}

    @tf.function
    def train_step(features):
        with tf.GradientTape() as tape:
            output = model(features, training=True)["sequence_output"]
            loss = tf.reduce_sum(output * output)
        return tape.gradient(loss, shared)

    return model, shared, train_step, features


def largest_sums_after_grappler(args):
    """In this process (TF's dump settings already in the environment): per shared weight, its largest sum."""
    import tensorflow as tf
    from google.protobuf import text_format

    _, shared, train_step, features = build(args)
    train_step(features)
    pattern = os.path.join(os.environ["TF_DUMP_GRAPH_PREFIX"], "*train_step*.main.before_partition.pbtxt")
    [path] = glob.glob(pattern)
    with open(path) as dump:
        graph = text_format.Parse(dump.read(), tf.compat.v1.GraphDef())
    nodes = {node.name: node for node in graph.node}
    largest = [1] * len(shared)
    for node in graph.node:
        if node.op != "_Retval":
            continue
        index = node.attr["index"].i
        pending = [node.input[0]]
        while pending:
            producer = nodes[pending.pop().split(":")[0].lstrip("^")]
            if producer.op not in SUMMATION_OPS:
                continue
            data_inputs = [name for name in producer.input if not name.startswith("^")]
            if producer.op == "AddN":
                largest[index] = max(largest[index], len(data_inputs))
            elif producer.op == "Sub":
                largest[index] = max(largest[index], 2)
            pending += data_inputs
    return largest


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=os.path.join(REPO, "configs", "albert_xxlarge_v2.json"))
    parser.add_argument("--unchained", action="store_true", help="without the shared-weight gradient chain")
    parser.add_argument("--grappled_child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.grappled_child:
        print("LARGEST " + json.dumps(largest_sums_after_grappler(args)))
        return

    import numpy as np

    model, shared, train_step, features = build(args)
    graph = train_step.get_concrete_function(features).graph
    # Weights that share a shape (Q/K/V kernels, LayerNorm gamma/beta) share the largest sum found for it.
    weight_shapes = {tuple(variable.shape) for variable in shared}
    traced_by_shape = {}
    for op in graph.get_operations():
        if op.type == "AddN":
            shape = tuple(op.outputs[0].shape)
            if shape in weight_shapes:
                traced_by_shape[shape] = max(traced_by_shape.get(shape, 1), len(op.inputs))

    with tempfile.TemporaryDirectory() as dump_dir:
        env = dict(os.environ, TF_DUMP_GRAPH_PREFIX=dump_dir, TF_DUMP_GRAPH_NAME_FILTER="*")
        env["TF_DUMP_GRAPH_GROUPS"] = "main"
        command = [sys.executable, os.path.abspath(__file__), "--grappled_child", "--config", args.config]
        child = subprocess.run(
            command + (["--unchained"] if args.unchained else []), env=env, capture_output=True, text=True
        )
    lines = [line for line in child.stdout.splitlines() if line.startswith("LARGEST ")]
    if not lines:
        sys.exit(f"the after-Grappler run failed:\n{child.stderr[-2000:]}")
    grappled = json.loads(lines[0][len("LARGEST ") :])

    rows = []
    traced_bytes = grappled_bytes = 0
    for variable, after in zip(shared, grappled):
        shape = tuple(variable.shape)
        size = int(np.prod(shape)) * 4
        traced = traced_by_shape.get(shape, 1)
        traced_bytes += traced * size
        grappled_bytes += after * size
        rows.append(
            {
                "weight": variable.path,
                "shape": list(shape),
                "largest_sum_traced": traced,
                "largest_sum_after_grappler": after,
                "mb": round(size / 2**20, 1),
            }
        )
    config = model.albert_config
    print(
        json.dumps(
            {
                "config": os.path.basename(args.config),
                "chain": not args.unchained,
                "layer_applications": config.num_hidden_layers * config.inner_group_num,
                "shared_weights_mb": round(sum(r["mb"] for r in rows), 1),
                "partials_mb_at_largest_sums_traced": round(traced_bytes / 2**20, 1),
                "partials_mb_at_largest_sums_after_grappler": round(grappled_bytes / 2**20, 1),
                "weights": rows,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
