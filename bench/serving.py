"""Serving latency and throughput: our exports vs the peers' in-process forward.

Exports albert_base_v2 (random weights: speed does not depend on them) once as
a SavedModel with `serving_default` in graph mode and XLA-compiled
(`export_saved_model(jit_compile=...)`), and as a float32 TFLite file (and the
dynamic-range int8 one with `--int8`). Then, in interleaved rounds, each case
runs in a fresh process: ours through `tf.saved_model.load(...).signatures
["serving_default"]` (the function TF Serving runs) or LiteRT's interpreter
(XNNPACK, `--threads`; the file has batch-1 shapes, so batch 32 is 32 invokes), the peers through the shared
peer harness
(`--peer_bench`: Model Garden, keras-hub, HF eager/compile encoder forward).
Batch 1 × 128 latency and batch 32 × 128 throughput; prints JSON with, per
batch, our best export over the best peer (goal: b1 latency ≤ 0.8×, b32
throughput ≥ 1.2×).

    python bench/serving.py [--peer_bench bench/peers] [--rounds 2]
        [--torch_python /tmp/torchvenv/bin/python] [--ours saved_model_graph,saved_model_xla,tflite_fp32]
        [--peers mg-albert-xla,kh-albert-xla,hf-albert-eager,hf-albert-compile]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _common import PEERS, REPO, cpu_kind

STEPS = {1: (20, 3), 32: (3, 2)}  # batch -> (timed calls, warm-up calls), as the peer harness


def export(args):
    """Writes the exports into args.work (run in its own process)."""
    import keras

    from albert_tf import AlbertBackbone
    from albert_tf.export import export_saved_model, export_tflite

    keras.utils.set_random_seed(0)
    model = AlbertBackbone.from_albert_config(args.config)
    for jit in (False, True):
        export_saved_model(
            model,
            os.path.join(args.work, f"saved_model_jit_{jit}"),
            version=1,
            max_seq_length=args.seq,
            warmup=False,
            jit_compile=jit,
        )
    export_tflite(model, os.path.join(args.work, "tflite"), "none", max_seq_length=args.seq)
    if args.int8:
        export_tflite(model, os.path.join(args.work, "tflite"), "dynamic_int8", max_seq_length=args.seq)


def inputs(np, batch, seq, vocab=30000):
    rng = np.random.default_rng(0)
    return {
        "input_ids": rng.integers(5, vocab, (batch, seq)).astype("int32"),
        "input_mask": np.ones((batch, seq), "int32"),
        "segment_ids": (np.arange(seq)[None] >= seq // 2).repeat(batch, 0).astype("int32"),
    }


def worker(args):
    """Times one of our cases; prints `RESULT {json}` in the peer harness' terms."""
    import resource

    import numpy as np

    with open(args.config) as f:
        feed = inputs(np, args.batch, args.seq, json.load(f)["vocab_size"])
    if args.case.startswith("saved_model"):
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        jit = args.case == "saved_model_xla"
        path = os.path.join(args.work, f"saved_model_jit_{jit}", "1")
        serve = tf.saved_model.load(path).signatures["serving_default"]
        tensors = {k: tf.constant(v) for k, v in feed.items()}

        def call():
            serve(**tensors)["pooled_output"].numpy()
    else:
        from ai_edge_litert.interpreter import Interpreter

        name = {"tflite_fp32": "albert_float32.tflite", "tflite_int8": "albert_dynamic_int8.tflite"}[args.case]
        interpreter = Interpreter(model_path=os.path.join(args.work, "tflite", name), num_threads=args.threads)
        details = {d["name"]: d for d in interpreter.get_input_details()}
        by_input = {}
        for key in feed:  # signature input names map onto the tensor names
            by_input[key] = details[[n for n in details if key in n][0]]["index"]
        interpreter.allocate_tensors()
        output = [d for d in interpreter.get_output_details() if len(d["shape"]) == 2][0]["index"]

        def call():
            # The file has batch-1 shapes (phones): a batch is one invoke per row.
            for row in range(args.batch):
                for key, index in by_input.items():
                    interpreter.set_tensor(index, feed[key][row : row + 1])
                interpreter.invoke()
                interpreter.get_tensor(output)

    timed, warm = STEPS[args.batch]
    for _ in range(warm):
        call()
    cpu0 = sum(os.times()[:2])
    wall0 = time.perf_counter()
    times = []
    for _ in range(timed):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    wall = time.perf_counter() - wall0
    median = statistics.median(times)
    print(
        "RESULT "
        + json.dumps(
            {
                "peer": "ours",
                "step_median_ms": 1000 * median,
                "seq_per_s": args.batch / median,
                "timed_cpu_util": round((sum(os.times()[:2]) - cpu0) / wall, 2),
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        ),
        flush=True,
    )


def run(cmd, env=None):
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        return {"error": (done.stdout + done.stderr)[-1500:]}
    return json.loads(lines[-1][len("RESULT ") :])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=os.path.join(REPO, "configs", "albert_base_v2.json"))
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--ours", default="saved_model_graph,saved_model_xla,tflite_fp32")
    parser.add_argument("--int8", action="store_true", help="also export and time dynamic-range int8 TFLite")
    parser.add_argument("--peers", default="mg-albert-xla,kh-albert-xla,hf-albert-eager,hf-albert-compile")
    parser.add_argument("--peer_bench", default=str(PEERS), help="the peer scripts' directory")
    parser.add_argument("--torch_python", default=os.environ.get("BENCH_TORCH_PYTHON", sys.executable))
    parser.add_argument("--work", default=None)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--export_only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.export_only:
        return export(args)
    if args.case:
        return worker(args)

    ours = [c for c in args.ours.split(",") if c]
    if args.int8 and "tflite_int8" not in ours:
        ours.append("tflite_int8")
    args.work = args.work or tempfile.mkdtemp(prefix="bench_serving_")
    done = subprocess.run(
        [
            sys.executable,
            os.path.abspath(__file__),
            "--export_only",
            "--work",
            args.work,
            "--config",
            args.config,
            "--seq",
            str(args.seq),
        ]
        + (["--int8"] if args.int8 else []),
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if done.returncode:
        sys.exit(f"export failed:\n{done.stderr[-3000:]}")
    peers = [p for p in args.peers.split(",") if p]
    cases = [(b, "ours", c) for b in map(int, args.batches.split(",")) for c in ours]
    cases += [(b, "peer", p) for b in map(int, args.batches.split(",")) for p in peers]
    runs = {case: [] for case in cases}
    for round_index in range(args.rounds):
        k = round_index % len(cases)
        for batch, kind, name in cases[k:] + cases[:k]:
            if kind == "ours":
                cmd = [
                    sys.executable,
                    os.path.abspath(__file__),
                    "--case",
                    name,
                    "--batch",
                    str(batch),
                    "--work",
                    args.work,
                    "--config",
                    args.config,
                    "--seq",
                    str(args.seq),
                    "--threads",
                    str(args.threads),
                ]
                env = None
            else:
                script = {"mg": "mg_albert.py", "kh": "kh_albert.py", "hf": "hf_albert.py"}[name.split("-")[0]]
                python = args.torch_python if name.startswith("hf") else sys.executable
                timed, warm = STEPS[batch]
                cmd = [
                    python,
                    os.path.join(args.peer_bench, script),
                    "--mode",
                    "infer",
                    "--batch",
                    str(batch),
                    "--seq",
                    str(args.seq),
                    "--steps",
                    str(timed),
                    "--warmup",
                    str(warm),
                    "--threads",
                    str(args.threads),
                    "--jit",
                    "1" if name.endswith(("-xla", "-compile")) else "0",
                ]
                env = dict(os.environ, ALBERT_TF_REPO=str(REPO))
            result = run(cmd, env)
            result["loadavg"] = os.getloadavg()[0]
            shown = {k: result.get(k) for k in ("step_median_ms", "seq_per_s", "timed_cpu_util", "error")}
            print(f"[round {round_index}] b{batch} {name}: {json.dumps(shown)}", file=sys.stderr, flush=True)
            runs[(batch, kind, name)].append(result)

    table, goals = {}, {}
    for batch in map(int, args.batches.split(",")):
        rows = {}
        for (b, kind, name), results in runs.items():
            ok = [r for r in results if "step_median_ms" in r]
            if b == batch and ok:
                ms = statistics.median(r["step_median_ms"] for r in ok)
                rows[name] = {
                    "kind": kind,
                    "ms": round(ms, 1),
                    "seq_per_s": round(batch * 1000 / ms, 2),
                    "cpu_util": [r.get("timed_cpu_util") for r in ok],
                    "runs": len(ok),
                }
            elif b == batch:
                rows[name] = {"kind": kind, "failed": (results[0].get("error") or "")[-400:]}
        table[f"b{batch}"] = rows
        ours_ms = {n: r["ms"] for n, r in rows.items() if r["kind"] == "ours" and "ms" in r}
        peer_ms = {n: r["ms"] for n, r in rows.items() if r["kind"] == "peer" and "ms" in r}
        if ours_ms and peer_ms:
            best_ours, best_peer = min(ours_ms, key=ours_ms.get), min(peer_ms, key=peer_ms.get)
            goals[f"b{batch}"] = {
                "best_ours": best_ours,
                "best_peer": best_peer,
                "latency_ours_over_peer": round(ours_ms[best_ours] / peer_ms[best_peer], 3),
                "throughput_ours_over_peer": round(peer_ms[best_peer] / ours_ms[best_ours], 3),
                "per_export_latency_over_best_peer": {
                    n: round(ms / peer_ms[best_peer], 3) for n, ms in ours_ms.items()
                },
            }
    print(
        json.dumps(
            {
                "config": os.path.basename(args.config),
                "seq": args.seq,
                "threads": args.threads,
                "cpu_count": os.cpu_count(),
                **cpu_kind(),
                "rounds": args.rounds,
                "results": table,
                "ours_vs_best_peer": goals,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
