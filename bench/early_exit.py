"""Patience-based early exit (PABEE): accuracy vs layers used, and batch-1 latency per patience.

Fine-tunes a pretrained tiny model with `run_classifier --early_exit` on each
task (GLUE train → dev from ../shared/data), and once without it (the plain
model's dev score, to compare with), then, on the whole dev set:
- for each patience 1..L (L = full depth), the dev metric and the average
  number of layers used, from the real while loop (`PatientInference`);
  also each internal classifier's own score;
- batch-1 latency (median over `--latency_rows` dev rows, padded to `--seq`,
  best of `--rounds` interleaved rounds) of the SavedModel's
  `serving_default` (full depth) and `serve_early_exit` at each patience,
  and of the full-depth and early-exit TFLite files, all in this one run.
Prints JSON.

    python bench/early_exit.py --init_checkpoint runs/pretrain_tiny [--tasks sst-2,mrpc] [--train_step 400]

`--stages` runs part of it in `--work_dir` (what the earlier stages left
there is reused), so that only the timed part holds the machine alone:

    flock -s /tmp/bench.lock python bench/early_exit.py ... --work_dir W --stages fine_tune,curve
    flock -x /tmp/bench.lock python bench/early_exit.py ... --work_dir W --stages latency

`--stages size` times the loop against full depth on a larger model
(`--size_config`, random weights: latency only), where the layers, not the
per-op overhead, take the time.
"""

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

from _common import REPO

from albert_tf.tokenization import SentencePieceTokenizer

GLUE_DIRS = {"sst-2": "SST-2", "mrpc": "MRPC"}
STAGES = ("fine_tune", "curve", "latency", "size")


def fine_tune(args, task_name, output_dir, early_exit=True):
    from albert_tf.run_classifier import ClassifierSettings, run

    settings = ClassifierSettings(
        do_train=True,
        do_eval=True,
        early_exit=early_exit,
        output_dir=output_dir,
        task_name=task_name,
        data_dir=str(pathlib.Path(args.data) / "glue"),
        tokenizer=SentencePieceTokenizer(args.spm_model_file) if args.spm_model_file else None,
        init_checkpoint=args.init_checkpoint,
        max_seq_length=args.seq,
        train_batch_size=32,
        eval_batch_size=64,
        learning_rate=args.learning_rate,
        train_step=args.train_step,
        warmup_step=args.train_step // 10,
        save_checkpoints_steps=args.train_step // 4,
        verbose=False,
    )
    return run(settings)


def score(task, examples, logits):
    import numpy as np

    from albert_tf.tasks import glue

    return glue.compute_metrics(task, np.array([e.label for e in examples]), logits)[task.metric]


def curve(task, model, features, examples):
    import numpy as np

    from albert_tf.models.early_exit import PatientInference

    inference = PatientInference(model)
    exit_logits = model.predict(features, batch_size=64, verbose=0)["exit_logits"]
    per_layer = [score(task, examples, exit_logits[:, j]) for j in range(model.num_exits)]
    points = []
    for patience in range(1, model.num_exits + 1):
        logits, layers = [], []
        for start in range(0, len(examples), 64):
            out = inference({k: v[start : start + 64] for k, v in features.items()}, patience=patience)
            logits.append(np.asarray(out["logits"]))
            layers.append(np.asarray(out["layers_used"]))
        layers = np.concatenate(layers)
        value = score(task, examples, np.concatenate(logits))
        points.append(
            {
                "patience": patience,
                task.metric: round(value, 4),
                "average_layers": round(float(layers.mean()), 3),
                "layers_histogram": np.bincount(layers, minlength=model.num_exits + 1)[1:].tolist(),
            }
        )
    return {"per_classifier": [round(s, 4) for s in per_layer], "by_patience": points}


