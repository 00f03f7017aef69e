"""Pretraining in bfloat16 against float32: the loss curves of two short runs, same data, same seed.

Both runs go through the library's own `pretrain` (run_pretraining's `--mixed_precision`): float32,
and `bfloat16` = Keras' `mixed_bfloat16` policy (float32 variables and optimizer, bf16 matmuls,
LayerNorm / softmax / logits in float32). Data: WikiText-2 valid.txt for training, test.txt held out
for the eval, made with data_prep (SentencePiece trained on the training text, SOP, seq 128). The
model is a small ALBERT (`--hidden_size` 256, 4 layers, E 128). Prints one JSON object: per-run
loss curves (the training log's 10-step windows), the held-out eval at the end, steps/s, and the
largest gap between the two curves; `--plot` writes the curves as a PNG.

    python bench/bf16_pretraining.py [--steps 300] [--batch 16] [--work_dir /tmp/albert_bf16]
        [--plot bench/bf16_pretraining.png]
"""

import argparse
import json
import os
import pathlib
import platform
import time

from _common import REPO, cpu_kind

from albert_tf.tokenization import SentencePieceTokenizer

CURVE_KEYS = ("loss", "masked_lm_loss", "masked_lm_accuracy", "sentence_order_loss", "sentence_order_accuracy")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=os.environ.get("ALBERT_TF_DATA", str(REPO.parent / "shared" / "data")))
    p.add_argument("--work_dir", default="/tmp/albert_bf16_pretraining")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--vocab_size", type=int, default=8000)
    p.add_argument("--hidden_size", type=int, default=256)
    p.add_argument("--num_hidden_layers", type=int, default=4)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--precisions", default="float32,bfloat16")
    p.add_argument("--plot", default="", help="write the curves to this PNG")
    return p.parse_args(argv)


def make_data(args, work: pathlib.Path) -> dict:
    """SentencePiece on WikiText-2 valid; SOP shards of valid (training) and test (held out)."""
    from data_prep.pipeline import Settings
    from data_prep.pipeline import run as create_data
    from data_prep.train_sentencepiece import corpus_sentences, train_sentencepiece

    train_text = os.path.join(args.data, "wikitext2", "valid.txt")
    heldout_text = os.path.join(args.data, "wikitext2", "test.txt")
    spm = work / "spm.model"
    if not spm.exists():
        train_sentencepiece(corpus_sentences([train_text], "wikitext", lower=True), str(work / "spm"), args.vocab_size)
    data = {"spm": str(spm)}
    for split, text, dupe in (("train", train_text, 3), ("eval", heldout_text, 1)):
        out = work / "data" / split
        if not (out / "metadata.json").exists():
            create_data(
                Settings(
                    input_file=text,
                    output_dir=str(out),
                    tokenizer=SentencePieceTokenizer(str(spm)),
                    input_format="wikitext",
                    max_seq_length=args.seq,
                    dupe_factor=dupe,
                    num_shards=2,
                )
            )
        data[split] = str(out)
    return data


def model_config(args, work: pathlib.Path) -> str:
    config = json.loads((REPO / "configs" / "albert_tiny.json").read_text())
    config.update(
        vocab_size=args.vocab_size,
        embedding_size=128,
        hidden_size=args.hidden_size,
        intermediate_size=4 * args.hidden_size,
        num_attention_heads=args.hidden_size // 64,
        num_hidden_layers=args.num_hidden_layers,
        max_position_embeddings=max(config["max_position_embeddings"], args.seq),
    )
    path = work / "albert_config.json"
    path.write_text(json.dumps(config, indent=2))
    return str(path)


