"""What the encoder forward's graph holds: ours beside keras-hub's, op by op.

Builds albert_base (random weights) as albert_tf's `AlbertBackbone` or keras-hub's
`AlbertBackbone` (`--impl`), wraps the forward in `tf.function` as the peer harness
does, and prints JSON with
- `traced`: op types of the traced graph (before Grappler; nested functions included),
- `executed`: op types that ran in one graph-mode call (after Grappler), with their
  time summed over the worker threads (TF profiler trace),
- `xla`: the optimized HLO module of the `jit_compile=True` function: instruction
  counts by opcode (top level and inside fusions), fusions, dots, transposes/copies,
- `ms`: median wall time of a few calls in each mode (indicative: use the peer
  harness for timings you report).

`--impl export` profiles our exports instead (albert_tf.export, batch 1): the
SavedModel's `serving_default` (traced and executed op types: what it runs beyond
the model) and the float32 TFLite file's operators by builtin code.

    python bench/graph_profile.py --impl ours|kh|export [--batch 1] [--seq 128] [--calls 10]
"""

import argparse
import collections
import glob
import json
import os
import re
import statistics
import tempfile
import time

from _common import REPO

# Trace events that are not TF ops (the function call itself, executor bookkeeping).
NOT_OPS = ("Process", "Run", "Record", "StartRegion", "StopRegion")
# Ops that only move or relabel data, or change its type.
LAYOUT_OPS = ("Transpose", "Reshape", "ExpandDims", "Squeeze", "ConcatV2", "Split", "StridedSlice", "Slice")
# Ops that only carry a value, a variable, or the graph's control structure.
PLUMBING = ("Identity", "Const", "NoOp", "ReadVariableOp", "Placeholder", "_Arg", "_Retval")


