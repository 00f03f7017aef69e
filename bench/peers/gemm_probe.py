"""GEMM probe: fp32 or bf16 matmul GFLOP/s of the ALBERT-base encoder shapes, in TF or torch.

Helps tell whether a peer gap comes from the framework's matmul kernels
(oneDNN/Eigen in TF, MKL/oneDNN in torch) or from elsewhere.

  python bench/peers/gemm_probe.py --fw tf [--precision bfloat16]     # in the TF venv
  python bench/peers/gemm_probe.py --fw torch [--precision bfloat16]  # in the torch venv

bfloat16: both operands bf16 (TF: a tf.function matmul, oneDNN; torch: MKL-DNN),
the rate an AVX512_BF16 / AMX machine can reach for the model's matmuls.

torch only: `--linear` times `F.linear` with the weight as `nn.Linear` stores it
([out, in]) under `torch.inference_mode()`, HF's forward; `--compile` times that
under `torch.compile` (inductor), the path of HF's torch.compile case.

Prints one line `RESULT {json}` with GFLOP/s per (tokens, in, out) shape.
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_kind import cpu_kind  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--fw", choices=["tf", "torch"], required=True)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--reps", type=int, default=7)
ap.add_argument("--precision", choices=["float32", "bfloat16"], default="float32")
ap.add_argument("--linear", action="store_true", help="torch: F.linear, weight [out, in], inference_mode")
ap.add_argument("--compile", action="store_true", help="torch: --linear under torch.compile")
args = ap.parse_args()
if (args.linear or args.compile) and args.fw != "torch":
    ap.error("--linear and --compile are torch-only")

SHAPES = [(t, k, n) for t in (128, 1024, 4096) for (k, n) in ((768, 768), (768, 3072), (3072, 768))]

if args.fw == "tf":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    mm = tf.function(lambda a, b: tf.matmul(a, b))

    def make(t, k, n):
        dtype = tf.bfloat16 if args.precision == "bfloat16" else tf.float32
        a = tf.cast(tf.random.normal((t, k)), dtype)
        b = tf.cast(tf.random.normal((k, n)), dtype)
        return lambda: mm(a, b)  # CPU tf.function calls return after the op ran

    version = tf.__version__
else:
    import torch

    torch.set_num_threads(args.threads)

    def make(t, k, n):
        dtype = torch.bfloat16 if args.precision == "bfloat16" else torch.float32
        a = torch.randn(t, k, dtype=dtype)
        if not (args.linear or args.compile):
            b = torch.randn(k, n, dtype=dtype)
            return lambda: torch.matmul(a, b)
        weight = torch.randn(n, k, dtype=dtype)
        linear = torch.nn.functional.linear
        if args.compile:
            linear = torch.compile(linear)

        def call():
            with torch.inference_mode():
                return linear(a, weight)

        return call

    version = torch.__version__

res = {}
for t, k, n in SHAPES:
    f = make(t, k, n)
    f()
    f()
    ts = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    res[f"{t}x{k}x{n}"] = round(2 * t * k * n / statistics.median(ts) / 1e9, 1)
print(
    "RESULT "
    + json.dumps(
        dict(
            fw=args.fw,
            version=version,
            threads=args.threads,
            precision=args.precision,
            op="compiled linear" if args.compile else "linear" if args.linear else "matmul",
            gflops=res,
            **cpu_kind(),
        )
    )
)