def run(args, precision, config_file, data, work: pathlib.Path) -> dict:
    import shutil

    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import PretrainSettings
    from albert_tf.tokenization import SentencePieceTokenizer

    output_dir = work / "runs" / precision
    shutil.rmtree(output_dir, ignore_errors=True)  # a fresh run each time: the curve starts at step 1
    settings = PretrainSettings(
        output_dir=str(output_dir),
        input_file=data["train"],
        eval_file=data["eval"],
        albert_config_file=config_file,
        train_batch_size=args.batch,
        eval_batch_size=32,
        max_seq_length=args.seq,
        num_train_steps=args.steps,
        num_warmup_steps=args.steps // 10,
        learning_rate=args.lr,
        save_checkpoints_steps=args.steps,
        do_eval=True,
        max_eval_steps=20,
        log_every_steps=10,
        seed=args.seed,
        mixed_precision=precision,
        verbose=False,
    )
    began = time.perf_counter()
    summary = pretrain(settings, tokenizer=SentencePieceTokenizer(data["spm"]))
    seconds = time.perf_counter() - began
    curve = [
        {"step": int(h["step"]), **{k: round(float(h[k]), 5) for k in CURVE_KEYS if k in h}}
        for h in summary.get("history", [])
    ]
    steps_per_s = [h["steps/s"] for h in summary.get("history", [])[1:] if "steps/s" in h]  # the first has tracing
    return {
        "precision": precision,
        "seconds": round(seconds, 1),
        "median_steps_per_s": round(sorted(steps_per_s)[len(steps_per_s) // 2], 3) if steps_per_s else None,
        "eval": {k: round(float(v), 5) for k, v in (summary.get("eval") or {}).items() if isinstance(v, (int, float))},
        "curve": curve,
    }


def compare(runs: dict) -> dict:
    """Largest |bf16 - fp32| of each curve metric over the logged windows, and at the last window."""
    if "float32" not in runs or "bfloat16" not in runs:
        return {}
    a = {c["step"]: c for c in runs["float32"]["curve"]}
    b = {c["step"]: c for c in runs["bfloat16"]["curve"]}
    steps = sorted(set(a) & set(b))
    out = {}
    for k in CURVE_KEYS:
        gaps = [abs(a[s][k] - b[s][k]) for s in steps if k in a[s] and k in b[s]]
        if gaps:
            out[k] = {"max_abs_gap": round(max(gaps), 4), "last_gap": round(b[steps[-1]][k] - a[steps[-1]][k], 4)}
    return out


def plot(runs: dict, path: str, args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    for precision, record in runs.items():
        steps = [c["step"] for c in record["curve"]]
        axes[0].plot(steps, [c["masked_lm_loss"] for c in record["curve"]], label=precision)
        axes[1].plot(steps, [c["sentence_order_loss"] for c in record["curve"]], label=precision)
    if "float32" in runs and "bfloat16" in runs:
        pairs = zip(runs["float32"]["curve"], runs["bfloat16"]["curve"])
        steps, gaps = zip(*[(a["step"], b["masked_lm_loss"] - a["masked_lm_loss"]) for a, b in pairs])
        axes[2].plot(steps, gaps, color="black")
    axes[0].set_title("masked-LM loss (10-step windows)")
    axes[1].set_title("sentence-order loss")
    axes[2].set_title("masked-LM loss, bfloat16 − float32")
    for ax in axes:
        ax.set_xlabel("step")
    axes[0].legend()
    axes[1].legend()
    fig.suptitle(f"ALBERT H{args.hidden_size} L{args.num_hidden_layers}, WikiText-2, b{args.batch}×{args.seq}")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv=None):
    args = parse_args(argv)
    work = pathlib.Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    data = make_data(args, work)
    config_file = model_config(args, work)
    runs = {p: run(args, p, config_file, data, work) for p in args.precisions.split(",")}
    import tensorflow as tf

    result = {
        "config": json.loads(pathlib.Path(config_file).read_text()),
        "batch": args.batch,
        "seq": args.seq,
        "steps": args.steps,
        "learning_rate": args.lr,
        "seed": args.seed,
        "tf_version": tf.__version__,
        "python": platform.python_version(),
        **cpu_kind(),
        "runs": runs,
        "bf16_vs_fp32": compare(runs),
    }
    if args.plot:
        plot(runs, args.plot, args)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
