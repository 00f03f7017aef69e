"""In-process A/B of issue 33's lean layers: 2-D row GEMMs vs the 3-D einsum projections.

The same albert_base model (same weights) runs twice per round: as the layers are
(`rows_2d`: q/k/v/output and the FFN as 2-D matmuls on the B·S rows, which TF fuses
with their bias adds) and with the layers' previous `call` (`einsum_3d`: the projections
as `EinsumDense` on [B, S, H], the FFN's `Dense` on [B, S, H]), given to the very same
layer objects by switching their class. One process, interleaved rounds: the large
process-to-process spread of this VM (±20% at batch 1) hits both alike. Prints JSON.

    python bench/lean_ab.py [--work infer1,infer32,train] [--xla off,on] [--rounds 5] [--steps 3]
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "bench"))

from keras import ops  # noqa: E402

from albert_tf.layers import AlbertAttention, AlbertFeedForward  # noqa: E402
from albert_tf.layers.attention import MASK_ADDER  # noqa: E402


class EinsumAttention(AlbertAttention):
    """The attention `call` before issue 33 (fp32, no dropout, no remat: what is timed)."""

    def call(self, hidden, input_mask, training=None):
        query, key, value = self.query(hidden), self.key(hidden), self.value(hidden)
        query = query * ops.cast(1.0 / math.sqrt(self.head_size), self.compute_dtype)
        logits = ops.einsum("bqnd,bknd->bnqk", query, key)
        key_bias = (1.0 - ops.cast(input_mask, "float32")) * MASK_ADDER
        key_bias = ops.expand_dims(ops.expand_dims(key_bias, 1), 1)
        probs = ops.softmax(ops.cast(logits, "float32") + key_bias, axis=-1)
        context = ops.einsum("bnqk,bknd->bqnd", probs, value)
        return self.layer_norm(self.output_dense(context) + hidden)


class DenseFeedForward(AlbertFeedForward):
    """The FFN `call` before issue 33: `Dense` on the 3-D input."""

    def call(self, inputs, training=None):
        x = self.output_dense(self.activation(self.intermediate(inputs)))
        return self.layer_norm(x + inputs)


def switch(backbone, einsum_3d):
    for layer in map(backbone.get_layer, backbone.block_names):
        if isinstance(layer, AlbertAttention):
            layer.__class__ = EinsumAttention if einsum_3d else AlbertAttention
        elif isinstance(layer, AlbertFeedForward):
            layer.__class__ = DenseFeedForward if einsum_3d else AlbertFeedForward


def build(cfg, work, xla, einsum_3d, model, backbone):
    import keras
    import tensorflow as tf
    from train_step import _losses, make_batch

    if work == "train":
        features = {k: tf.constant(v) for k, v in make_batch(cfg, 8, 128, 20).items()}
        names = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
        optimizer = keras.optimizers.Adam(1e-4)
        optimizer.build(model.trainable_variables)

        @tf.function(jit_compile=xla)
        def step():
            with tf.GradientTape() as tape:
                out = model({k: features[k] for k in names}, training=True)
                loss = _losses(out["mlm_logits"], out["sop_logits"], features)
            grads = tape.gradient(loss, model.trainable_variables)
            grads, _ = tf.clip_by_global_norm(grads, 1.0)
            optimizer.apply(grads, model.trainable_variables)
            return loss

        switch(backbone, einsum_3d)
        step.get_concrete_function()  # traced with this variant's layers
        return lambda: step().numpy()
    batch = int(work[len("infer") :])
    features = {
        k: tf.constant(v)
        for k, v in make_batch(cfg, batch, 128, 20).items()
        if k in ("input_ids", "input_mask", "segment_ids")
    }
    forward = tf.function(lambda: model(features, training=False)["sequence_output"], jit_compile=xla)
    switch(backbone, einsum_3d)
    forward.get_concrete_function()
    return lambda: forward().numpy()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=os.path.join(REPO, "configs", "albert_base_v2.json"))
    parser.add_argument("--work", default="infer1,infer32,train")
    parser.add_argument("--xla", default="off,on")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import numpy as np
    import tensorflow as tf

    from albert_tf import AlbertBackbone, AlbertPretrainer
    from albert_tf.config import AlbertConfig

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    cfg = AlbertConfig.from_json_file(args.config)
    backbone = AlbertBackbone.from_albert_config(cfg)
    pretrainer = AlbertPretrainer(backbone)
    variants, agreement = {}, {}
    for work in args.work.split(","):
        model = pretrainer if work == "train" else backbone
        for xla in args.xla.split(","):
            for einsum_3d in (True, False):
                name = "einsum_3d" if einsum_3d else "rows_2d"
                run = build(cfg, work, xla == "on", einsum_3d, model, backbone)
                if work != "train":
                    agreement.setdefault(f"{work}/xla_{xla}", []).append(run())
                run()
                variants[f"{work}/xla_{xla}/{name}"] = {
                    "run": run,
                    "times": [],
                    "batch": 8 if work == "train" else int(work[5:]),
                }
    loads = []
    for _ in range(args.rounds):
        for variant in variants.values():
            start = time.perf_counter()
            for _ in range(args.steps):
                variant["run"]()
            variant["times"].append((time.perf_counter() - start) / args.steps)
        loads.append(os.getloadavg()[0])
    results, speedups = {}, {}
    for key, variant in variants.items():
        median = statistics.median(variant["times"])
        results[key] = {"ms": round(1000 * median, 1), "seq_per_s": round(variant["batch"] / median, 3)}
        if key.endswith("rows_2d"):
            base = variants[key.replace("rows_2d", "einsum_3d")]["times"]
            paired = [b / a for a, b in zip(variant["times"], base)]
            speedups[key.rsplit("/", 1)[0]] = {
                "rows_2d_speedup_median": round(statistics.median(paired), 3),
                "range": [round(min(paired), 3), round(max(paired), 3)],
            }
    max_diff = {k: float(np.max(np.abs(a - b))) for k, (a, b) in agreement.items()}
    print(
        json.dumps(
            {
                "config": os.path.basename(args.config),
                "threads": args.threads,
                "rounds": args.rounds,
                "loadavg_per_round": loads,
                "results": results,
                "speedup": speedups,
                "max_abs_diff_sequence_output": max_diff,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