def median_ms(call, rows):
    times = []
    for row in rows:
        began = time.perf_counter()
        call(row)
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def latency(args, model, features, work):
    import numpy as np
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    from albert_tf.export import export_saved_model, export_tflite
    from albert_tf.export.early_exit import SIGNATURE, export_early_exit_tflite

    served = tf.saved_model.load(export_saved_model(model, str(work / "serving"), version=1, warmup=False))
    full_tflite = export_tflite(model, str(work / "tflite"), max_seq_length=args.seq)
    exit_tflite = export_early_exit_tflite(model, str(work / "tflite"), max_seq_length=args.seq)
    rows = [{k: v[i : i + 1] for k, v in features.items()} for i in range(args.latency_rows)]
    tf_rows = [{k: tf.constant(v) for k, v in row.items()} for row in rows]
    full = served.signatures["serving_default"]
    early = served.signatures[SIGNATURE]
    full_lite = Interpreter(model_path=full_tflite).get_signature_runner("serving_default")
    exit_lite = Interpreter(model_path=exit_tflite).get_signature_runner(SIGNATURE)
    variants = {"saved_model_full_depth": lambda row: full(**row)}
    lite_variants = {"tflite_full_depth": lambda row: full_lite(**row)}
    for patience in range(1, model.num_exits + 1):
        p, zero = tf.constant(patience), tf.constant(0.0)
        variants[f"saved_model_patience_{patience}"] = lambda row, p=p: early(**row, patience=p, threshold=zero)
        lite_p, lite_zero = np.array(patience, "int32"), np.array(0.0, "float32")
        lite_variants[f"tflite_patience_{patience}"] = lambda row, p=lite_p: exit_lite(
            **row, patience=p, threshold=lite_zero
        )
    for call in variants.values():  # warm-up: the first call traces
        call(tf_rows[0])
    for call in lite_variants.values():
        call(rows[0])
    best = {}
    for _ in range(args.rounds):  # interleaved rounds: a noisy neighbour slows every variant alike
        for name, call in variants.items():
            best[name] = min(best.get(name, float("inf")), median_ms(call, tf_rows))
        for name, call in lite_variants.items():
            best[name] = min(best.get(name, float("inf")), median_ms(call, rows))
    result = {name: round(ms, 3) for name, ms in best.items()}
    for prefix in ("saved_model", "tflite"):
        for patience in range(1, model.num_exits + 1):
            result[f"{prefix}_patience_{patience}_vs_full"] = round(
                best[f"{prefix}_patience_{patience}"] / best[f"{prefix}_full_depth"], 3
            )
    return result


