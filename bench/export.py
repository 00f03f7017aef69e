"""Export sizes and single-example latency: SavedModel vs the TFLite variants.

Builds the model from a config (weights are random: size and latency do not
depend on their values), exports the ids-in SavedModel and the float32,
float16, dynamic-range int8 and full-integer int8 TFLite files, then times
batch 1 × seq 128 (median of `--repeats` calls after warm-up). Prints JSON,
with the CPU's model name and flags (avx2 / avx512f / avx512_vnni / avx512_bf16).

The full-integer file is calibrated on `--calibration_samples` random-id rows
here (its speed does not depend on the ranges; its accuracy on real text is
the tests' business: test_export, test_classifier).

    python bench/export.py [--config configs/albert_base_v2.json] [--seq 128] [--threads 2]

For the int8 comparison, build once, then time in short exclusive holds
(`--work_dir` keeps the files; LiteRT's `num_threads` and op resolver are set
per interpreter, so thread counts and resolvers interleave inside one run):

    flock -s /tmp/bench.lock python bench/export.py --work_dir /tmp/e --build_only
    flock -x /tmp/bench.lock python bench/export.py --work_dir /tmp/e --threads 2,1 --rounds 2 \
        --quantize none,dynamic_int8,full_int8 --op_resolvers xnnpack,builtin --no_saved_model

`--op_resolvers`: `xnnpack` (LiteRT's default: XNNPACK delegate, builtin
kernels for what it does not take), `xnnpack_latest` (the same with
`experimental_default_delegate_latest_features`), `builtin` (no default
delegate: TFLite's own optimized kernels, ruy / gemmlowp int8 GEMMs).
`--gemm_probe` also times one feed-forward matmul ([128, 768] × [768, 3072],
as converted in each variant) under each resolver: which GEMM kernel each
path reaches. `--op_table` lists each file's op kinds with their output
types (which ops run in int8).
"""

import argparse
import collections
import json
import os
import pathlib
import statistics
import tempfile
import time

from _common import REPO, cpu_kind

QUANTIZE_ALL = ("none", "float16", "dynamic_int8", "full_int8")
# Bench-only: full-integer with the elementwise ops and LayerNorm in int8 too (the attention scores
# and softmax float): the variant `full_int8` rejected, timed to show what the float ops cost.
INT8_ELEMENTWISE = "full_int8_int8_elementwise"


def directory_size(path):
    return sum(f.stat().st_size for f in pathlib.Path(path).rglob("*") if f.is_file())


def median_ms(call, repeats):
    call()  # warm-up (graph building, XNNPACK packing)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return round(1000 * statistics.median(times), 2)


def interpreter(path, threads, resolver):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kinds = {
        "xnnpack": {},
        "xnnpack_latest": {"experimental_default_delegate_latest_features": True},
        "builtin": {"experimental_op_resolver_type": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES},
    }
    return Interpreter(model_path=path, num_threads=threads, **kinds[resolver])


