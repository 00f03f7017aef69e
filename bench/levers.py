"""A/B of one speed lever at a time, in one process, interleaved rounds.

Each variant is the same albert_base model (same weights) with one switch
flipped; every round times every variant once, so machine noise hits them
alike. Prints JSON: per variant the median time, and its speed relative to
the first variant.

    python bench/levers.py --lever fused_qkv [--work train,infer1,infer32]
        [--xla off,on] [--rounds 5] [--steps 2]

Levers:
- `fused_qkv`: q, k, v in one matmul (kernels concatenated at call time) vs three.
- `threads`: TF inter-op threads 1 vs the default (set before TF starts: one
  process per value, so this lever runs subprocesses).
"""

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "bench"))


def attention_layers(model):
    from albert_tf.layers import AlbertAttention

    return [layer for layer in model._flatten_layers() if isinstance(layer, AlbertAttention)]


def build(cfg, work, xla, fused_qkv, weights=None):
    import keras
    import tensorflow as tf
    from train_step import _losses, make_batch

    from albert_tf import AlbertBackbone, AlbertPretrainer

    backbone = AlbertBackbone.from_albert_config(cfg)
    if work == "train":
        model = AlbertPretrainer(backbone)
        if weights is not None:
            model.set_weights(weights)
        for layer in attention_layers(model):
            layer.fused_qkv = fused_qkv
        optimizer = keras.optimizers.Adam(1e-4)
        optimizer.build(model.trainable_variables)
        features = {k: tf.constant(v) for k, v in make_batch(cfg, 8, 128, 20).items()}
        names = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")

        @tf.function(jit_compile=xla)
        def step():
            with tf.GradientTape() as tape:
                out = model({k: features[k] for k in names}, training=True)
                loss = _losses(out["mlm_logits"], out["sop_logits"], features)
            grads = tape.gradient(loss, model.trainable_variables)
            grads, _ = tf.clip_by_global_norm(grads, 1.0)
            optimizer.apply(grads, model.trainable_variables)
            return loss

        return (lambda: step().numpy()), model.get_weights(), 8
    batch = int(work[len("infer") :])
    model = backbone
    if weights is not None:
        model.set_weights(weights)
    for layer in attention_layers(model):
        layer.fused_qkv = fused_qkv
    features = {
        k: tf.constant(v)
        for k, v in make_batch(cfg, batch, 128, 20).items()
        if k in ("input_ids", "input_mask", "segment_ids")
    }
    forward = tf.function(lambda: model(features, training=False)["sequence_output"], jit_compile=xla)
    return (lambda: forward().numpy()), model.get_weights(), batch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=os.path.join(REPO, "configs", "albert_base_v2.json"))
    parser.add_argument("--lever", default="fused_qkv", choices=["fused_qkv"])
    parser.add_argument("--work", default="train,infer1,infer32")
    parser.add_argument("--xla", default="off,on")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()

    import tensorflow as tf

    from albert_tf.config import AlbertConfig

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    cfg = AlbertConfig.from_json_file(args.config)
    variants = {}
    for work in args.work.split(","):
        for xla in args.xla.split(","):
            weights = None
            for fused in (False, True):
                key = f"{work}/xla_{xla}/fused_qkv_{fused}"
                run, weights, batch = build(cfg, work, xla == "on", fused, weights)
                run()
                run()
                variants[key] = {"run": run, "batch": batch, "times": []}
    loads = []
    for _ in range(args.rounds):
        for v in variants.values():
            start = time.perf_counter()
            for _ in range(args.steps):
                v["run"]()
            v["times"].append((time.perf_counter() - start) / args.steps)
        loads.append(os.getloadavg()[0])
    results, ratios = {}, {}
    for key, v in variants.items():
        median = statistics.median(v["times"])
        results[key] = {"ms": round(1000 * median, 1), "seq_per_s": round(v["batch"] / median, 3)}
    for key in variants:
        if key.endswith("fused_qkv_True"):
            base = key.replace("fused_qkv_True", "fused_qkv_False")
            paired = [b / a for a, b in zip(variants[key]["times"], variants[base]["times"])]
            ratios[key.rsplit("/", 1)[0]] = {
                "speedup_median": round(statistics.median(paired), 3),
                "range": [round(min(paired), 3), round(max(paired), 3)],
            }
    print(
        json.dumps(
            {
                "lever": args.lever,
                "config": os.path.basename(args.config),
                "cpu_count": os.cpu_count(),
                "loadavg_per_round": loads,
                "results": results,
                "fused_over_unfused_speed": ratios,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
