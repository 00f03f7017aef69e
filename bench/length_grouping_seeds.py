"""Does length grouping change what fine-tuning learns? Dev metric over seeds, grouped vs fixed padding.

Issue 39 item 2: training with `--length_grouping` (the default) must reach the same dev metric as
`--nolength_grouping` (every row at `max_seq_length`) within seed spread. Builds the test suite's
pretrained tiny model (tests/conftest.py's `pretrained_tiny` recipe: a 4,000-piece SentencePiece
model on WikiText-2 valid, SOP data of length 64, albert_tiny pretrained 800 LAMB steps at lr
0.005), then fine-tunes it on each GLUE set (the SST-2 learning test's recipe: lr 3e-4, batch 32,
400 steps, warmup 40, an evaluation every 50) for each seed, both ways, and prints one JSON object:
per task and way the best dev metric of each seed, their mean and standard deviation, and the
training wall time.

    ALBERT_TF_DATA=../shared/data python bench/length_grouping_seeds.py [--seeds 1,2,3] \
        [--tasks sst-2,cola,mrpc,sts-b] [--work_dir /tmp/lg_seeds]
"""

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

from _common import REPO, cpu_kind

from albert_tf.tokenization import SentencePieceTokenizer

PRETRAIN_SEQ = 64


def data_root() -> pathlib.Path:
    configured = os.environ.get("ALBERT_TF_DATA")
    return pathlib.Path(configured) if configured else REPO.parent / "shared" / "data"


def pretrained_tiny(work: pathlib.Path, data: pathlib.Path) -> dict:
    """The suite's pretrained tiny model (built once in `work`): its run directory and vocabulary."""
    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import PretrainSettings
    from albert_tf.tokenization import load_tokenizer
    from data_prep.pipeline import Settings, run
    from data_prep.train_sentencepiece import corpus_sentences, train_sentencepiece

    done = work / "pretrained.json"
    if done.exists():
        return json.loads(done.read_text())
    work.mkdir(parents=True, exist_ok=True)
    valid = str(data / "wikitext2" / "valid.txt")
    spm = train_sentencepiece(corpus_sentences([valid], "wikitext", lower=True), str(work / "wikitext4k"), 4000)
    run(
        Settings(
            input_file=valid,
            output_dir=str(work / "data"),
            tokenizer=SentencePieceTokenizer(spm),
            input_format="wikitext",
            max_seq_length=PRETRAIN_SEQ,
            dupe_factor=1,
            num_shards=3,
        )
    )
    config = json.loads((REPO / "configs" / "albert_tiny.json").read_text())
    (work / "albert_config.json").write_text(json.dumps({**config, "vocab_size": 4000}))
    settings = PretrainSettings(
        output_dir=str(work / "pretrained"),
        input_file=str(work / "data"),
        albert_config_file=str(work / "albert_config.json"),
        train_batch_size=32,
        max_seq_length=PRETRAIN_SEQ,
        num_train_steps=800,
        num_warmup_steps=80,
        learning_rate=0.005,
        save_checkpoints_steps=1000,
        do_eval=False,
        log_every_steps=100,
        verbose=False,
    )
    pretrain(settings, tokenizer=load_tokenizer(spm))
    result = {"run_dir": str(work / "pretrained"), "spm": str(work / "pretrained" / "final" / "spm.model")}
    done.write_text(json.dumps(result))
    return result


def fine_tune(task: str, seed: int, grouping: bool, pretrained: dict, data: pathlib.Path, output_dir: str) -> dict:
    from albert_tf.run_classifier import ClassifierSettings, run

    settings = ClassifierSettings(
        do_train=True,
        do_eval=True,
        output_dir=output_dir,
        task_name=task,
        data_dir=str(data / "glue"),
        tokenizer=SentencePieceTokenizer(pretrained["spm"]),
        init_checkpoint=pretrained["run_dir"],
        max_seq_length=128,
        train_batch_size=32,
        eval_batch_size=64,
        learning_rate=3e-4,
        train_step=400,
        warmup_step=40,
        save_checkpoints_steps=50,
        seed=seed,
        length_grouping=grouping,
        verbose=False,
    )
    began = time.perf_counter()
    summary = run(settings)
    result = {
        "best": summary["eval"][summary["metric"]],
        "metric": summary["metric"],
        "seconds": time.perf_counter() - began,
    }
    # One line per run as it ends: a long sweep cut short keeps what it measured.
    print(json.dumps({"task": task, "seed": seed, "grouped": grouping, **result}), file=sys.stderr, flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--tasks", default="sst-2,cola,mrpc,sts-b")
    parser.add_argument("--work_dir", default="/tmp/length_grouping_seeds")
    args = parser.parse_args()
    data, work = data_root(), pathlib.Path(args.work_dir)
    pretrained = pretrained_tiny(work, data)
    seeds = [int(seed) for seed in args.seeds.split(",")]
    results = {"cpu_kind": cpu_kind(), "seeds": seeds, "tasks": {}}
    for task in args.tasks.split(","):
        ways = {}
        for grouping in (True, False):
            runs = [
                fine_tune(task, seed, grouping, pretrained, data, str(work / "runs" / f"{task}-{grouping}-{seed}"))
                for seed in seeds
            ]
            scores = [r["best"] for r in runs]
            ways["grouped" if grouping else "fixed"] = {
                "metric": runs[0]["metric"],
                "scores": scores,
                "mean": statistics.mean(scores),
                "stdev": statistics.stdev(scores) if len(scores) > 1 else 0.0,
                "train_eval_seconds": [round(r["seconds"], 1) for r in runs],
            }
        results["tasks"][task] = ways
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
