"""What casting shared weights once per forward pass buys under mixed precision (issue 33).

Two parts, each printing one JSON line with the CPU kind:

- `--part casts`: the bare cost of casting albert_base's shared block (7.1M
  float32 weights) to bf16 once per layer application (12x) against once.
- `--part forward`: the albert_base backbone's graph-mode forward (b x 128) under
  a dtype policy, median of `--calls` calls. `--repo` imports albert_tf from
  another checkout (a worktree of the commit before), for an A/B in one run:

    for r in 1 2 3; do for repo in /tmp/wt_old .; do
      python bench/cast_once.py --part forward --repo $repo --policy mixed_bfloat16 --batch 1
    done; done

Run under `flock -x /tmp/bench.lock` (nothing else running); see bench/README.md.
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "peers"))
from cpu_kind import cpu_kind  # noqa: E402

# albert_base_v2's shared block: q, k, v, o kernels and the two FFN kernels.
BLOCK_KERNELS = [(768, 768)] * 4 + [(768, 3072), (3072, 768)]


def median_ms(function, calls):
    function()
    function()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1e3, 2), round(min(times) * 1e3, 2)


def casts(args, tf):
    variables = [tf.Variable(tf.random.normal(shape)) for shape in BLOCK_KERNELS]
    per_application = tf.function(lambda: [tf.cast(v, tf.bfloat16) for _ in range(args.layers) for v in variables])
    once = tf.function(lambda: [tf.cast(v, tf.bfloat16) for v in variables])
    return {
        "cast_per_application_ms": median_ms(per_application, args.calls)[0],
        "cast_once_ms": median_ms(once, args.calls)[0],
        "layers": args.layers,
    }


def forward(args, tf):
    import keras
    import numpy as np

    sys.path.insert(0, os.path.abspath(args.repo))
    from albert_tf import AlbertBackbone

    keras.config.set_dtype_policy(args.policy)
    backbone = AlbertBackbone.from_albert_config(
        os.path.join(args.repo, "configs", "albert_base_v2.json"), dtype=args.policy
    )
    rng = np.random.default_rng(0)
    shape = (args.batch, args.seq)
    inputs = {
        "input_ids": rng.integers(5, 30000, shape).astype("int32"),
        "input_mask": np.ones(shape, "int32"),
        "segment_ids": np.zeros(shape, "int32"),
    }
    call = tf.function(lambda: backbone(inputs, training=False)["sequence_output"])
    median, fastest = median_ms(lambda: call().numpy(), args.calls)
    return {
        "repo": os.path.abspath(args.repo),
        "policy": args.policy,
        "batch": args.batch,
        "seq": args.seq,
        "median_ms": median,
        "min_ms": fastest,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=["casts", "forward"], required=True)
    parser.add_argument("--repo", default=os.path.dirname(HERE))
    parser.add_argument("--policy", default="mixed_bfloat16")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    result = (casts if args.part == "casts" else forward)(args, tf)
    print(json.dumps({"part": args.part, "threads": args.threads, **result, **cpu_kind()}))


if __name__ == "__main__":
    main()
