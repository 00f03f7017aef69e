"""Pretrain a small ALBERT on the available corpus, then fine-tune it on every task we have data for.

1. SentencePiece (8k) and SOP + n-gram-masked data from WikiText-2 valid+test (the
   corpus in ../shared/data), then `--pretrain_steps` LAMB steps of `--config`.
2. Fine-tune from that checkpoint (each with its runner, best dev checkpoint kept):
   SST-2, MRPC, RTE, CoLA, STS-B (GLUE train → dev), SQuAD v1.1 (the dev file's
   articles split 80/20 into train/eval), SQuAD v2.0 (the cs224n half of dev, split
   the same way), RACE (dev → test).
Prints JSON: per task the best dev score, its metric, the majority/empty baseline,
the paper's ALBERT-base score, and the wall time.

    python bench/finetune.py [--config configs/albert_tiny.json] [--pretrain_steps 3000] [--scale 1.0]
    python bench/finetune.py --init_checkpoint runs/pretrain  # skip pretraining
"""

import argparse
import collections
import json
import os
import pathlib
import tempfile
import time

from _common import REPO

from albert_tf.tokenization import SentencePieceTokenizer

# Dev scores to compare with: the README's ALBERT-base v2 row where it has the task, else its
# ALBERT-xxlarge single-model row (the only per-task GLUE numbers it gives).
PAPER = {
    "sst-2": ("v2 base", 92.9),
    "squad1.1": ("v2 base F1", 90.2),
    "squad2.0": ("v2 base F1", 82.1),
    "race": ("v2 base", 66.8),
    "mrpc": ("xxlarge", 90.9),
    "rte": ("xxlarge", 89.2),
    "cola": ("xxlarge", 71.4),
    "sts-b": ("xxlarge", 93.0),
}
# (train steps at --scale 1, learning rate): sized for albert_tiny on 2 CPU cores.
GLUE_STEPS = {"sst-2": (600, 1e-4), "mrpc": (400, 1e-4), "rte": (300, 1e-4), "cola": (600, 1e-4), "sts-b": (600, 1e-4)}
GLUE_DIRS = {"sst-2": "SST-2", "mrpc": "MRPC", "rte": "RTE", "cola": "CoLA", "sts-b": "STS-B"}


def pretrain(args, work):
    from albert_tf.pretraining.job import pretrain as run_pretraining
    from albert_tf.pretraining.settings import PretrainSettings
    from albert_tf.tokenization import SentencePieceTokenizer
    from data_prep.pipeline import Settings
    from data_prep.pipeline import run as create_data
    from data_prep.train_sentencepiece import corpus_sentences, train_sentencepiece

    text = [os.path.join(args.data, "wikitext2", f) for f in ("valid.txt", "test.txt")]
    spm = train_sentencepiece(corpus_sentences(text, "wikitext", lower=True), str(work / "spm"), vocab_size=8000)
    create_data(
        Settings(
            input_file=",".join(text),
            output_dir=str(work / "data"),
            tokenizer=SentencePieceTokenizer(spm),
            input_format="wikitext",
            max_seq_length=args.seq,
            dupe_factor=5,
            num_shards=4,
        )
    )
    config = json.loads(pathlib.Path(args.config).read_text())
    config["vocab_size"] = 8000
    (work / "albert_config.json").write_text(json.dumps(config))
    settings = PretrainSettings(
        output_dir=str(work / "pretrain"),
        input_file=str(work / "data"),
        albert_config_file=str(work / "albert_config.json"),
        train_batch_size=args.pretrain_batch,
        max_seq_length=args.seq,
        num_train_steps=args.pretrain_steps,
        num_warmup_steps=args.pretrain_steps // 10,
        learning_rate=args.pretrain_lr,
        save_checkpoints_steps=args.pretrain_steps,
        do_eval=True,
        max_eval_steps=20,
        log_every_steps=args.pretrain_steps // 5,
        verbose=False,
    )
    summary = run_pretraining(settings, tokenizer=SentencePieceTokenizer(spm))
    return str(work / "pretrain"), {k: summary.get(k) for k in ("end_step", "eval")}


def squad_split(source: pathlib.Path, work: pathlib.Path, name: str):
    """The file's articles, 80% for training and 20% for evaluation (whole articles: no leakage)."""
    data = json.loads(source.read_text(encoding="utf-8"))
    cut = int(0.8 * len(data["data"]))
    paths = []
    for part, articles in (("train", data["data"][:cut]), ("eval", data["data"][cut:])):
        path = work / f"{name}_{part}.json"
        path.write_text(json.dumps({"version": data.get("version", ""), "data": articles}))
        paths.append(str(path))
    return paths


def race_dirs(root: pathlib.Path, work: pathlib.Path) -> str:
    """RACE as the runner reads it, with the dev files as train and the test files as dev."""
    target = work / "race"
    for split, source in (("train", "dev"), ("dev", "test")):
        (target / split).mkdir(parents=True, exist_ok=True)
        for level in ("middle", "high"):
            link = target / split / level
            if not link.exists():
                link.symlink_to(root / "race" / source / level)
    return str(target)


