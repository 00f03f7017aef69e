"""Export sizes and single-example latency: SavedModel vs the TFLite variants.

Builds the model from a config (weights are random: size and latency do not
depend on their values), exports the ids-in SavedModel and the float32,
float16 and dynamic-range int8 TFLite files, then times batch 1 × seq 128
(median of `--repeats` calls after warm-up). Prints JSON.

    python bench/export.py [--config configs/albert_base_v2.json] [--seq 128] [--threads 2]
"""

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default=str(REPO / "configs" / "albert_base_v2.json"))
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()

    import numpy as np
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    from albert_tf import AlbertBackbone
    from albert_tf.export import export_saved_model, export_tflite
    from albert_tf.export.common import random_inputs

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    model = AlbertBackbone.from_albert_config(args.config)
    inputs = random_inputs(model, 1, args.seq)
    inputs["input_mask"][:] = 1
    work = tempfile.mkdtemp(prefix="bench_export_")
    results = {
        "config": os.path.basename(args.config),
        "parameters": model.count_params(),
        "batch": 1,
        "seq": args.seq,
        "threads": args.threads,
        "variants": {},
    }

    start = time.perf_counter()
    saved = export_saved_model(
        model, os.path.join(work, "saved_model"), version=1, max_seq_length=args.seq, warmup=False
    )
    export_s = time.perf_counter() - start
    serve = tf.saved_model.load(saved).signatures["serving_default"]
    tensors = {k: tf.constant(v) for k, v in inputs.items()}
    expected = serve(**tensors)
    results["variants"]["saved_model"] = {
        "bytes": directory_size(saved),
        "export_s": round(export_s, 1),
        "latency_ms": median_ms(lambda: serve(**tensors), args.repeats),
    }
    for quantize in ("none", "float16", "dynamic_int8"):
        start = time.perf_counter()
        path = export_tflite(model, os.path.join(work, "tflite"), quantize, max_seq_length=args.seq)
        export_s = time.perf_counter() - start
        runner = Interpreter(model_path=path, num_threads=args.threads).get_signature_runner("serving_default")
        outputs = runner(**inputs)
        results["variants"][f"tflite_{quantize}"] = {
            "bytes": os.path.getsize(path),
            "export_s": round(export_s, 1),
            "latency_ms": median_ms(lambda: runner(**inputs), args.repeats),
            "max_abs_diff_sequence_output": float(
                np.abs(outputs["sequence_output"] - expected["sequence_output"].numpy()).max()
            ),
        }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
