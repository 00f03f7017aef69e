"""The bf16 SavedModel (`export --precision bfloat16`) against the float32 one: agreement and latency.

Agreement, on real data, SavedModel against SavedModel (`serving_default`):
  * a classifier trained on SST-2 (`--classifier_init`: from random weights, or from
    `--pretraining_run`'s model; 5,000 training rows, 600 steps at 3e-4, seq 64): argmax
    agreement and max |Δlogit| over the 872 dev sentences, and each export's dev accuracy;
  * the pretrainer of `--pretraining_run`: WikiText-2 test sentences with 15% of their pieces
    replaced by [MASK] (up to 20 a sentence): MLM top-1 agreement, max |Δlogit|, each export's
    top-1 accuracy against the hidden pieces, and the SOP argmax agreement.
Latency: albert_base_v2 shapes (a 2-class classifier, random weights: the speed does not depend on
them), both exports loaded in one process, interleaved rounds; `serving_default` at b1 × 128 and
b32 × 128, median of each round, the paired ratio per round.

    python bench/bf16_pretraining.py            # makes the pretraining run used here
    python bench/bf16_export.py [--pretraining_run /tmp/albert_bf16_pretraining/runs/float32]
        [--parts agreement,latency] [--rounds 3]
"""

import argparse
import json
import os
import pathlib
import platform
import shutil
import statistics
import sys
import time

from _common import REPO, cpu_kind

# isort: split
import numpy as np
import tensorflow as tf

from albert_tf.tokenization import SentencePieceTokenizer

PRECISIONS = ("float32", "bfloat16")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=os.environ.get("ALBERT_TF_DATA", str(REPO.parent / "shared" / "data")))
    p.add_argument("--pretraining_run", default="/tmp/albert_bf16_pretraining/runs/float32")
    p.add_argument("--work_dir", default="/tmp/albert_bf16_export")
    p.add_argument("--parts", default="agreement,latency")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--b1_calls", type=int, default=20)
    p.add_argument("--b32_calls", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--classifier_init",
        choices=["scratch", "pretrained"],
        default="scratch",
        help="the SST-2 classifier's start: random weights, or the pretraining run's (whose [CLS] output, after a "
        "short run, is nearly constant: fine-tuning then stays at the majority class)",
    )
    return p.parse_args(argv)


def export_both(model, base: pathlib.Path, **kwargs) -> dict:
    """{precision: loaded serving_default} of fresh float32 and bfloat16 SavedModels of `model`."""
    from albert_tf.export import export_saved_model

    out = {}
    for precision in PRECISIONS:
        target = base / precision
        shutil.rmtree(target, ignore_errors=True)
        began = time.perf_counter()
        path = export_saved_model(model, str(target), version=1, precision=precision, **kwargs)
        out[precision] = tf.saved_model.load(path).signatures["serving_default"]
        print(f"exported {precision} in {time.perf_counter() - began:.0f} s: {path}", file=sys.stderr)
    return out


def serve(signature, features: dict, batch: int = 64) -> dict:
    parts = []
    n = len(next(iter(features.values())))
    for i in range(0, n, batch):
        got = signature(**{k: tf.constant(v[i : i + batch]) for k, v in features.items()})
        parts.append({k: v.numpy() for k, v in got.items()})
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def fine_tuned_classifier(args, work: pathlib.Path) -> str:
    """SST-2 fine-tuned from the pretraining run (kept in the work dir: made once)."""
    from albert_tf.run_classifier import ClassifierSettings, run

    output_dir = work / "sst2"
    if not (output_dir / "best").exists():
        shutil.rmtree(output_dir, ignore_errors=True)
        run(
            ClassifierSettings(
                do_train=True,
                do_eval=True,
                output_dir=str(output_dir),
                task_name="sst-2",
                data_dir=str(pathlib.Path(args.data) / "glue"),
                tokenizer=SentencePieceTokenizer(str(pathlib.Path(args.pretraining_run) / "final" / "spm.model")),
                init_checkpoint=args.pretraining_run if args.classifier_init == "pretrained" else None,
                albert_config_file=str(pathlib.Path(args.pretraining_run) / "final" / "albert_config.json"),
                max_seq_length=64,
                train_batch_size=32,
                eval_batch_size=64,
                learning_rate=3e-4,
                train_step=600,
                warmup_step=60,
                save_checkpoints_steps=100,
                verbose=False,
            )
        )
    return str(output_dir / "best")


def classifier_agreement(args, work: pathlib.Path) -> dict:
    from albert_tf import formats
    from albert_tf.tasks import glue
    from albert_tf.tokenization import SentencePieceTokenizer, load_tokenizer

    spm = str(pathlib.Path(args.pretraining_run) / "final" / "spm.model")
    loaded = formats.load(fine_tuned_classifier(args, work), tokenizer=load_tokenizer(spm))
    examples, _ = glue.read_examples(glue.TASKS["sst-2"], str(pathlib.Path(args.data) / "glue/SST-2/dev.tsv"), "dev")
    features = glue.encode_examples(examples, SentencePieceTokenizer(spm), 64)
    labels = np.array([int(e.label) for e in examples])
    served = {
        p: serve(s, features) for p, s in export_both(loaded.model, work / "classifier", max_seq_length=64).items()
    }
    a, b = served["float32"]["logits"], served["bfloat16"]["logits"]
    return {
        "examples": len(examples),
        "argmax_agreement": round(float((a.argmax(-1) == b.argmax(-1)).mean()), 5),
        "max_abs_logit_diff": round(float(np.abs(a - b).max()), 5),
        "accuracy": {p: round(float((served[p]["logits"].argmax(-1) == labels).mean()), 4) for p in PRECISIONS},
    }