def build(impl, batch, seq, model=None):
    import keras
    import numpy as np
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    ids = tf.constant(rng.integers(5, 30000, (batch, seq)).astype("int32"))
    mask = tf.ones((batch, seq), tf.int32)
    segments = tf.constant((np.arange(seq)[None] >= seq // 2).repeat(batch, 0).astype("int32"))
    if impl == "ours":
        from albert_tf import AlbertBackbone

        if model is None:
            model = AlbertBackbone.from_albert_config(os.path.join(REPO, "configs", "albert_base_v2.json"))
        inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": segments}
    else:
        import keras_hub

        model = keras_hub.models.AlbertBackbone(
            vocabulary_size=30000,
            num_layers=12,
            num_heads=12,
            embedding_dim=128,
            hidden_dim=768,
            intermediate_dim=3072,
            num_groups=1,
            num_inner_repetitions=1,
            dropout=0.0,
            max_sequence_length=512,
            num_segments=2,
        )
        inputs = {"token_ids": ids, "segment_ids": segments, "padding_mask": mask}

    def forward(x):
        outputs = model(x, training=False)
        return outputs["sequence_output"], outputs["pooled_output"]

    return forward, inputs


def traced_ops(function, inputs):
    graph_def = function.get_concrete_function(inputs).graph.as_graph_def()
    counts = collections.Counter(node.op for node in graph_def.node)
    for library_function in graph_def.library.function:
        counts.update(node.op for node in library_function.node_def)
    return counts


def executed_ops(run):
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    logdir = tempfile.mkdtemp()
    tf.profiler.experimental.start(logdir)
    run()
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    with open(glob.glob(logdir + "/**/*.xplane.pb", recursive=True)[0], "rb") as f:
        space.ParseFromString(f.read())
    ms, count = collections.Counter(), collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if ":" not in name or name.startswith("__"):
                    continue
                op_type = name.split(":")[-1].strip()
                if op_type in NOT_OPS or op_type.startswith("__"):
                    continue
                ms[op_type] += event.duration_ps / 1e9
                count[op_type] += 1
    return {op: {"count": count[op], "ms": round(ms[op], 2)} for op, _ in ms.most_common()}


def hlo_summary(hlo_text):
    """Instruction counts of an optimized HLO module's entry computation and of its fusions."""
    computations, current = {}, None
    for line in hlo_text.splitlines():
        header = re.match(r"^(ENTRY )?%?([\w.\-]+) .*\{$", line)
        if header and not line.startswith(" "):
            current = ("ENTRY" if header.group(1) else "") + header.group(2)
            computations[current] = collections.Counter()
            continue
        op = re.match(r"^\s+(?:ROOT )?%?[\w.\-]+ = [^=]*? ([a-z][\w\-]*)\(", line)
        if current and op:
            computations[current][op.group(1)] += 1
    entry = next(counts for name, counts in computations.items() if name.startswith("ENTRY"))
    inside = collections.Counter()
    for name, counts in computations.items():
        if not name.startswith("ENTRY"):
            inside.update(counts)
    return {
        "entry_instructions": sum(entry.values()),
        "entry_by_opcode": dict(entry.most_common(12)),
        "fusions": entry["fusion"],
        "dots_total": entry["dot"] + inside["dot"],
        "transposes_total": entry["transpose"] + inside["transpose"],
        "copies_total": entry["copy"] + inside["copy"],
        "converts_total": entry["convert"] + inside["convert"],
        "instructions_in_subcomputations": sum(inside.values()),
    }


def timed_ms(call, calls):
    call()
    call()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append(1000 * (time.perf_counter() - start))
    return round(statistics.median(times), 1)


def tflite_ops(path):
    """Operator counts of a .tflite file, from TF's public model analyzer report."""
    import contextlib
    import io

    import tensorflow as tf

    report = io.StringIO()
    with contextlib.redirect_stdout(report):
        tf.lite.experimental.Analyzer.analyze(model_path=path)
    return collections.Counter(re.findall(r"Op#\d+ (\w+)", report.getvalue()))


def profile_exports(args):
    """Op types of our SavedModel `serving_default` and float32 TFLite file (batch 1)."""
    import keras
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    from albert_tf import AlbertBackbone
    from albert_tf.export import export_saved_model, export_tflite

    keras.utils.set_random_seed(0)
    model = AlbertBackbone.from_albert_config(os.path.join(REPO, "configs", "albert_base_v2.json"))
    work = tempfile.mkdtemp()
    export_saved_model(model, os.path.join(work, "sm"), version=1, max_seq_length=args.seq, warmup=False)
    tflite_path = export_tflite(model, os.path.join(work, "tflite"), "none", max_seq_length=args.seq)
    _, inputs = build("ours", 1, args.seq, model)
    serve = tf.saved_model.load(os.path.join(work, "sm", "1")).signatures["serving_default"]
    graph_def = serve.graph.as_graph_def()
    traced = collections.Counter(node.op for node in graph_def.node)
    for function in graph_def.library.function:
        traced.update(node.op for node in function.node_def)
    call = lambda: serve(**inputs)["pooled_output"].numpy()  # noqa: E731
    ms = timed_ms(call, args.calls)
    executed = executed_ops(call)
    interpreter = Interpreter(model_path=tflite_path, num_threads=args.threads)
    builtin = tflite_ops(tflite_path)
    runner = interpreter.get_signature_runner("serving_default")
    feed = {k: v.numpy() for k, v in inputs.items()}
    tflite_ms = timed_ms(lambda: runner(**feed), args.calls)
    return {
        "saved_model_serving_default": {
            "traced_ops_total": sum(traced.values()),
            "traced_by_type": dict(traced.most_common()),
            "executed_ops_total": sum(v["count"] for v in executed.values()),
            "executed_by_type": executed,
            "ms": ms,
        },
        "tflite_float32": {"ops_total": sum(builtin.values()), "by_op": dict(builtin.most_common()), "ms": tflite_ms},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["ours", "kh", "export"], required=True)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--counts_only", action="store_true", help="op counts only: no timing, no profiler run")
    args = parser.parse_args()

    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    if args.impl == "export":
        print(json.dumps({"impl": "export", "seq": args.seq, **profile_exports(args)}, indent=1))
        return
    forward, inputs = build(args.impl, args.batch, args.seq)
    graph_fn = tf.function(forward)
    xla_fn = tf.function(forward, jit_compile=True)

    traced = traced_ops(graph_fn, inputs)
    layout = {op: traced[op] for op in LAYOUT_OPS if traced[op]}
    casts = traced["Cast"]
    compute = sum(n for op, n in traced.items() if op not in PLUMBING)

    ms = {
        mode: timed_ms(lambda f=f: f(inputs)[1].numpy(), args.calls)
        for mode, f in (("graph", graph_fn), ("xla", xla_fn))
    }
    executed = executed_ops(lambda: graph_fn(inputs)[1].numpy())
    hlo = xla_fn.experimental_get_compiler_ir(inputs)(stage="optimized_hlo")
    print(
        json.dumps(
            {
                "impl": args.impl,
                "batch": args.batch,
                "seq": args.seq,
                "threads": args.threads,
                "traced": {
                    "ops_total": sum(traced.values()),
                    "compute_ops": compute,
                    "layout_ops": layout,
                    "casts": casts,
                    "by_type": dict(traced.most_common()),
                },
                "executed": {
                    "ops_total": sum(v["count"] for v in executed.values()),
                    "ms_summed": round(sum(v["ms"] for v in executed.values()), 1),
                    "by_type": executed,
                },
                "xla": hlo_summary(hlo),
                "ms": ms,
                "loadavg": os.getloadavg()[0],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