def build(args, work, facts=None):
    """Writes the SavedModel and the TFLite files missing from `facts` into `work`; returns the export facts."""
    import numpy as np
    import tensorflow as tf

    from albert_tf import AlbertBackbone
    from albert_tf.export import export_saved_model, export_tflite
    from albert_tf.export.common import random_inputs
    from albert_tf.export.full_integer import LAYER_NORM_STATISTICS
    from albert_tf.export.tflite import TFLITE_NAMES, convert_to_tflite, tflite_input_signature

    tf.config.threading.set_intra_op_parallelism_threads(max(args.threads))
    model = AlbertBackbone.from_albert_config(args.config)
    weights = f"random, built {time.strftime('%H:%M:%S')}"  # files of different builds hold different weights
    facts = facts or {"config": os.path.basename(args.config), "parameters": model.count_params(), "variants": {}}
    if args.saved_model and "saved_model" not in facts["variants"]:
        start = time.perf_counter()
        saved = export_saved_model(
            model, os.path.join(work, "saved_model"), version=1, max_seq_length=args.seq, warmup=False
        )
        facts["variants"]["saved_model"] = {
            "export_s": round(time.perf_counter() - start, 1),
            "path": saved,
            "weights": weights,
        }
    for quantize in args.quantize:
        if f"tflite_{quantize}" in facts["variants"]:
            continue
        start = time.perf_counter()
        if quantize in ("full_int8", INT8_ELEMENTWISE):
            signature = tflite_input_signature(model)
            samples = [random_inputs(model, 1, args.seq, seed=seed) for seed in range(args.calibration_samples)]
            for seed, sample in enumerate(samples):  # padded tails of several lengths, as real text has
                sample["input_mask"][:] = np.arange(args.seq) < args.seq - seed * args.seq // (2 * len(samples))
            options = {}
            if quantize == INT8_ELEMENTWISE:
                options["float_ops"] = LAYER_NORM_STATISTICS + ("SOFTMAX", "BATCH_MATMUL")
            path = os.path.join(work, "tflite", TFLITE_NAMES.get(quantize, f"albert_{quantize}.tflite"))
            flatbuffer = convert_to_tflite(model, signature, "full_int8", args.seq, samples, **options)
            pathlib.Path(path).write_bytes(flatbuffer)
        else:
            path = export_tflite(model, os.path.join(work, "tflite"), quantize, max_seq_length=args.seq)
        facts["variants"][f"tflite_{quantize}"] = {
            "export_s": round(time.perf_counter() - start, 1),
            "path": path,
            "weights": weights,
        }
    (pathlib.Path(work) / "facts.json").write_text(json.dumps(facts))
    return facts


def gemm_probe_files(work):
    """One feed-forward matmul of albert_base ([1, 128, 768] × [768, 3072]) in each TFLite variant."""
    import keras
    import numpy as np
    import tensorflow as tf

    files = {}
    inputs = keras.Input((128, 768), batch_size=1)
    model = keras.Model(inputs, keras.layers.Dense(3072)(inputs))
    rng = np.random.default_rng(0)
    samples = [rng.standard_normal((1, 128, 768)).astype("float32") for _ in range(16)]
    for quantize in ("none", "dynamic_int8", "full_int8"):
        converter = tf.lite.TFLiteConverter.from_keras_model(model)
        if quantize != "none":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if quantize == "full_int8":
            converter.representative_dataset = lambda: ([s] for s in samples)
        path = os.path.join(work, f"gemm_{quantize}.tflite")
        pathlib.Path(path).write_bytes(converter.convert())
        files[quantize] = path
    return files


