"""GPU training throughput under Keras' JAX backend: the loop's own step vs keras-hub on JAX vs HF torch.compile.

`ours` times `albert_tf.pretraining.jax_step.JaxTrainStep`, the very step `run_pretraining
--backend jax` runs (forward with MLM at 20 gathered positions + SOP, backward, global-norm
clipping, the original's AdamW or LAMB; the state stays on the devices, as in the loop), fed numpy batches as the loop
feeds it. Its attention is what the layer picks (cuDNN's fused kernel under JAX on a GPU in
bf16, else einsum); the script reads the compiled step and prints which ran.
`ours_einsum` is the same step with the einsum attention forced. Every case runs in a fresh
process (`--smoke`: all in this one), cases interleaved over rounds, at each shape; prints JSON
with sequences/s, tokens/s, model FLOPs utilisation (against `--peak_tflops`, H100 SXM bf16 dense
by default) and the ratios.

    python bench/gpu_jax.py [--shapes 32x512,128x128] [--rounds 2] [--steps 10]
        [--cases ours,ours_einsum,keras_hub,hf_compile] [--torch_python /path/to/python]
    python bench/gpu_jax.py --require_cudnn --cases ours --shapes 8x128   # exit 1 unless cuDNN attention ran

Cases:
- `ours_padded` / `ours_packed` (not run unless named): the same step on rows as WikiText-2 pretraining
  data fills them (`bench/packed_rows.py`): one instance a row, 79.5 % text at 128 and 41.4 % at
  512, against up to 3 packed instances a row, 99.5 % and 90.3 % text (block-diagonal attention:
  cuDNN with a `[B, 1, S, S]` mask). They report real tokens/s and their ratio.
- `keras_hub`: keras-hub `AlbertBackbone` + `MaskedLMHead` + Dense SOP, Keras AdamW, one jitted step.
- `hf_compile`: transformers `AlbertForPreTraining` submodules on CUDA, torch.compile,
  bf16 autocast, fused AdamW (run with `--torch_python`).

`--smoke` runs every case on CPU with a tiny shape, all in this process and this Python (checks the
script's cases, not speed, so it skips the fresh process per case that timings need, and
`--torch_python`; the suite runs it).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import traceback

from _common import REPO

BASE = dict(vocab=30000, embed=128, hidden=768, layers=12, heads=12, intermediate=3072, max_pos=512)


# Text share of a row in WikiText-2 pretraining data (one sentence a line), one instance a row and packed
# up to 3 a row (bench/journal/2026-11-27-packed-rows.md); other lengths: the nearer one.
ROW_FILL = {"ours_padded": {128: 0.795, 512: 0.414}, "ours_packed": {128: 0.995, 512: 0.903}}
PACKED_INSTANCES = 3


def row_fill(case, seq):
    fills = ROW_FILL.get(case)
    return 1.0 if fills is None else fills[min(fills, key=lambda length: abs(length - seq))]


def synthetic_rows(np, batch, seq, vocab, fill, instances, predictions=20, seed=0):
    """Rows whose first `fill` of tokens are `instances` equal instances (`input_mask` numbers them when > 1)."""
    from data_prep.packing import prediction_slots

    rng = np.random.default_rng(seed)
    length = max(4, int(fill * seq) // instances)
    slots = prediction_slots(seq, predictions, instances, 0.15)  # data_prep's bound for a packed row
    per_instance = min(predictions, slots // instances, length - 1)
    data = {k: np.zeros((batch, seq), "int32") for k in ("input_ids", "input_mask", "segment_ids")}
    positions, starts = [], []
    for number in range(instances):
        start = number * length
        starts.append(start)
        data["input_ids"][:, start : start + length] = rng.integers(5, vocab, (batch, length))
        data["input_mask"][:, start : start + length] = number + 1 if instances > 1 else 1
        data["segment_ids"][:, start + length // 2 : start + length] = 1
        positions.append(
            np.stack(
                [np.sort(rng.choice(np.arange(start + 1, start + length), per_instance, False)) for _ in range(batch)]
            )
        )
    positions = np.concatenate(positions, 1)
    used = positions.shape[1]
    pad = ((0, 0), (0, slots - used))
    data["masked_lm_positions"] = np.pad(positions, pad).astype("int32")
    data["masked_lm_ids"] = np.pad(rng.integers(5, vocab, (batch, used)), pad).astype("int32")
    data["masked_lm_weights"] = np.pad(np.ones((batch, used), "float32"), pad)
    data["next_sentence_labels"] = rng.integers(0, 2, (batch, instances)).astype("int32")
    if instances > 1:
        data["next_sentence_weights"] = np.ones((batch, instances), "float32")
        data["cls_positions"] = np.array([starts] * batch, "int32")
    return data


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

    if case.startswith("ours"):
        from albert_tf import AlbertBackbone, AlbertPretrainer
        from albert_tf.layers.attention import AlbertAttention
        from albert_tf.pretraining.objective import pretraining_loss

        config = albert_config(cfg, cfg["layers"])
        backbone = AlbertBackbone.from_albert_config(config, dtype=policy)
        model = AlbertPretrainer(backbone, packed_rows=case == "ours_packed")
        if case == "ours_einsum":
            for layer in model._flatten_layers():
                if isinstance(layer, AlbertAttention):
                    layer.attention_kernel = "einsum"
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


def albert_config(cfg, layers):
    """The AlbertConfig of the shapes `cfg` (BASE or the smoke's), `layers` deep, dropout off."""
    from albert_tf import AlbertConfig

    return AlbertConfig.from_dict(
        dict(
            vocab_size=cfg["vocab"],
            embedding_size=cfg["embed"],
            hidden_size=cfg["hidden"],
            num_hidden_layers=layers,
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


def model_flops(cfg, batch, seq, predictions=20):
    """FLOPs of one training step (3× the forward's matmuls: backward is two of them)."""
    tokens = batch * seq
    hidden, inner, embed = cfg["hidden"], cfg["intermediate"], cfg["embed"]
    layer = 2 * tokens * (4 * hidden * hidden + 2 * hidden * inner) + 4 * batch * seq * seq * hidden
    embedding = 2 * tokens * embed * hidden
    heads = 2 * batch * predictions * (hidden * embed + embed * cfg["vocab"]) + 2 * batch * (
        hidden * hidden + 2 * hidden
    )
    return 3 * (cfg["layers"] * layer + embedding + heads)


def attention_in(compiled_text: str) -> str:
    """Which attention a compiled step runs: cuDNN's fused call appears as a `__cudnn$fmha` custom call."""
    return "cudnn" if "__cudnn$fmha" in compiled_text else "einsum"


def run_keras(args):
    os.environ["KERAS_BACKEND"] = "jax"
    import jax
    import keras
    import numpy as np

    keras.utils.set_random_seed(0)
    policy = "float32" if args.smoke else "mixed_bfloat16"
    model, loss_of = keras_model(args.case, args.cfg, policy)
    if args.case in ROW_FILL:
        instances = PACKED_INSTANCES if args.case == "ours_packed" else 1
        data = synthetic_rows(np, args.batch, args.seq, args.cfg["vocab"], row_fill(args.case, args.seq), instances)
    else:
        data = synthetic_batch(np, args.batch, args.seq, args.cfg["vocab"])
    names = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "cls_positions")
    extra = {}
    if args.case.startswith("ours"):
        from albert_tf.optimization import create_optimizer
        from albert_tf.pretraining import objective
        from albert_tf.pretraining.jax_step import JaxTrainStep

        optimizer = create_optimizer(args.optimizer, 1e-4, num_train_steps=1000, num_warmup_steps=0)
        optimizer.build(model.trainable_variables)
        step = JaxTrainStep(model, optimizer, objective)  # ALBERT's loss module (no TensorFlow here)
        inputs = {k: data[k] for k in names if k in data}
        labels = {k: v for k, v in data.items() if k not in names}
        extra["attention"] = attention_in(
            step.step.lower(step.state(), *step.devices.shard((inputs, labels))).compile().as_text()
        )

        def one_step():
            return step(inputs, labels)["loss"]

    else:
        x = {k: jax.numpy.asarray(data[k]) for k in names if k in data}
        features = {k: jax.numpy.asarray(v) for k, v in data.items()}
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

        state = [
            (
                [v.value for v in model.trainable_variables],
                [v.value for v in model.non_trainable_variables],
                [v.value for v in optimizer.variables],
            )
        ]

        def one_step():
            loss, state[0] = train_step(state[0], x, features)
            return loss

    times = []
    for i in range(args.warmup + args.steps):
        start = time.perf_counter()
        loss = one_step()
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


def run_case(args, case, batch, seq) -> dict:
    """One case's result: from a fresh process (timings), or in this one for the smoke."""
    if args.smoke:
        worker_args = argparse.Namespace(**{**vars(args), "case": case, "batch": batch, "seq": seq})
        try:
            return run_hf(worker_args) if case == "hf_compile" else run_keras(worker_args)
        except Exception:  # noqa: BLE001  (recorded as a case's failure, as a worker's would be)
            return {"error": traceback.format_exc()[-1500:]}
    done = subprocess.run(worker_command(args, case, batch, seq), capture_output=True, text=True, cwd=REPO)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(lines[-1][7:]) if lines else {"error": (done.stdout + done.stderr)[-1500:]}


def worker_command(args, case, batch, seq):
    python = args.torch_python if case == "hf_compile" else sys.executable
    cmd = [python, os.path.abspath(__file__), "--case", case, "--batch", str(batch), "--seq", str(seq)]
    cmd += ["--warmup", str(args.warmup), "--steps", str(args.steps), "--optimizer", args.optimizer]
    return cmd + (["--smoke"] if args.smoke else [])


def summarize(args, case, batch, seq, results):
    ok = [r for r in results if "step_s" in r]
    if not ok:
        return {"failed": results[0].get("error")}
    step_s = statistics.median(r["step_s"] for r in ok)
    summary = {
        "sequences_per_s": round(batch / step_s, 1),
        "tokens_per_s": round(batch * seq / step_s),
        "step_s": round(step_s, 4),
        "mfu": round(model_flops(args.cfg, batch, seq) / step_s / (args.peak_tflops * 1e12), 3),
        "device": ok[0]["device"],
    }
    if "attention" in ok[0]:
        summary["attention"] = ok[0]["attention"]
    if case in ROW_FILL:
        summary["real_tokens_per_s"] = round(batch * seq * row_fill(case, seq) / step_s)
    return summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="ours,ours_einsum,keras_hub,hf_compile")
    parser.add_argument("--shapes", default="32x512,128x128", help="batch x sequence length, comma-separated")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--optimizer", default="adamw", choices=["adamw", "lamb"], help="ours: the loop's optimizer")
    parser.add_argument("--peak_tflops", type=float, default=989.0, help="the card's dense bf16 peak (H100 SXM)")
    parser.add_argument("--torch_python", default=sys.executable)
    parser.add_argument("--require_cudnn", action="store_true", help="exit 1 unless ours ran cuDNN's attention")
    parser.add_argument("--smoke", action="store_true", help="tiny shapes on CPU: checks the script only")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seq", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.cfg = dict(BASE)
    shapes = [tuple(int(n) for n in shape.split("x")) for shape in args.shapes.split(",")]
    if args.smoke:
        os.environ["KERAS_BACKEND"] = "jax"  # every case in this process: before any case imports Keras
        args.cfg.update(vocab=300, hidden=32, layers=2, heads=4, intermediate=64, max_pos=64)
        shapes, args.warmup, args.steps = [(2, 32)], 1, 1
    if args.case:  # worker
        result = run_hf(args) if args.case == "hf_compile" else run_keras(args)
        print("RESULT " + json.dumps(result), flush=True)
        return

    cases = args.cases.split(",")
    runs = {(case, shape): [] for case in cases for shape in shapes}
    for round_index in range(args.rounds):
        order = cases[round_index % len(cases) :] + cases[: round_index % len(cases)]
        for shape in shapes:
            for case in order:
                result = run_case(args, case, *shape)
                print(f"[round {round_index}] {case} {shape}: {json.dumps(result)}", file=sys.stderr, flush=True)
                runs[(case, shape)].append(result)
    report = {}
    for batch, seq in shapes:
        summary = {case: summarize(args, case, batch, seq, runs[(case, (batch, seq))]) for case in cases}
        ratios = {}
        for ours in ("ours", "ours_einsum"):
            for peer in ("keras_hub", "hf_compile"):
                if "sequences_per_s" in summary.get(ours, {}) and "sequences_per_s" in summary.get(peer, {}):
                    ratio = summary[ours]["sequences_per_s"] / summary[peer]["sequences_per_s"]
                    ratios[f"{ours}/{peer}"] = round(ratio, 3)
        if all("real_tokens_per_s" in summary.get(case, {}) for case in ROW_FILL):
            packed, padded = (summary[case]["real_tokens_per_s"] for case in ("ours_packed", "ours_padded"))
            ratios["real_tokens ours_packed/ours_padded"] = round(packed / padded, 3)
        report[f"{batch}x{seq}"] = {"summary": summary, "ratios": ratios}
    print(json.dumps({"precision": "float32" if args.smoke else "bf16", "shapes": report}, indent=2))
    failed = [f"{case} {shape}" for shape, r in report.items() for case, got in r["summary"].items() if "failed" in got]
    if failed:
        print(f"error: failed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)
    if args.require_cudnn:
        ran = {shape: r["summary"].get("ours", {}).get("attention") for shape, r in report.items()}
        if any(kernel != "cudnn" for kernel in ran.values()):
            print(f"error: the compiled step did not run cuDNN's fused attention: {ran}", file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
