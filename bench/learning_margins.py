"""How short can the suite's learning tests be? Their score at every evaluation, over seeds.

Issue 49 item 3: each learning test asserts a margin it reaches reliably, in as few steps as that
takes. For each seed this runs a test's recipe once with frequent evaluations and prints, per
evaluated step, the score a test stopping there would assert on (min, mean, max over seeds):

- `sst2`: tests/conftest.py's `sst2_run` (the suite's pretrained tiny model fine-tuned on the 5,000
  SST-2 train rows, lr 3e-4, batch 32 x 64, warmup 10 %); the score is best/'s dev accuracy so far
  (the test asserts > majority 0.509 + 0.08).
- `sop`: tests/test_sop_learnable.py's corpus and recipe (two layers, lr 0.02, batch 32 x 64);
  the score is held-out sentence-order accuracy of the checkpoint at that step (the test asserts
  >= 0.95).

    ALBERT_TF_DATA=../shared/data python bench/learning_margins.py --tests sst2,sop --seeds 1,2,3,4,5 \
        [--steps 400] [--every 50] [--work_dir /tmp/learning_margins]
"""

import argparse
import json
import pathlib
import statistics
import sys

from _common import REPO, cpu_kind
from length_grouping_seeds import data_root, pretrained_tiny

from albert_tf.tokenization import SentencePieceTokenizer

sys.path.insert(0, str(REPO / "tests"))  # the SOP test's corpus writer: the same documents


def sst2_curve(seed: int, steps: int, every: int, pretrained: dict, data: pathlib.Path, work: pathlib.Path) -> dict:
    """{step: best dev accuracy up to that step} for one seed of the SST-2 learning test's recipe."""
    from albert_tf.run_classifier import ClassifierSettings, run

    summary = run(
        ClassifierSettings(
            do_train=True,
            output_dir=str(work / f"sst2-{steps}-{seed}"),
            task_name="sst-2",
            data_dir=str(data / "glue"),
            tokenizer=SentencePieceTokenizer(pretrained["spm"]),
            init_checkpoint=pretrained["run_dir"],
            max_seq_length=64,
            train_batch_size=32,
            eval_batch_size=64,
            learning_rate=3e-4,
            train_step=steps,
            warmup_step=steps // 10,
            save_checkpoints_steps=every,
            seed=seed,
            verbose=False,
        )
    )
    best, curve = 0.0, {}
    for evaluation in summary["history"]:
        best = max(best, evaluation["accuracy"])
        curve[evaluation["global_step"]] = best
    return curve


def sop_curve(seed: int, steps: int, every: int, work: pathlib.Path) -> dict:
    """{step: held-out sentence-order accuracy of that step's checkpoint} for one seed of the SOP test."""
    from test_sop_learnable import SEQ, write_corpus

    from command_helpers import run_command

    root = work / "sop"
    if not (root / "held_out" / "metadata.json").exists():
        root.mkdir(parents=True, exist_ok=True)
        write_corpus(root / "train.txt", 2000, seed=1)
        write_corpus(root / "held_out.txt", 300, seed=2)
        must(
            run_command(
                "data_prep.train_sentencepiece",
                [f"--input={root / 'train.txt'}", f"--model_prefix={root / 'spm'}", "--vocab_size=80"],
            )
        )
        for name in ("train", "held_out"):
            args = [
                f"--input_file={root / f'{name}.txt'}",
                f"--output_dir={root / name}",
                f"--spm_model_file={root / 'spm.model'}",
            ]
            args += [f"--max_seq_length={SEQ}", "--max_predictions_per_seq=10", "--short_seq_prob=0", "--dupe_factor=2"]
            must(run_command("data_prep.create_pretraining_data", args + ["--num_shards=1"]))
        config = json.loads((REPO / "configs" / "albert_tiny.json").read_text())
        config.update(vocab_size=80, num_hidden_layers=2, max_position_embeddings=SEQ)
        (root / "config.json").write_text(json.dumps(config))
    common = [f"--albert_config_file={root / 'config.json'}", f"--output_dir={work / f'sop-{steps}-{seed}'}"]
    train = [f"--input_file={root / 'train'}", f"--spm_model_file={root / 'spm.model'}", "--train_batch_size=32"]
    train += [f"--num_train_steps={steps}", f"--num_warmup_steps={steps // 10}", "--learning_rate=0.02"]
    train += [
        f"--save_checkpoints_steps={every}",
        f"--keep_checkpoint_max={steps // every}",
        f"--seed={seed}",
        "--noexport",
    ]
    must(run_command("albert_tf.run_pretraining", common + train))
    held_out = [f"--eval_file={root / 'held_out'}", "--eval_batch_size=64", "--max_eval_steps=10", "--nodo_train"]
    evaluated = must(run_command("albert_tf.run_pretraining", common + held_out))
    return {
        entry["global_step"]: entry["sentence_order_accuracy"]
        for entry in map(json.loads, evaluated.stdout.splitlines())
    }


def must(completed):
    if completed.returncode:
        raise SystemExit(completed.stderr[-3000:])
    return completed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", default="sst2,sop")
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--steps", type=int, default=0, help="0: the test's own (SST-2 400, SOP 800)")
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--work_dir", default="/tmp/learning_margins")
    args = parser.parse_args()
    data, work = data_root(), pathlib.Path(args.work_dir)
    seeds = [int(seed) for seed in args.seeds.split(",")]
    results = {"cpu_kind": cpu_kind(), "seeds": seeds}
    for test in args.tests.split(","):
        if test == "sst2":
            pretrained = pretrained_tiny(work / "pretrained", data)
            curves = [sst2_curve(s, args.steps or 400, args.every, pretrained, data, work) for s in seeds]
        else:
            curves = [sop_curve(s, args.steps or 800, args.every, work) for s in seeds]
        for seed, curve in zip(seeds, curves):
            print(json.dumps({"test": test, "seed": seed, "curve": curve}), file=sys.stderr, flush=True)
        results[test] = {
            step: {
                "min": min(c[step] for c in curves),
                "mean": round(statistics.mean(c[step] for c in curves), 4),
                "max": max(c[step] for c in curves),
            }
            for step in sorted(set.intersection(*(set(c) for c in curves)))
        }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
