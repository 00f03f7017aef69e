"""GPU training throughput under Keras' JAX backend: ours vs keras-hub's JAX model vs HF torch.compile.

The issue's goal 4 (not run yet: no GPU was lent when this was written). Train step =
forward (MLM at 20 gathered positions + SOP), backward, AdamW update, one jitted
function; albert_base_v2 shapes, batch 32 × 512, `mixed_bfloat16` (HF: bf16
autocast). Every case runs in a fresh process, cases interleaved over rounds; prints
JSON with sequences/s and the ratios to each peer. Anchors from the issue
(H100): keras-hub JAX 715 seq/s, HF torch.compile 1009 seq/s; goal ≥ 1400.

    # venv with jax[cuda12], keras, keras-hub (--no-deps) and this repo; torch venv for HF
    python bench/gpu_jax.py [--batch 32] [--seq 512] [--rounds 2] [--steps 10]
        [--cases ours,ours_dpa,keras_hub,hf_compile] [--torch_python /path/to/python]

Cases:
- `ours`: `AlbertPretrainer`, attention as in the layers (einsum, f32 softmax).
- `ours_dpa`: the same with `use_dot_product_attention` (`keras.ops.dot_product_attention`,
  cuDNN flash attention under JAX where it applies). Before timing, the script checks its
  outputs against `ours` on the same weights and inputs and reports the max difference;
  use it only where that is float rounding (bf16: ~1e-2 on logits).
- `keras_hub`: keras-hub `AlbertBackbone` + `MaskedLMHead` + Dense SOP, the same step.
- `hf_compile`: transformers `AlbertForPreTraining` submodules on CUDA, torch.compile,
  bf16 autocast, fused AdamW (run with `--torch_python`).

`--smoke` runs every case on CPU with a tiny shape (checks the script, not speed).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from _common import REPO

BASE = dict(vocab=30000, embed=128, hidden=768, layers=12, heads=12, intermediate=3072, max_pos=512)


def synthetic_batch(np, batch, seq, vocab, predictions=20, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "input_ids": rng.integers(5, vocab, (batch, seq)).astype("int32"),
        "input_mask": np.ones((batch, seq), "int32"),
        "segment_ids": (np.arange(seq)[None] >= seq // 2).repeat(batch, 0).astype("int32"),
        "masked_lm_positions": np.sort(
            np.stack([rng.choice(np.arange(1, seq), predictions, replace=False) for _ in range(batch)]), 1
        ).astype("int32"),
        "masked_lm_ids": rng.integers(5, vocab, (batch, predictions)).astype("int32"),
        "masked_lm_weights": np.ones((batch, predictions), "float32"),
        "next_sentence_labels": rng.integers(0, 2, (batch, 1)).astype("int32"),
    }


def keras_model(case, cfg, policy):
    """(model, function from model outputs + features to the loss)."""
    import keras
    from keras import ops

    if case in ("ours", "ours_dpa"):
        from albert_tf import AlbertBackbone, AlbertConfig, AlbertPretrainer
        from albert_tf.layers import AlbertAttention
        from albert_tf.pretraining.objective import pretraining_loss

        config = AlbertConfig.from_dict(
            dict(
                vocab_size=cfg["vocab"],
                embedding_size=cfg["embed"],
                hidden_size=cfg["hidden"],
                num_hidden_layers=cfg["layers"],
                num_hidden_groups=1,
                inner_group_num=1,
                num_attention_heads=cfg["heads"],
                intermediate_size=cfg["intermediate"],
                hidden_act="gelu",
                hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0,
                max_position_embeddings=cfg["max_pos"],
                type_vocab_size=2,
                initializer_range=0.02,
            )
        )
        model = AlbertPretrainer(AlbertBackbone.from_albert_config(config, dtype=policy))
        for layer in model._flatten_layers():
            if isinstance(layer, AlbertAttention):
                layer.use_dot_product_attention = case == "ours_dpa"
        return model, pretraining_loss
    import keras_hub

    init = keras.initializers.TruncatedNormal(stddev=0.02)
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=cfg["vocab"],
        num_layers=cfg["layers"],
        num_heads=cfg["heads"],
        embedding_dim=cfg["embed"],
        hidden_dim=cfg["hidden"],
        intermediate_dim=cfg["intermediate"],
        num_groups=1,
        num_inner_repetitions=1,
        dropout=0.0,
        max_sequence_length=cfg["max_pos"],
        dtype=policy,
    )
    inputs = {
        k: keras.Input((None,), dtype="int32", name=k)
        for k in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
    }
    out = backbone(
        {"token_ids": inputs["input_ids"], "segment_ids": inputs["segment_ids"], "padding_mask": inputs["input_mask"]}
    )
    mlm = keras_hub.layers.MaskedLMHead(
        vocabulary_size=cfg["vocab"],
        token_embedding=backbone.token_embedding,
        intermediate_activation=lambda x: keras.activations.gelu(x, approximate=True),
        kernel_initializer=init,
        dtype=policy,
    )(out["sequence_output"], mask_positions=inputs["masked_lm_positions"])
    sop = keras.layers.Dense(2, kernel_initializer=init, dtype=policy)(out["pooled_output"])
    model = keras.Model(inputs, {"mlm_logits": ops.cast(mlm, "float32"), "sop_logits": ops.cast(sop, "float32")})
    from albert_tf.pretraining.objective import pretraining_loss

    return model, pretraining_loss


def run_keras(args):
    os.environ["KERAS_BACKEND"] = "jax"
    import jax
    import keras
    import numpy as np

    keras.utils.set_random_seed(0)
    policy = "float32" if args.smoke else "mixed_bfloat16"
    model, loss_of = keras_model(args.case, args.cfg, policy)
    data = synthetic_batch(np, args.batch, args.seq, args.cfg["vocab"])
    names = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
    x = {k: jax.numpy.asarray(data[k]) for k in names}
    features = {k: jax.numpy.asarray(v) for k, v in data.items()}
    extra = {}
    if args.case == "ours_dpa":  # agreement with the einsum attention, same weights
        reference, _ = keras_model("ours", args.cfg, policy)
        reference.set_weights(model.get_weights())
        got, want = model(x), reference(x)
        extra["max_abs_diff_vs_ours"] = {
            k: float(np.abs(np.asarray(got[k], "float32") - np.asarray(want[k], "float32")).max()) for k in got
        }
    optimizer = keras.optimizers.AdamW(1e-4, weight_decay=0.01)
    optimizer.build(model.trainable_variables)

    def loss_fn(trainable, non_trainable, x, features):
        out, non_trainable = model.stateless_call(trainable, non_trainable, x, training=True)
        return loss_of(out, features), non_trainable

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    @jax.jit
    def train_step(state, x, features):
        trainable, non_trainable, optimizer_vars = state
        (loss, non_trainable), grads = grad_fn(trainable, non_trainable, x, features)
        trainable, optimizer_vars = optimizer.stateless_apply(optimizer_vars, grads, trainable)
        return loss, (trainable, non_trainable, optimizer_vars)

    state = (
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        [v.value for v in optimizer.variables],
    )
    times = []
    for i in range(args.warmup + args.steps):
        start = time.perf_counter()
        loss, state = train_step(state, x, features)
        loss.block_until_ready()
        if i >= args.warmup:
            times.append(time.perf_counter() - start)
    return dict(extra, device=str(jax.devices()[0]), loss=float(loss), step_s=statistics.median(times))


def run_hf(args):
    import numpy as np
    import torch
    import torch.nn.functional as F
    from transformers import AlbertConfig, AlbertForPreTraining

    cfg = args.cfg
    device = "cpu" if args.smoke else "cuda"
    conf = AlbertConfig(
        vocab_size=cfg["vocab"],
        embedding_size=cfg["embed"],
        hidden_size=cfg["hidden"],
        num_hidden_layers=cfg["layers"],
        num_attention_heads=cfg["heads"],
        intermediate_size=cfg["intermediate"],
        hidden_act="gelu_new",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout_prob=0.0,
        max_position_embeddings=cfg["max_pos"],
    )
    model = AlbertForPreTraining._from_config(conf, attn_implementation="sdpa").to(device).train()
    data = {
        k: torch.from_numpy(v).to(device) for k, v in synthetic_batch(np, args.batch, args.seq, cfg["vocab"]).items()
    }

    def compute_loss():
        with torch.autocast(device, dtype=torch.bfloat16, enabled=not args.smoke):
            out = model.albert(
                input_ids=data["input_ids"].long(),
                attention_mask=data["input_mask"],
                token_type_ids=data["segment_ids"].long(),
            )
            positions = data["masked_lm_positions"].long()
            gathered = torch.gather(out.last_hidden_state, 1, positions.unsqueeze(-1).expand(-1, -1, cfg["hidden"]))
            mlm = model.predictions(gathered).float()
            sop = model.sop_classifier(out.pooler_output).float()
        return F.cross_entropy(
            mlm.reshape(-1, cfg["vocab"]), data["masked_lm_ids"].long().reshape(-1)
        ) + F.cross_entropy(sop, data["next_sentence_labels"].long().reshape(-1))

    loss_fn = compute_loss if args.smoke else torch.compile(compute_loss)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=not args.smoke)
    times = []
    for i in range(args.warmup + args.steps):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        optimizer.step()
        value = float(loss)  # synchronises
        if i >= args.warmup:
            times.append(time.perf_counter() - start)
    return dict(device=device, loss=value, step_s=statistics.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="ours,ours_dpa,keras_hub,hf_compile")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--torch_python", default=sys.executable)
    parser.add_argument("--smoke", action="store_true", help="tiny shapes on CPU: checks the script only")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.cfg = dict(BASE)
    if args.smoke:
        args.cfg.update(vocab=300, hidden=32, layers=2, heads=4, intermediate=64, max_pos=64)
        args.batch, args.seq, args.warmup, args.steps = 2, 32, 1, 1
    if args.case:  # worker
        result = run_hf(args) if args.case == "hf_compile" else run_keras(args)
        print("RESULT " + json.dumps(result), flush=True)
        return

    cases = args.cases.split(",")
    runs = {case: [] for case in cases}
    for round_index in range(args.rounds):
        order = cases[round_index % len(cases) :] + cases[: round_index % len(cases)]
        for case in order:
            python = args.torch_python if case == "hf_compile" else sys.executable
            cmd = [
                python,
                os.path.abspath(__file__),
                "--case",
                case,
                "--batch",
                str(args.batch),
                "--seq",
                str(args.seq),
                "--warmup",
                str(args.warmup),
                "--steps",
                str(args.steps),
            ]
            cmd += ["--smoke"] if args.smoke else []
            done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
            lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
            result = json.loads(lines[-1][7:]) if lines else {"error": (done.stdout + done.stderr)[-1500:]}
            print(f"[round {round_index}] {case}: {json.dumps(result)}", file=sys.stderr, flush=True)
            runs[case].append(result)
    summary = {}
    for case, results in runs.items():
        ok = [r for r in results if "step_s" in r]
        if ok:
            step_s = statistics.median(r["step_s"] for r in ok)
            summary[case] = {
                "sequences_per_s": round(args.batch / step_s, 1),
                "step_s": round(step_s, 4),
                "device": ok[0]["device"],
            }
            if "max_abs_diff_vs_ours" in ok[0]:
                summary[case]["max_abs_diff_vs_ours"] = ok[0]["max_abs_diff_vs_ours"]
        else:
            summary[case] = {"failed": results[0].get("error")}
    ratios = {}
    for ours in ("ours", "ours_dpa"):
        for peer in ("keras_hub", "hf_compile"):
            if "sequences_per_s" in summary.get(ours, {}) and "sequences_per_s" in summary.get(peer, {}):
                ratios[f"{ours}/{peer}"] = round(summary[ours]["sequences_per_s"] / summary[peer]["sequences_per_s"], 3)
    print(
        json.dumps(
            {
                "batch": args.batch,
                "seq": args.seq,
                "precision": "float32" if args.smoke else "bf16",
                "summary": summary,
                "ratios": ratios,
                "goal_sequences_per_s": 1400,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