def masked_wikitext(tokenizer, path: str, rows: int = 256, seq: int = 128, predictions: int = 20, seed: int = 0):
    """Real sentences (WikiText-2 test lines of 20+ words), 15% of the pieces masked: features and answers."""
    from albert_tf.tokenization.packing import pack_segments

    rng = np.random.default_rng(seed)
    lines = [line.strip() for line in open(path, encoding="utf-8") if len(line.split()) >= 20 and "=" not in line]
    features = {k: np.zeros((rows, seq), "int32") for k in ("input_ids", "input_mask", "segment_ids")}
    features["masked_lm_positions"] = np.zeros((rows, predictions), "int32")
    answers = np.zeros((rows, predictions), "int32")
    weights = np.zeros((rows, predictions), "float32")
    for i, line in enumerate(lines[:rows]):
        ids, segments = pack_segments(
            tokenizer.encode(line, max_ids=seq - 2), None, seq, tokenizer.cls_id, tokenizer.sep_id
        )
        n = min(predictions, max(1, round(0.15 * (len(ids) - 2))))
        positions = np.sort(rng.choice(np.arange(1, len(ids) - 1), size=n, replace=False))
        answers[i, :n], weights[i, :n] = np.asarray(ids)[positions], 1.0
        ids = np.asarray(ids)
        ids[positions] = tokenizer.mask_id
        features["input_ids"][i, : len(ids)] = ids
        features["input_mask"][i, : len(ids)] = 1
        features["segment_ids"][i, : len(ids)] = segments
        features["masked_lm_positions"][i, :n] = positions
    return features, answers, weights


def pretrainer_agreement(args, work: pathlib.Path) -> dict:
    from albert_tf import formats

    loaded = formats.load(args.pretraining_run)
    features, answers, weights = masked_wikitext(loaded.tokenizer, str(pathlib.Path(args.data) / "wikitext2/test.txt"))
    served = {p: serve(s, features) for p, s in export_both(loaded.model, work / "pretrainer").items()}
    a, b = served["float32"]["mlm_logits"], served["bfloat16"]["mlm_logits"]
    used = weights > 0
    top1 = {p: served[p]["mlm_logits"].argmax(-1) for p in PRECISIONS}
    return {
        "model_class": type(loaded.model).__name__,
        "masked_positions": int(used.sum()),
        "mlm_top1_agreement": round(float((top1["float32"] == top1["bfloat16"])[used].mean()), 5),
        "mlm_max_abs_logit_diff": round(float(np.abs(a - b)[used].max()), 5),
        "mlm_top1_accuracy": {p: round(float((top1[p] == answers)[used].mean()), 4) for p in PRECISIONS},
        "sop_argmax_agreement": round(
            float((served["float32"]["sop_logits"].argmax(-1) == served["bfloat16"]["sop_logits"].argmax(-1)).mean()), 5
        ),
    }


def latency(args, work: pathlib.Path) -> dict:
    import keras

    from albert_tf import AlbertBackbone
    from albert_tf.models.classifier import AlbertClassifier

    keras.utils.set_random_seed(0)
    model = AlbertClassifier(AlbertBackbone.from_albert_config(str(REPO / "configs" / "albert_base_v2.json")), 2)
    signatures = export_both(model, work / "base_classifier", max_seq_length=128)
    rng = np.random.default_rng(0)
    result = {}
    for batch, calls in ((1, args.b1_calls), (32, args.b32_calls)):
        x = {
            "input_ids": tf.constant(rng.integers(5, 30000, (batch, 128)), tf.int32),
            "input_mask": tf.ones((batch, 128), tf.int32),
            "segment_ids": tf.zeros((batch, 128), tf.int32),
        }
        for s in signatures.values():  # first calls: graph warm-up, oneDNN primitive creation
            for _ in range(2):
                s(**x)["logits"].numpy()
        rounds = []
        for r in range(args.rounds):
            medians = {}
            for p in PRECISIONS if r % 2 == 0 else reversed(PRECISIONS):
                times = []
                for _ in range(calls):
                    began = time.perf_counter()
                    signatures[p](**x)["logits"].numpy()
                    times.append(time.perf_counter() - began)
                medians[p] = statistics.median(times) * 1000
            rounds.append(medians)
        ms = {p: round(statistics.median(r[p] for r in rounds), 1) for p in PRECISIONS}
        ratios = [r["float32"] / r["bfloat16"] for r in rounds]
        result[f"b{batch}x128"] = {
            "ms": ms,
            "seq_per_s": {p: round(batch * 1000 / ms[p], 2) for p in PRECISIONS},
            "rounds_ms": [{p: round(v, 1) for p, v in r.items()} for r in rounds],
            "bf16_speedup_paired_median": round(statistics.median(ratios), 3),
            "bf16_speedup_range": [round(min(ratios), 3), round(max(ratios), 3)],
        }
    return result


def main(argv=None):
    args = parse_args(argv)
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    work = pathlib.Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    parts = args.parts.split(",")
    result = {"tf_version": tf.__version__, "python": platform.python_version(), "threads": args.threads, **cpu_kind()}
    if "agreement" in parts:
        result["classifier_sst2_dev"] = classifier_agreement(args, work)
        result["pretrainer_wikitext_test"] = pretrainer_agreement(args, work)
    if "latency" in parts:
        result["latency_albert_base"] = latency(args, work)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