def majority(values) -> float:
    return max(collections.Counter(values).values()) / len(values)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=os.environ.get("ALBERT_TF_DATA", str(REPO.parent / "shared" / "data")))
    parser.add_argument("--config", default=str(REPO / "configs" / "albert_tiny.json"))
    parser.add_argument("--init_checkpoint", default=None, help="A pretraining output dir: skip pretraining.")
    parser.add_argument("--spm_model_file", default=None, help="With --init_checkpoint when it has no spm.model.")
    parser.add_argument("--pretrain_steps", type=int, default=3000)
    parser.add_argument("--pretrain_batch", type=int, default=64)
    parser.add_argument("--pretrain_lr", type=float, default=0.002)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--scale", type=float, default=1.0, help="Multiplies every fine-tuning step count.")
    parser.add_argument("--tasks", default="sst-2,mrpc,rte,cola,sts-b,squad1.1,squad2.0,race")
    args = parser.parse_args()

    from albert_tf import run_classifier, run_race, run_squad
    from albert_tf.formats import model_directory
    from albert_tf.tasks import glue, race, squad
    from albert_tf.tokenization import resolve_tokenizer

    data = pathlib.Path(args.data)
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench_finetune_"))
    results = {"config": os.path.basename(args.config), "seq": args.seq, "work_dir": str(work), "tasks": {}}
    began = time.time()
    if args.init_checkpoint:
        init = args.init_checkpoint
    else:
        init, results["pretraining"] = pretrain(args, work)
        results["pretraining"]["seconds"] = round(time.time() - began)
    spm = args.spm_model_file or resolve_tokenizer(model_dir=model_directory(init)).model_file

    def settings(cls, name, steps, lr, batch=32, **task):
        steps = max(1, int(steps * args.scale))
        return cls(
            output_dir=str(work / "finetune" / name),
            tokenizer=SentencePieceTokenizer(spm),
            init_checkpoint=init,
            max_seq_length=args.seq,
            train_batch_size=batch,
            eval_batch_size=64,
            learning_rate=lr,
            train_step=steps,
            warmup_step=steps // 10,
            save_checkpoints_steps=max(1, steps // 4),
            dropout=0.0,
            verbose=False,
            do_train=True,
            **task,
        )

    for name in args.tasks.split(","):
        start = time.time()
        if name in GLUE_STEPS:
            steps, lr = GLUE_STEPS[name]
            summary = run_classifier.run(
                settings(
                    run_classifier.ClassifierSettings,
                    name,
                    steps,
                    lr,
                    task_name=name,
                    data_dir=str(data / "glue" / GLUE_DIRS[name]),
                    do_eval=True,
                )
            )
            task = glue.get_task(name)
            dev, _ = glue.read_examples(task, str(data / "glue" / GLUE_DIRS[name] / task.dev_file), "dev")
            best = max(summary["history"], key=lambda h: h[task.metric])
            entry = {"metric": task.metric, "score": round(100 * best[task.metric], 2), "steps": best["global_step"]}
            if not task.is_regression:
                entry["majority_class"] = round(100 * majority([e.label for e in dev]), 2)
        elif name.startswith("squad"):
            version = name[len("squad") :]
            source = (
                data / "squad_v1.1" / "dev-v1.1.json"
                if version == "1.1"
                else data / "squad_v2.0" / "dev-v2.0.cs224n-half.json"
            )
            train, evaluation = squad_split(source, work, name)
            summary = run_squad.run(
                squad.SquadTask(
                    version=version, train_file=train, predict_file=evaluation, doc_stride=64, max_query_length=32
                ),
                settings(run_squad.SquadSettings, name, 1500, 2e-4, batch=32, do_predict=True),
            )
            examples, _ = squad.read_examples(evaluation, is_training=False)
            entry = {
                "metric": "f1",
                "score": round(summary["eval"]["f1"], 2),
                "exact_match": round(summary["eval"]["exact_match"], 2),
                "empty_answers": round(squad.evaluate(examples, {})["f1"], 2),
            }
            if version == "2.0":
                best = max(summary["history"], key=lambda h: h["f1"])
                entry["HasAns_f1_answering_all"] = round(best["HasAns_f1_answering_all"], 2)
        elif name == "race":
            summary = run_race.run(
                race.RaceTask(data_dir=race_dirs(data, work)),
                settings(run_race.RaceSettings, name, 1000, 1e-4, batch=16),
            )
            examples, _ = race.read_examples(race_dirs(data, work), "dev", race.LEVELS)
            entry = {
                "metric": "accuracy",
                "score": round(100 * summary["eval"]["accuracy"], 2),
                "by_level": {k: round(100 * v, 2) for k, v in summary["eval"].items() if k.startswith("accuracy_")},
                "majority_class": round(100 * majority([e.label for e in examples]), 2),
            }
        else:
            parser.error(f"--tasks: unknown task {name!r}")
        entry["paper"] = dict(zip(("model", "score"), PAPER[name]))
        entry["seconds"] = round(time.time() - start)
        results["tasks"][name] = entry
        print(json.dumps({name: entry}), flush=True)
    results["seconds"] = round(time.time() - began)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