def time_tflite(path, threads, resolver, inputs, repeats):
    runner = interpreter(path, threads, resolver).get_signature_runner("serving_default")
    return median_ms(lambda: runner(**inputs), repeats)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default=str(REPO / "configs" / "albert_base_v2.json"))
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", default=str(os.cpu_count()), help="comma-separated thread counts")
    parser.add_argument(
        "--quantize", default=",".join(QUANTIZE_ALL), help=f"comma-separated TFLite variants (and {INT8_ELEMENTWISE})"
    )
    parser.add_argument("--op_resolvers", default="xnnpack", help="comma-separated: xnnpack,xnnpack_latest,builtin")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds (every case once per round)")
    parser.add_argument("--calibration_samples", type=int, default=32)
    parser.add_argument("--work_dir", default=None, help="keep (and reuse) the exported files here")
    parser.add_argument("--build_only", action="store_true")
    parser.add_argument("--no_saved_model", dest="saved_model", action="store_false")
    parser.add_argument("--gemm_probe", action="store_true")
    parser.add_argument("--op_table", action="store_true")
    args = parser.parse_args()
    args.threads = [int(t) for t in args.threads.split(",")]
    args.quantize = args.quantize.split(",")
    resolvers = args.op_resolvers.split(",")

    import numpy as np

    from albert_tf import AlbertBackbone
    from albert_tf.export.common import random_inputs
    from albert_tf.export.full_integer import op_output_types

    work = args.work_dir or tempfile.mkdtemp(prefix="bench_export_")
    facts_file = pathlib.Path(work) / "facts.json"
    facts = json.loads(facts_file.read_text()) if facts_file.exists() else None
    wanted = [f"tflite_{q}" for q in args.quantize] + (["saved_model"] if args.saved_model else [])
    if facts is None or not all(name in facts["variants"] for name in wanted):
        facts = build(args, work, facts)
    probe = gemm_probe_files(work) if args.gemm_probe else {}
    if args.build_only:
        print(json.dumps({"work_dir": work, **facts}, indent=2))
        return

    model = AlbertBackbone.from_albert_config(args.config)  # random_inputs needs its input structure only
    inputs = random_inputs(model, 1, args.seq)
    inputs["input_mask"][:] = 1
    results = {
        "date": time.strftime("%Y-%m-%d"),
        "cpu": {**cpu_kind(), "cores": os.cpu_count()},
        "config": facts["config"],
        "parameters": facts["parameters"],
        "batch": 1,
        "seq": args.seq,
        "threads": args.threads,
        "op_resolvers": resolvers,
        "rounds": args.rounds,
        "repeats": args.repeats,
        "variants": {},
    }
    expected = None
    if args.saved_model:
        import tensorflow as tf

        if len(args.threads) > 1:
            parser.error("--threads: the SavedModel's TF threads are fixed per process; give one count")
        tf.config.threading.set_intra_op_parallelism_threads(args.threads[0])
        saved = facts["variants"]["saved_model"]["path"]
        serve = tf.saved_model.load(saved).signatures["serving_default"]
        tensors = {k: tf.constant(v) for k, v in inputs.items()}
        expected = serve(**tensors)["sequence_output"].numpy()
        results["variants"]["saved_model"] = {
            "bytes": directory_size(saved),
            "export_s": facts["variants"]["saved_model"]["export_s"],
            "latency_ms": median_ms(lambda: serve(**tensors), args.repeats),
        }
    timings = collections.defaultdict(list)
    for _ in range(args.rounds):
        for threads in args.threads:
            for quantize in args.quantize:
                path = facts["variants"][f"tflite_{quantize}"]["path"]
                for resolver in resolvers:
                    timings[(quantize, threads, resolver)].append(
                        time_tflite(path, threads, resolver, inputs, args.repeats)
                    )
            for quantize, path in probe.items():
                for resolver in resolvers:
                    runner = interpreter(path, threads, resolver).get_signature_runner("serving_default")
                    probe_inputs = {name: np.ones((1, 128, 768), "float32") for name in runner.get_input_details()}
                    timings[("gemm_" + quantize, threads, resolver)].append(
                        median_ms(lambda: runner(**probe_inputs), args.repeats)
                    )
    for quantize in args.quantize:
        path = facts["variants"][f"tflite_{quantize}"]["path"]
        entry = {"bytes": os.path.getsize(path), "export_s": facts["variants"][f"tflite_{quantize}"]["export_s"]}
        if len(args.threads) == 1 and len(resolvers) == 1:
            entry["latency_ms"] = statistics.median(timings[(quantize, args.threads[0], resolvers[0])])
        else:
            entry["latency_ms"] = {
                f"{threads}t_{resolver}": timings[(quantize, threads, resolver)]
                for threads in args.threads
                for resolver in resolvers
            }
        same_weights = facts["variants"][f"tflite_{quantize}"].get("weights")
        if expected is not None and same_weights == facts["variants"]["saved_model"].get("weights"):
            outputs = interpreter(path, args.threads[0], resolvers[0]).get_signature_runner("serving_default")(**inputs)
            entry["max_abs_diff_sequence_output"] = float(np.abs(outputs["sequence_output"] - expected).max())
        if args.op_table:
            entry["op_table"] = op_output_types(path)
        results["variants"][f"tflite_{quantize}"] = entry
    if probe:
        results["gemm_probe_ms"] = {
            quantize: {
                f"{threads}t_{resolver}": timings[("gemm_" + quantize, threads, resolver)]
                for threads in args.threads
                for resolver in resolvers
            }
            for quantize in probe
        }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
