"""Pretraining-step throughput: albert_tf vs TF Model Garden's AlbertEncoder.

One step = forward of the pretraining model (MLM at the gathered masked
positions + SOP), backward, global-norm clip 1.0 and an Adam update, inside
one `tf.function` (XLA on or off). Both models run in the same process, in
interleaved rounds, so machine noise hits both alike. Prints JSON.

    python bench/train_step.py [--config configs/albert_base_v2.json]
        [--batch 8] [--seq 128] [--predictions 20] [--rounds 3] [--steps 3]
        [--precisions float32,bfloat16] [--xla off,on] [--impls ours,model_garden]

    python bench/train_step.py --pipeline DATA_DIR [--config ...] [--batch 8]
        [--precisions ...] [--xla ...] [--accum 1,2]

`--pipeline` measures the whole `run_pretraining` step instead: the tf.data input
pipeline reading data_prep's TFRecords + the distributed train step (LAMB, clip,
accumulation), and the input pipeline alone, to tell input-bound from compute-bound.
"""

import argparse
import json
import os
import platform
import statistics
import time

import _common  # noqa: F401  (the shared preamble: the checkout on sys.path, quiet TF)

# isort: split
import numpy as np
import tensorflow as tf


def step_flops(cfg, batch, seq, predictions):
    """Matmul FLOPs of one training step (backward = 2 × forward)."""
    H, E, I, V = cfg.hidden_size, cfg.embedding_size, cfg.intermediate_size, cfg.vocab_size
    tokens = batch * seq
    per_token_layer = 2 * (4 * H * H + 2 * H * I) + 2 * 2 * seq * H
    forward = tokens * cfg.num_hidden_layers * cfg.inner_group_num * per_token_layer
    forward += tokens * 2 * E * H * (E != H)
    forward += batch * predictions * 2 * (H * E + E * V) + batch * 2 * H * H
    return 3 * forward


def matmul_limit_gflops(cfg, tokens, dtype, repeats=5):
    """Best sustained GFLOP/s of the step's main matmul shapes on this machine."""
    H, I = cfg.hidden_size, cfg.intermediate_size
    shapes = [(tokens, H, I), (tokens, I, H), (tokens, H, H), (H, tokens, I), (I, tokens, H)]
    total_flops, total_time = 0.0, 0.0
    for m, k, n in shapes:
        a = tf.random.normal((m, k), dtype=tf.float32)
        b = tf.random.normal((k, n), dtype=tf.float32)
        a, b = tf.cast(a, dtype), tf.cast(b, dtype)
        mm = tf.function(lambda x, y: tf.matmul(x, y))
        mm(a, b).numpy()
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            mm(a, b).numpy()
            best = min(best, time.perf_counter() - start)
        total_flops += 2 * m * k * n
        total_time += best
    return total_flops / total_time / 1e9


