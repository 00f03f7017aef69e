"""Fine-tunes ALBERT on RACE, as the original `run_race.py`.

    python -m albert_tf.run_race --data_dir RACE --albert_config_file albert_base/albert_config.json \
        --spm_model_file albert_base/30k-clean.model --init_checkpoint albert_base/model.ckpt-best \
        --output_dir runs/race --do_train --do_eval --max_seq_length 512 --max_qa_length 128 \
        --train_step 12000 --warmup_step 1000 --learning_rate 1e-5 --dropout 0 --save_checkpoints_steps 100

Reads `data_dir/{train,dev,test}/{middle,high}/` (see `albert_tf.tasks.race`).
Writes `eval_results.txt`, `best/model.keras` (best dev accuracy), and
`<split>_predictions.json` (`{id: "A".."D"}`); reports accuracy for middle,
high and all.
"""

import dataclasses
import json
import logging
import os
from typing import Tuple

import keras
import numpy as np
from absl import flags

from albert_tf import finetuning
from albert_tf.cli.app import run_cli
from albert_tf.cli.flags import define_finetune_flags, settings_from_flags
from albert_tf.errors import AlbertError
from albert_tf.finetuning import FineTuneSettings
from albert_tf.locking import OutputDirLock
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.tasks import race

FLAGS = flags.FLAGS


@dataclasses.dataclass
class RaceSettings(FineTuneSettings):
    """run_race's flags (`levels` from --high_only / --middle_only)."""

    data_dir: str = ""
    do_eval: bool = True
    eval_split: str = "dev"
    max_qa_length: int = 128
    levels: Tuple[str, ...] = race.LEVELS


def run(settings: RaceSettings) -> dict:
    """The whole job, holding the output directory's lock; returns a summary (also `output_dir/summary.json`)."""
    finetuning.check_max_seq_length(settings.max_seq_length, settings.albert_config_file, settings.init_checkpoint)
    with OutputDirLock(settings.output_dir):
        return _run(settings)


def _run(settings: RaceSettings) -> dict:
    s = settings
    data_dir, eval_split, levels = s.data_dir, s.eval_split, s.levels
    log = print if settings.verbose else logging.info
    tokenizer = finetuning.tokenizer_for(s)
    os.makedirs(settings.output_dir, exist_ok=True)
    summary = {"task": "race", "levels": list(levels)}

    def read(split):
        examples, report = race.read_examples(data_dir, split, levels)
        if report["skipped"]:
            log(f"{split}: skipped {report['skipped']} records; first: " + "; ".join(report["first_problems"]))
        summary[f"{split}_skipped"] = report["skipped"]
        return examples, race.encode_examples(examples, tokenizer, settings.max_seq_length, s.max_qa_length)

    eval_examples, eval_features = read(eval_split)

    def evaluate(model):
        return race.accuracy_by_level(
            eval_examples, finetuning.predict_logits(model, eval_features, settings.eval_batch_size)
        )

    if s.do_train:
        keras.utils.set_random_seed(settings.seed)
        train_examples, features = read("train")
        labels = np.array([e.label for e in train_examples], "int32")
        backbone = finetuning.build_backbone(s.albert_config_file, s.init_checkpoint, tokenizer, remat=s.remat)
        model = AlbertMultipleChoice(backbone, num_choices=len(race.ANSWERS), dropout=settings.dropout)
        dataset = finetuning.train_dataset(features, labels, settings.micro_batch_size, settings.seed)
        summary["history"] = finetuning.train(
            model, dataset, settings, finetuning.classification_loss, evaluate, "accuracy", tokenizer=tokenizer
        )["history"]
    if s.do_eval:
        model = finetuning.load_best(settings.output_dir)
        logits = finetuning.predict_logits(model, eval_features, settings.eval_batch_size)
        summary["eval"] = race.accuracy_by_level(eval_examples, logits)
        with open(os.path.join(settings.output_dir, f"{eval_split}_predictions.json"), "w") as f:
            json.dump({e.example_id: race.ANSWERS[p] for e, p in zip(eval_examples, logits.argmax(-1))}, f, indent=1)
    with open(os.path.join(settings.output_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary


def define_flags():
    define_finetune_flags(
        RaceSettings(output_dir="", learning_rate=1e-5, train_step=12000, warmup_step=1000, save_checkpoints_steps=100),
        do_train=True,
    )
    flags.DEFINE_alias("dropout_prob", "dropout")  # the original run_race's name
    flags.DEFINE_string("data_dir", None, "RACE directory with train/dev/test × middle/high.")
    flags.DEFINE_bool("do_eval", True, "Evaluate the best model on --eval_split (on by default, as the original).")
    flags.DEFINE_enum("eval_split", "dev", ["dev", "test"], "Split evaluated (and used to pick the best).")
    flags.DEFINE_bool("high_only", False, "Only RACE-H.")
    flags.DEFINE_bool("middle_only", False, "Only RACE-M.")
    flags.DEFINE_integer("max_qa_length", 128, "Question+option tokens kept (the last ones).")
    flags.mark_flags_as_required(["data_dir", "output_dir"])


def main(argv):
    del argv
    if FLAGS.high_only and FLAGS.middle_only:
        raise AlbertError("--high_only and --middle_only exclude each other")
    levels = ("high",) if FLAGS.high_only else ("middle",) if FLAGS.middle_only else race.LEVELS
    summary = run(settings_from_flags(RaceSettings, levels=levels))
    print(json.dumps({k: v for k, v in summary.items() if k != "history"}, indent=2))


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    run_cli(main, define_flags)


if __name__ == "__main__":
    cli()
