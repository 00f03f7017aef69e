"""Benchmark: size and write/restore time of a pretraining checkpoint (model + LAMB slots + step).

What `run_pretraining` writes every `--save_checkpoints_steps` (and on SIGTERM): the
`tf.train.Checkpoint` of the pretrainer (backbone + MLM/SOP heads) and its LAMB optimizer (two
slots per weight), through a `tf.train.CheckpointManager`, as `albert_tf.pretraining.run_state`
does. Each config in a fresh process; median of `--rounds` saves to `--dir` (local disk by default).
Prints one JSON object.

    python bench/checkpoint_write.py [--configs configs/albert_base_v2.json,...] [--rounds 3] [--dir /tmp]
"""

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from _common import REPO


def measure(config_file: str, rounds: int, directory: str) -> dict:
    import tensorflow as tf

    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.pretrainer import AlbertPretrainer
    from albert_tf.optimization import create_optimizer

    model = AlbertPretrainer(AlbertBackbone.from_albert_config(config_file))
    optimizer = create_optimizer("lamb", 1e-3, 1000, 10, 1.0, 0)
    optimizer.build(model.trainable_variables)
    parameters = sum(int(tf.size(w)) for w in model.weights)
    target = tempfile.mkdtemp(dir=directory, prefix="bench_ckpt_")
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
    manager = tf.train.CheckpointManager(checkpoint, target, max_to_keep=1, checkpoint_name="ckpt")
    manager.save(checkpoint_number=0)  # first save builds the save graph
    saves, restores = [], []
    for number in range(1, rounds + 1):
        start = time.perf_counter()
        path = manager.save(checkpoint_number=number)
        saves.append(time.perf_counter() - start)
        start = time.perf_counter()
        checkpoint.restore(path).assert_existing_objects_matched()
        restores.append(time.perf_counter() - start)
    size = sum(f.stat().st_size for f in pathlib.Path(target).glob(f"ckpt-{rounds}.*"))
    shutil.rmtree(target)
    return {
        "config": os.path.basename(config_file),
        "parameters": parameters,
        "checkpoint_mb": round(size / 2**20, 1),
        "bytes_per_parameter": round(size / parameters, 2),
        "save_seconds_median": round(statistics.median(saves), 2),
        "restore_seconds_median": round(statistics.median(restores), 2),
        "write_mb_per_s": round(size / 2**20 / statistics.median(saves), 1),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--configs",
        default="configs/albert_base_v2.json,configs/albert_large_v2.json,configs/albert_xxlarge_v2.json",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one config in this process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.rounds, args.dir)))
        return
    results = []
    for config in args.configs.split(","):
        done = subprocess.run(
            [sys.executable, __file__, "--one", str(REPO / config), "--rounds", str(args.rounds), "--dir", args.dir],
            capture_output=True,
            text=True,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        )
        if done.returncode:
            raise SystemExit(done.stderr[-2000:])
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(json.dumps({"checkpoints": results, "directory": args.dir, "cpu_count": os.cpu_count()}, indent=2))


if __name__ == "__main__":
    main()
