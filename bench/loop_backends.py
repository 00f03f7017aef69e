"""The pretraining loop's own step on each Keras backend (TensorFlow, JAX), on one machine.

Each case is a fresh process (Keras picks its backend once per process) that builds
`PretrainingLoop` on data_prep's shards and times `loop.time_steps` (the step
`run_pretraining` runs: the tf.data batch, forward, backward, clipping, LAMB); cases are
interleaved over rounds. Prints JSON with seconds per step, sequences/s and the ratio.

    python bench/loop_backends.py --data DATA_DIR --config CONFIG [--batch 32] [--rounds 3] [--steps 10]
        [--precision float32|bfloat16] [--backends tensorflow,jax] [--tf_jit_compile]

The config's `vocab_size` must be the data's (for base shapes on small data, copy a config
and set it).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from _common import REPO, cpu_kind

WORKER = """
import json, sys, tempfile
import keras
from albert_tf.config import AlbertConfig
from albert_tf.inputs.shard_reader import resolve_input
from albert_tf.pretraining.loop import PretrainingLoop
from albert_tf.pretraining.settings import PretrainSettings
from albert_tf.compute import make_compute
data, config, batch, steps, precision, jit = sys.argv[1:7]
train_input = resolve_input(data)
settings = PretrainSettings(
    output_dir=tempfile.mkdtemp(), train_batch_size=int(batch), max_seq_length=train_input.data.max_seq_length,
    max_predictions_per_seq=train_input.data.max_predictions_per_seq, num_train_steps=1000, num_warmup_steps=10,
    mixed_precision=precision, jit_compile=(jit == "1") or None, verbose=False,  # None: JAX always compiles
)
loop = PretrainingLoop(make_compute(), AlbertConfig.from_json_file(config), settings, train_input)
print("RESULT " + json.dumps({"backend": keras.backend.backend(), "step_s": loop.time_steps(int(steps))}))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--precision", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--backends", default="tensorflow,jax")
    parser.add_argument("--tf_jit_compile", action="store_true", help="TensorFlow: --jit_compile (JAX always jits)")
    args = parser.parse_args()
    backends = args.backends.split(",")
    times = {backend: [] for backend in backends}
    for round_index in range(args.rounds):
        for backend in backends[round_index % 2 :] + backends[: round_index % 2]:
            done = subprocess.run(
                [sys.executable, "-c", WORKER, args.data, args.config, str(args.batch), str(args.steps), args.precision]
                + ["1" if args.tf_jit_compile else "0"],
                capture_output=True,
                text=True,
                cwd=tempfile.gettempdir(),
                env={**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"},
            )
            lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
            if not lines:
                sys.exit(f"{backend}: {done.stderr[-2000:]}")
            result = json.loads(lines[-1][7:])
            assert result["backend"] == backend, result
            times[backend].append(result["step_s"])
            print(f"[round {round_index}] {backend}: {result['step_s']:.4f} s/step", file=sys.stderr, flush=True)
    summary = {}
    for backend, values in times.items():
        step_s = statistics.median(values)
        summary[backend] = {"step_s": round(step_s, 4), "sequences_per_s": round(args.batch / step_s, 1)}
    if len(backends) == 2:
        first, second = backends
        summary[f"{second}/{first}"] = round(summary[second]["sequences_per_s"] / summary[first]["sequences_per_s"], 3)
    with open(args.config) as f:
        config = json.load(f)
    shape = {k: config[k] for k in ("hidden_size", "num_hidden_layers", "vocab_size")}
    print(
        json.dumps(
            {
                "cpu": cpu_kind(),
                "batch": args.batch,
                "precision": args.precision,
                "tf_jit_compile": args.tf_jit_compile,
                "config": shape,
                "summary": summary,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
