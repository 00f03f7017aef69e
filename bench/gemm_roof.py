"""The fp32 GEMM floor of the albert_base encoder forward: its matmuls alone, chained.

Runs, in one `tf.function` (graph mode, then XLA), exactly the matmuls of the
encoder forward at `batch × seq` (E→H projection; per layer q, k, v, q·kᵀ, p·v,
output, FFN in and out; the pooler) chained so that each consumes the previous
result, and nothing else: no bias, softmax, GELU, LayerNorm, transpose or mask.
Its time is what TF's fp32 kernels need for the model's FLOPs on this CPU, i.e. a
floor for any fp32 TF forward (ours or a peer's) that leaves the FLOPs as they are.
`--fused_qkv` runs q, k, v as one `[H, 3H]` GEMM. Prints JSON.

    python bench/gemm_roof.py [--batch 1] [--seq 128] [--calls 20] [--fused_qkv]
"""

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

HIDDEN, EMBED, HEADS, INTER, LAYERS = 768, 128, 12, 3072, 12


def forward_flops(batch, seq):
    tokens = batch * seq
    per_layer = 2 * tokens * HIDDEN * HIDDEN * 4 + 2 * tokens * HIDDEN * INTER * 2 + 2 * 2 * batch * seq * seq * HIDDEN
    return 2 * tokens * EMBED * HIDDEN + LAYERS * per_layer + 2 * batch * HIDDEN * HIDDEN


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--fused_qkv", action="store_true")
    args = parser.parse_args()

    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    b, s, d = args.batch, args.seq, HIDDEN // HEADS
    rand = lambda *shape: tf.random.normal(shape, stddev=0.02)  # noqa: E731
    x0 = rand(b * s, EMBED)
    w = {
        "proj": rand(EMBED, HIDDEN),
        "qkv": rand(HIDDEN, 3 * HIDDEN),
        "q": rand(HIDDEN, HIDDEN),
        "k": rand(HIDDEN, HIDDEN),
        "v": rand(HIDDEN, HIDDEN),
        "o": rand(HIDDEN, HIDDEN),
        "ffn_in": rand(HIDDEN, INTER),
        "ffn_out": rand(INTER, HIDDEN),
        "pool": rand(HIDDEN, HIDDEN),
    }

    def heads(t):
        # A reshape only (no transpose): the same FLOPs as the model's [B·N, S, D] operands.
        return tf.reshape(t, [b * HEADS, s, d])

    def gemms(x):
        x = tf.matmul(x, w["proj"])
        for _ in range(LAYERS):
            if args.fused_qkv:
                q, k, v = tf.split(tf.matmul(x, w["qkv"]), 3, axis=1)
            else:
                q, k, v = tf.matmul(x, w["q"]), tf.matmul(x, w["k"]), tf.matmul(x, w["v"])
            scores = tf.matmul(heads(q), heads(k), transpose_b=True)
            context = tf.reshape(tf.matmul(scores, heads(v)), [b * s, HIDDEN])
            x = tf.matmul(tf.matmul(tf.matmul(context, w["o"]), w["ffn_in"]), w["ffn_out"])
        return tf.matmul(x[:1], w["pool"])

    result = {"batch": b, "seq": s, "threads": args.threads, "fused_qkv": args.fused_qkv}
    flops = forward_flops(b, s)
    result["gflop"] = round(flops / 1e9, 2)
    for mode, jit in (("graph", False), ("xla", True)):
        function = tf.function(gemms, jit_compile=jit)
        for _ in range(3):
            function(x0).numpy()
        times = []
        for _ in range(args.calls):
            start = time.perf_counter()
            function(x0).numpy()
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        result[mode] = {
            "ms": round(1000 * median, 1),
            "min_ms": round(1000 * min(times), 1),
            "gflop_per_s": round(flops / median / 1e9, 1),
        }
    result["loadavg"] = os.getloadavg()[0]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
