"""Where the time goes: per-op-type profile of one step (TF profiler trace, summed by op type).

Runs the pretraining step of `bench/train_step.py` (albert_base, b8 × 128), the
fine-tuning step (`--work finetune`: `AlbertClassifier` with our AdamW and clipping,
Keras `train_on_batch`, b`--batch` × `--seq`, as `run_classifier` trains a length
bucket) or the encoder forward (`--work infer1` / `infer32`), once under the TF profiler, and
prints the time per TF op type (summed over both worker threads, so the total
exceeds the wall time) and its share. Use it before and after a change.

    python bench/profile_step.py [--work train|finetune|infer1|infer32] [--xla] [--batch 32 --seq 16]
"""

import argparse
import collections
import glob
import os
import tempfile
import time

from _common import REPO

# Trace events that are not TF ops (the function call itself, executor bookkeeping).
NOT_OPS = ("Process", "Run", "Record", "StartRegion", "StopRegion")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=os.path.join(REPO, "configs", "albert_base_v2.json"))
    parser.add_argument("--work", default="train")
    parser.add_argument("--xla", action="store_true")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--batch", type=int, default=32, help="--work finetune: rows per step")
    parser.add_argument("--seq", type=int, default=16, help="--work finetune: the bucket's width")
    args = parser.parse_args()

    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2
    from train_step import build_ours, make_batch

    from albert_tf import AlbertBackbone
    from albert_tf.config import AlbertConfig

    tf.config.threading.set_intra_op_parallelism_threads(os.cpu_count())
    cfg = AlbertConfig.from_json_file(args.config)
    if args.work == "train":
        step, _ = build_ours(cfg, "float32", args.xla)
        features = {k: tf.constant(v) for k, v in make_batch(cfg, 8, 128, 20).items()}
        run = lambda: step(features).numpy()  # noqa: E731
    elif args.work == "finetune":
        import numpy as np

        from albert_tf import optimization
        from albert_tf.finetuning.losses import classification_loss
        from albert_tf.models.classifier import AlbertClassifier

        model = AlbertClassifier(AlbertBackbone.from_albert_config(cfg), 2)
        model.compile(
            optimizer=optimization.create_optimizer("adamw", 2e-5, 1000, 100, clip_norm=1.0),
            loss={"logits": classification_loss},
            jit_compile=args.xla,
        )
        batch = make_batch(cfg, args.batch, args.seq, 1)
        x = {k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")}
        y = {"logits": np.arange(args.batch, dtype="int32") % 2}
        run = lambda: model.train_on_batch(x, y)  # noqa: E731
    else:
        backbone = AlbertBackbone.from_albert_config(cfg)
        forward = tf.function(lambda x: backbone(x, training=False)["pooled_output"], jit_compile=args.xla)
        x = {
            k: tf.constant(v)
            for k, v in make_batch(cfg, int(args.work[5:]), 128, 20).items()
            if k in ("input_ids", "input_mask", "segment_ids")
        }
        run = lambda: forward(x).numpy()  # noqa: E731
    run()
    run()
    logdir = tempfile.mkdtemp()
    tf.profiler.experimental.start(logdir)
    start = time.perf_counter()
    run()
    wall = time.perf_counter() - start
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    with open(glob.glob(logdir + "/**/*.xplane.pb", recursive=True)[0], "rb") as f:
        space.ParseFromString(f.read())
    by_type, count = collections.Counter(), collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if ":" not in name or name.startswith("__"):
                    continue
                op_type = name.split(":")[-1].strip()
                if op_type in NOT_OPS or op_type.startswith("__"):
                    continue
                by_type[op_type] += event.duration_ps / 1e9
                count[op_type] += 1
    total = sum(by_type.values())
    print(
        f"work={args.work} xla={args.xla} wall_ms={1000 * wall:.0f} op_ms_summed_over_threads={total:.0f} "
        f"loadavg={os.getloadavg()[0]:.1f}"
    )
    print(f"{'op type':32s} {'ms':>9s} {'share':>6s} {'count':>6s}")
    for op_type, ms in by_type.most_common(args.top):
        print(f"{op_type:32s} {ms:9.1f} {100 * ms / total:5.1f}% {count[op_type]:6d}")


if __name__ == "__main__":
    main()