def latency_by_size(args, work):
    """SavedModel batch-1 latency against layers run, for `--size_config` (random weights, zeroed heads).

    Zeroed heads give every classifier the same answer, so patience p stops
    every row after exactly p layers: how the loop's cost compares with the
    full-depth export at a size where the layers, not the per-op overhead,
    take the time. No accuracy here.
    """
    import keras
    import numpy as np
    import tensorflow as tf

    from albert_tf import AlbertBackbone
    from albert_tf.export import export_saved_model
    from albert_tf.export.early_exit import SIGNATURE
    from albert_tf.models.early_exit import AlbertEarlyExitClassifier

    keras.utils.set_random_seed(0)
    backbone = AlbertBackbone.from_albert_config(args.size_config)
    model = AlbertEarlyExitClassifier(backbone, num_classes=2)
    model.exit_classifiers.kernel.assign(np.zeros(model.exit_classifiers.kernel.shape, "float32"))
    served = tf.saved_model.load(export_saved_model(model, str(work / "size_serving"), version=1, warmup=False))
    rng = np.random.default_rng(0)
    vocab = backbone.albert_config.vocab_size
    rows = [
        {
            "input_ids": tf.constant(rng.integers(5, vocab, (1, args.seq)), tf.int32),
            "input_mask": tf.ones((1, args.seq), tf.int32),
            "segment_ids": tf.zeros((1, args.seq), tf.int32),
        }
        for _ in range(args.size_rows)
    ]
    full = served.signatures["serving_default"]
    early = served.signatures[SIGNATURE]
    num_exits = model.num_exits
    patiences = sorted({1, max(1, num_exits // 4), num_exits // 2, 3 * num_exits // 4, num_exits})
    variants = {"full_depth": lambda row: full(**row)}
    zero = tf.constant(0.0)
    for patience in patiences:
        variants[f"patience_{patience}"] = lambda row, p=tf.constant(patience): early(**row, patience=p, threshold=zero)
    for name, call in variants.items():  # warm-up; and zeroed heads stop at exactly `patience` layers
        used = call(rows[0]).get("layers_used")
        if used is not None and int(used[0]) != int(name.split("_")[-1]):
            raise RuntimeError(f"{name}: stopped after {int(used[0])} layers")
    best = {}
    for _ in range(args.rounds):
        for name, call in variants.items():
            best[name] = min(best.get(name, float("inf")), median_ms(call, rows))
    result = {"config": args.size_config, "layers": num_exits, "seq": args.seq, "rows": args.size_rows}
    result.update({f"{name}_ms": round(ms, 3) for name, ms in best.items()})
    result.update({f"{n}_vs_full": round(best[n] / best["full_depth"], 3) for n in best if n != "full_depth"})
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=os.environ.get("ALBERT_TF_DATA", str(REPO.parent / "shared" / "data")))
    parser.add_argument("--init_checkpoint", required=True, help="A pretraining output dir (run_pretraining).")
    parser.add_argument("--spm_model_file", default=None, help="Default: the checkpoint's own.")
    parser.add_argument("--tasks", default="sst-2,mrpc")
    parser.add_argument("--train_step", type=int, default=400)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--latency_rows", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work_dir", default=None, help="Default: a new temporary folder.")
    parser.add_argument("--size_config", default="configs/albert_base_v2.json", help="The `size` stage's model.")
    parser.add_argument("--size_rows", type=int, default=20)
    parser.add_argument("--stages", default=",".join(STAGES), help="Which parts to run (comma-separated).")
    args = parser.parse_args()

    from albert_tf import formats
    from albert_tf.tasks import glue

    stages = set(args.stages.split(","))
    unknown = stages - set(STAGES)
    if unknown:
        parser.error(f"--stages: unknown {sorted(unknown)}; choose from {','.join(STAGES)}")
    work = pathlib.Path(args.work_dir or tempfile.mkdtemp(prefix="bench_early_exit_"))
    results = {"seq": args.seq, "train_step": args.train_step, "work_dir": str(work), "tasks": {}}
    for name in args.tasks.split(",") if stages - {"size"} else []:
        record = work / f"{name}_results.json"
        result = json.loads(record.read_text()) if record.exists() else {}
        if "fine_tune" in stages:
            began = time.time()
            summary = fine_tune(args, name, str(work / name))
            baseline = fine_tune(args, name, str(work / f"{name}_without_early_exit"), early_exit=False)
            metric = glue.task(name, str(pathlib.Path(args.data) / "glue")).metric
            result = {
                "metric": metric,
                "without_early_exit": round(baseline["eval"][metric], 4),
                "best_step": max(summary["history"], key=lambda h: h[metric])["global_step"],
                "fine_tune_seconds": round(time.time() - began, 1),
            }
        if stages & {"curve", "latency"}:
            loaded = formats.load(str(work / name / "best"))
            task = glue.task(name, str(pathlib.Path(args.data) / "glue"))
            examples, _ = task.read("dev")
            features = glue.encode_examples(examples, loaded.tokenizer, args.seq)
            if "curve" in stages:
                result.update(dev_examples=len(examples), **curve(task, loaded.model, features, examples))
            if "latency" in stages:
                fresh = pathlib.Path(tempfile.mkdtemp(dir=work / name, prefix="latency_"))
                result["batch1_latency_ms"] = latency(args, loaded.model, features, fresh)
        record.write_text(json.dumps(result))
        results["tasks"][name] = result
        print(json.dumps(result), file=sys.stderr, flush=True)
    if "size" in stages:
        results["by_size"] = latency_by_size(args, work)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
