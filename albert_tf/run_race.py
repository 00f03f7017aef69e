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

import json
import logging
import os
import sys
from typing import Optional

import numpy as np

from albert_tf import finetuning
from albert_tf.finetuning import FineTuneSettings
from albert_tf.tasks import race


def run(data_dir: str, settings: FineTuneSettings, spm_model_file: Optional[str], albert_config_file: Optional[str] = None,
        init_checkpoint: Optional[str] = None, do_train: bool = True, do_eval: bool = True,
        eval_split: str = "dev", max_qa_length: int = 128, levels=race.LEVELS, do_lower_case: bool = True,
        vocab_file: Optional[str] = None) -> dict:
    """The whole job; returns a summary (also `output_dir/summary.json`)."""
    import keras

    from albert_tf.models.multiple_choice import AlbertMultipleChoice
    from albert_tf.tokenization import load_tokenizer

    finetuning.check_max_seq_length(settings.max_seq_length, albert_config_file, init_checkpoint)
    log = print if settings.verbose else logging.info
    tokenizer = load_tokenizer(spm_model_file, vocab_file, do_lower_case)
    os.makedirs(settings.output_dir, exist_ok=True)
    summary = {"task": "race", "levels": list(levels)}

    def read(split):
        examples, report = race.read_examples(data_dir, split, levels)
        if report["skipped"]:
            log(f"{split}: skipped {report['skipped']} records; first: " + "; ".join(report["first_problems"]))
        summary[f"{split}_skipped"] = report["skipped"]
        return examples, race.encode_examples(examples, tokenizer, settings.max_seq_length, max_qa_length)

    eval_examples, eval_features = read(eval_split)

    def evaluate(model):
        return race.accuracy_by_level(eval_examples, finetuning.predict_logits(model, eval_features,
                                                                               settings.eval_batch_size))

    if do_train:
        keras.utils.set_random_seed(settings.seed)
        train_examples, features = read("train")
        labels = np.array([e.label for e in train_examples], "int32")
        model = AlbertMultipleChoice(finetuning.build_backbone(albert_config_file, init_checkpoint),
                                     num_choices=len(race.ANSWERS), dropout=settings.dropout)
        dataset = finetuning.train_dataset(features, labels, settings.train_batch_size, settings.seed)
        summary["history"] = finetuning.train(model, dataset, settings, finetuning.classification_loss, evaluate,
                                              "accuracy", tokenizer=tokenizer)["history"]
    if do_eval:
        model = finetuning.load_best(settings.output_dir)
        logits = finetuning.predict_logits(model, eval_features, settings.eval_batch_size)
        summary["eval"] = race.accuracy_by_level(eval_examples, logits)
        with open(os.path.join(settings.output_dir, f"{eval_split}_predictions.json"), "w") as f:
            json.dump({e.example_id: race.ANSWERS[p] for e, p in zip(eval_examples, logits.argmax(-1))}, f,
                      indent=1)
    with open(os.path.join(settings.output_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary


def define_flags():
    from absl import flags

    d = FineTuneSettings(output_dir="", learning_rate=1e-5, train_step=12000, warmup_step=1000,
                         save_checkpoints_steps=100)
    flags.DEFINE_string("data_dir", None, "RACE directory with train/dev/test × middle/high.")
    flags.DEFINE_string("albert_config_file", None, "ALBERT config (default: the one beside --init_checkpoint).")
    flags.DEFINE_string("spm_model_file", None, "SentencePiece model (or --vocab_file).")
    flags.DEFINE_string("vocab_file", None, "WordPiece vocab.txt (Chinese models), instead of --spm_model_file.")
    flags.DEFINE_string("init_checkpoint", None, "Google's TF1 checkpoint, our model dir, run dir or .keras.")
    flags.DEFINE_string("output_dir", None, "Where results and the best model go.")
    flags.DEFINE_bool("do_train", False, "Fine-tune on train/.")
    flags.DEFINE_bool("do_eval", False, "Evaluate the best model on --eval_split.")
    flags.DEFINE_enum("eval_split", "dev", ["dev", "test"], "Split evaluated (and used to pick the best).")
    flags.DEFINE_bool("high_only", False, "Only RACE-H.")
    flags.DEFINE_bool("middle_only", False, "Only RACE-M.")
    flags.DEFINE_bool("do_lower_case", True, "Lowercase.")
    flags.DEFINE_integer("max_seq_length", d.max_seq_length, "Tokens per option.")
    flags.DEFINE_integer("max_qa_length", 128, "Question+option tokens kept (the last ones).")
    flags.DEFINE_integer("train_batch_size", d.train_batch_size, "Training batch (questions).")
    flags.DEFINE_integer("eval_batch_size", d.eval_batch_size, "Eval batch.")
    flags.DEFINE_float("learning_rate", d.learning_rate, "Peak learning rate.")
    flags.DEFINE_integer("train_step", d.train_step, "Optimizer steps.")
    flags.DEFINE_integer("warmup_step", d.warmup_step, "Linear warmup steps.")
    flags.DEFINE_integer("save_checkpoints_steps", d.save_checkpoints_steps, "Evaluate (and keep the best) every N.")
    flags.DEFINE_enum("optimizer", d.optimizer, ["adamw", "lamb"], "As the original.")
    flags.DEFINE_float("dropout", d.dropout, "Head dropout (the README's v2 setting is 0).")
    flags.DEFINE_integer("seed", d.seed, "Seed of head init and data order.")
    flags.mark_flags_as_required(["data_dir", "output_dir"])


def main(argv):
    from absl import flags

    from albert_tf.checkpoints import CheckpointError
    from albert_tf.config import ConfigError
    from albert_tf.model_files import ModelFileError
    from albert_tf.tokenization import TokenizerError

    del argv
    FLAGS = flags.FLAGS
    if FLAGS.high_only and FLAGS.middle_only:
        sys.exit("error: --high_only and --middle_only exclude each other")
    levels = ("high",) if FLAGS.high_only else ("middle",) if FLAGS.middle_only else race.LEVELS
    settings = FineTuneSettings(
        output_dir=FLAGS.output_dir, max_seq_length=FLAGS.max_seq_length, train_batch_size=FLAGS.train_batch_size,
        eval_batch_size=FLAGS.eval_batch_size, learning_rate=FLAGS.learning_rate, train_step=FLAGS.train_step,
        warmup_step=FLAGS.warmup_step, save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        optimizer=FLAGS.optimizer, dropout=FLAGS.dropout, seed=FLAGS.seed)
    try:
        summary = run(FLAGS.data_dir, settings, FLAGS.spm_model_file, FLAGS.albert_config_file, FLAGS.init_checkpoint,
                      FLAGS.do_train, FLAGS.do_eval, FLAGS.eval_split, FLAGS.max_qa_length, levels,
                      FLAGS.do_lower_case, FLAGS.vocab_file)
    except (race.RaceDataError, finetuning.FineTuneError, CheckpointError, ConfigError, ModelFileError,
            TokenizerError) as error:
        sys.exit(f"error: {error}")
    print(json.dumps({k: v for k, v in summary.items() if k != "history"}, indent=2))


if __name__ == "__main__":
    from absl import app

    define_flags()
    app.run(main)