def make_batch(cfg, batch, seq, predictions, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "input_ids": rng.integers(5, cfg.vocab_size, (batch, seq)).astype("int32"),
        "input_mask": np.ones((batch, seq), "int32"),
        "segment_ids": (np.arange(seq)[None, :] >= seq // 2).repeat(batch, 0).astype("int32"),
        "masked_lm_positions": np.sort(rng.choice(np.arange(1, seq), (batch, predictions)), axis=1).astype("int32"),
        "masked_lm_ids": rng.integers(5, cfg.vocab_size, (batch, predictions)).astype("int32"),
        "masked_lm_weights": np.ones((batch, predictions), "float32"),
        "next_sentence_labels": rng.integers(0, 2, (batch, 1)).astype("int32"),
    }


def _losses(mlm_logits, sop_logits, features):
    from albert_tf.pretraining.objective import masked_lm_loss, sentence_order_loss

    return masked_lm_loss(mlm_logits, features["masked_lm_ids"], features["masked_lm_weights"]) + sentence_order_loss(
        sop_logits, features["next_sentence_labels"]
    )


def build_ours(cfg, precision, xla, chain=True):
    import keras

    from albert_tf import AlbertBackbone, AlbertPretrainer

    policy = "mixed_bfloat16" if precision == "bfloat16" else "float32"
    backbone = AlbertBackbone.from_albert_config(cfg, dtype=policy)
    backbone.chain_shared_weights = chain
    model = AlbertPretrainer(backbone)
    optimizer = keras.optimizers.Adam(1e-4)
    optimizer.build(model.trainable_variables)
    names = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")

    @tf.function(jit_compile=xla)
    def step(features):
        with tf.GradientTape() as tape:
            out = model({k: features[k] for k in names}, training=True)
            loss = _losses(out["mlm_logits"], out["sop_logits"], features)
        grads = tape.gradient(loss, model.trainable_variables)
        grads, _ = tf.clip_by_global_norm(grads, 1.0)
        optimizer.apply(grads, model.trainable_variables)
        return loss

    return step, model.count_params


def build_model_garden(cfg, precision, xla):
    import tf_keras
    from official.modeling import tf_utils
    from official.nlp.modeling import models, networks

    tf_keras.mixed_precision.set_global_policy("mixed_bfloat16" if precision == "bfloat16" else "float32")
    try:
        init = tf_keras.initializers.TruncatedNormal(stddev=cfg.initializer_range)
        encoder = networks.AlbertEncoder(
            vocab_size=cfg.vocab_size,
            hidden_size=cfg.hidden_size,
            embedding_width=cfg.embedding_size,
            num_layers=cfg.num_hidden_layers,
            num_attention_heads=cfg.num_attention_heads,
            intermediate_size=cfg.intermediate_size,
            activation=tf_utils.get_activation(cfg.hidden_act),
            dropout_rate=cfg.hidden_dropout_prob,
            attention_dropout_rate=cfg.attention_probs_dropout_prob,
            max_sequence_length=cfg.max_position_embeddings,
            type_vocab_size=cfg.type_vocab_size,
            initializer=init,
            dict_outputs=True,
        )
        # Model Garden's MaskedLM fails to build under mixed_bfloat16 (its bias
        # is autocast while the tied table is not), so its heads stay float32.
        tf_keras.mixed_precision.set_global_policy("float32")
        model = models.BertPretrainerV2(
            encoder_network=encoder, mlm_activation=tf_utils.get_activation(cfg.hidden_act), mlm_initializer=init
        )
        # ALBERT's SOP head: a 2-way dense layer on the pooled output.
        sop = tf_keras.layers.Dense(2, kernel_initializer=init, name="sop")
    finally:
        tf_keras.mixed_precision.set_global_policy("float32")
    optimizer = tf_keras.optimizers.Adam(1e-4)

    @tf.function(jit_compile=xla)
    def step(features):
        inputs = {
            "input_word_ids": features["input_ids"],
            "input_mask": features["input_mask"],
            "input_type_ids": features["segment_ids"],
            "masked_lm_positions": features["masked_lm_positions"],
        }
        with tf.GradientTape() as tape:
            out = model(inputs, training=True)
            sop_logits = sop(out["pooled_output"])
            loss = _losses(tf.cast(out["mlm_logits"], tf.float32), tf.cast(sop_logits, tf.float32), features)
        variables = model.trainable_variables + sop.trainable_variables
        grads = tape.gradient(loss, variables)
        grads, _ = tf.clip_by_global_norm(grads, 1.0)
        optimizer.apply_gradients(zip(grads, variables))
        return loss

    return step, lambda: model.count_params() + sop.count_params()


def build_ours_unchained(cfg, precision, xla):
    """Ours without the shared-weight gradient chain (TF's own gradient sums, as before 2026-11-24)."""
    return build_ours(cfg, precision, xla, chain=False)


BUILDERS = {"ours": build_ours, "ours_unchained": build_ours_unchained, "model_garden": build_model_garden}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/albert_base_v2.json")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--predictions", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--precisions", default="float32,bfloat16")
    parser.add_argument("--xla", default="off,on")
    parser.add_argument("--impls", default="ours,model_garden")
    parser.add_argument("--pipeline", default=None, help="data_prep output dir: full run_pretraining step")
    parser.add_argument("--accum", default="1,2", help="--pipeline only: grad_accum_steps values")
    args = parser.parse_args()
    if args.pipeline:
        return pipeline_bench(args)

    from albert_tf.config import AlbertConfig

    cfg = AlbertConfig.from_json_file(args.config)
    features = {k: tf.constant(v) for k, v in make_batch(cfg, args.batch, args.seq, args.predictions).items()}
    flops = step_flops(cfg, args.batch, args.seq, args.predictions)

    variants = {}
    for precision in args.precisions.split(","):
        for xla in args.xla.split(","):
            for impl in args.impls.split(","):
                key = f"{impl}/{precision}/xla_{xla}"
                step, count_params = BUILDERS[impl](cfg, precision, xla == "on")
                start = time.perf_counter()
                step(features).numpy()  # trace + compile
                step(features).numpy()
                variants[key] = {
                    "step": step,
                    "params": count_params(),
                    "times": [],
                    "warmup_s": time.perf_counter() - start,
                }
    for _ in range(args.rounds):
        for _key, v in variants.items():
            start = time.perf_counter()
            for _ in range(args.steps):
                loss = v["step"](features)
            loss.numpy()
            v["times"].append((time.perf_counter() - start) / args.steps)

    limits = {
        p: matmul_limit_gflops(cfg, args.batch * args.seq, tf.bfloat16 if p == "bfloat16" else tf.float32)
        for p in args.precisions.split(",")
    }
    results = {}
    for key, v in variants.items():
        precision = key.split("/")[1]
        step_s = statistics.median(v["times"])
        limit_seq_s = limits[precision] * 1e9 / flops * args.batch
        results[key] = {
            "sequences_per_s": round(args.batch / step_s, 3),
            "step_s": round(step_s, 3),
            "gflop_per_s": round(flops / step_s / 1e9, 1),
            "fraction_of_matmul_limit": round(args.batch / step_s / limit_seq_s, 3),
            "params": v["params"],
            "warmup_s": round(v["warmup_s"], 1),
        }
    ratios = {}
    for key in results:
        impl, rest = key.split("/", 1)
        if impl == "ours" and f"model_garden/{rest}" in results:
            ratios[rest] = round(
                results[key]["sequences_per_s"] / results[f"model_garden/{rest}"]["sequences_per_s"], 3
            )
    chain_ratios = {
        rest: round(results[f"ours/{rest}"]["sequences_per_s"] / results[key]["sequences_per_s"], 3)
        for key in results
        for impl, rest in [key.split("/", 1)]
        if impl == "ours_unchained" and f"ours/{rest}" in results
    }
    print(
        json.dumps(
            {
                "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "tensorflow": tf.__version__},
                "config": args.config,
                "batch": args.batch,
                "seq": args.seq,
                "predictions": args.predictions,
                "gflop_per_step": round(flops / 1e9, 1),
                "matmul_limit_gflop_per_s": {k: round(v, 1) for k, v in limits.items()},
                "results": results,
                "ours_over_model_garden": ratios,
                "ours_over_ours_unchained": chain_ratios,
            },
            indent=2,
        )
    )


def pipeline_bench(args):
    """The run_pretraining step with its input pipeline, and the pipeline alone."""
    import tempfile

    from albert_tf.compute import make_compute
    from albert_tf.config import AlbertConfig
    from albert_tf.inputs.shard_reader import pretraining_dataset, resolve_input
    from albert_tf.pretraining.loop import PretrainingLoop
    from albert_tf.pretraining.settings import PretrainSettings

    cfg = AlbertConfig.from_json_file(args.config)
    source = resolve_input(args.pipeline)
    metadata = source.data.metadata
    iterator = iter(pretraining_dataset(source, args.batch))
    next(iterator)
    start = time.perf_counter()
    for _ in range(200):
        next(iterator)
    input_batches_per_s = 200 / (time.perf_counter() - start)
    results = {}
    for precision in args.precisions.split(","):
        for xla in args.xla.split(","):
            for accum in [int(a) for a in args.accum.split(",")]:
                settings = PretrainSettings(
                    output_dir=tempfile.mkdtemp(),
                    train_batch_size=args.batch,
                    max_seq_length=metadata["max_seq_length"],
                    max_predictions_per_seq=metadata["max_predictions_per_seq"],
                    num_train_steps=1000,
                    mixed_precision=precision,
                    jit_compile=xla == "on",
                    grad_accum_steps=accum,
                    verbose=False,
                )
                loop = PretrainingLoop(make_compute(), cfg, settings, source)
                times = [loop.time_steps(args.steps) for _ in range(args.rounds)]
                step_s = statistics.median(times)
                results[f"{precision}/xla_{xla}/accum_{accum}"] = {
                    "sequences_per_s": round(args.batch / step_s, 3),
                    "step_s": round(step_s, 4),
                    "input_bound": input_batches_per_s < 1 / step_s,
                }
    print(
        json.dumps(
            {
                "machine": {"cpu_count": os.cpu_count(), "tensorflow": tf.__version__},
                "config": args.config,
                "data": args.pipeline,
                "batch": args.batch,
                "seq": metadata["max_seq_length"],
                "input_pipeline_alone_batches_per_s": round(input_batches_per_s, 1),
                "input_pipeline_alone_sequences_per_s": round(input_batches_per_s * args.batch, 1),
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
