"""Fine-tunes ALBERT on SQuAD v1.1 or v2.0 and writes official-format predictions.

    python -m albert_tf.run_squad --version 1.1 --train_file train-v1.1.json --predict_file dev-v1.1.json \
        --albert_config_file albert_base/albert_config.json --spm_model_file albert_base/30k-clean.model \
        --init_checkpoint albert_base/model.ckpt-best --output_dir runs/squad1 --do_train --do_predict \
        --max_seq_length 384 --doc_stride 128 --num_train_epochs 3 --warmup_proportion 0.1 --learning_rate 5e-5

As the original, training runs `int(questions / train_batch_size * num_train_epochs)`
steps with `int(steps * warmup_proportion)` warmup; `--train_step` (and
`--warmup_step`) set the steps directly instead.

Writes `predictions.json` ({id: answer}), `nbest_predictions.json`, for v2
`null_odds.json` and the tuned `null_score_diff_threshold`, and
`eval_results.txt` / `best/` (best dev F1) when `--do_train`. The dev score is
the official evaluation's (EM and F1, same normalisation).

v2.0 trains the original's answerability head (`AlbertSpanQAv2`): the end
conditioned on the start, beam search over `start_n_top` × `end_n_top`
spans, and an answerability logit trained on `is_impossible` (loss
(start + end)/2 + 0.5·answerability). A question gets "" when its null odds
(lowest answerability logit over its windows) is at or above the threshold tuned on
dev, as the original. Predicting with a v1-head model on v2 data uses BERT's null-score rule.
The task is `albert_tf.tasks.squad.SquadTask`; the work is `albert_tf.tasks.runner`.
"""

import dataclasses
from typing import Optional

from absl import flags

from albert_tf import finetuning
from albert_tf.cli.app import run_cli
from albert_tf.cli.flags import define_finetune_flags, settings_from_flags
from albert_tf.cli.run_record import record_settings
from albert_tf.finetuning import FineTuneSettings
from albert_tf.tasks import runner, squad

FLAGS = flags.FLAGS


@dataclasses.dataclass
class SquadSettings(FineTuneSettings):
    """run_squad's flags."""

    # The original run_squad's defaults: each step is asked for.
    do_train: bool = False
    max_seq_length: int = 384
    version: str = "1.1"
    train_file: Optional[str] = None
    predict_file: Optional[str] = None
    do_predict: bool = False
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    start_n_top: int = 5
    end_n_top: int = 5


def run(settings: SquadSettings) -> dict:
    """The whole job, holding the output directory's lock; returns a summary (also `output_dir/summary.json`).

    `--do_predict` predicts and scores `--predict_file` (the original's dev evaluation).
    """
    task = squad.SquadTask(
        settings.version,
        settings.train_file,
        settings.predict_file,
        settings.doc_stride,
        settings.max_query_length,
        settings.n_best_size,
        settings.max_answer_length,
        settings.start_n_top,
        settings.end_n_top,
    )
    return runner.run(task, settings, evaluate=settings.do_predict)


def define_flags():
    defaults = SquadSettings(output_dir="")
    define_finetune_flags(defaults, head_dropout=False, schedule="epochs")
    flags.DEFINE_enum("version", defaults.version, ["1.1", "2.0"], "SQuAD version.")
    flags.DEFINE_string("train_file", None, "SQuAD JSON for training.")
    flags.DEFINE_string("predict_file", None, "SQuAD JSON to predict (and evaluate: dev).")
    flags.DEFINE_bool("do_predict", defaults.do_predict, "Predict --predict_file with the best model.")
    flags.DEFINE_integer("doc_stride", defaults.doc_stride, "Pieces between window starts.")
    flags.DEFINE_integer("max_query_length", defaults.max_query_length, "Question pieces kept.")
    flags.DEFINE_integer("n_best_size", defaults.n_best_size, "Candidates per question.")
    flags.DEFINE_integer("max_answer_length", defaults.max_answer_length, "Longest answer in pieces.")
    flags.DEFINE_integer(
        "start_n_top", defaults.start_n_top, "v2: starts kept by the answerability head's beam search."
    )
    flags.DEFINE_integer("end_n_top", defaults.end_n_top, "v2: ends kept per start.")
    flags.mark_flags_as_required(["output_dir"])


def schedule_settings(
    num_train_epochs: float, warmup_proportion: float, train_step: Optional[int], warmup_step: Optional[int]
) -> dict:
    """FineTuneSettings fields for the schedule flags: epochs as the original, or explicit steps."""
    if train_step is None:
        if warmup_step is not None:
            raise finetuning.FineTuneError("--warmup_step needs --train_step (else use --warmup_proportion)")
        return {"num_train_epochs": num_train_epochs, "warmup_proportion": warmup_proportion}
    if warmup_step is None:
        warmup_step = int(train_step * warmup_proportion)
    return {"train_step": train_step, "warmup_step": warmup_step}


def main(argv):
    del argv
    schedule = schedule_settings(FLAGS.num_train_epochs, FLAGS.warmup_proportion, FLAGS.train_step, FLAGS.warmup_step)
    for name in ("train_step", "warmup_step"):  # replaced from the epochs once the training set is read
        schedule.setdefault(name, getattr(SquadSettings, name))
    settings = settings_from_flags(SquadSettings, **schedule)
    record_settings(settings.output_dir)  # written once the run holds the lock
    runner.print_summary(run(settings))


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    run_cli(main, define_flags)


if __name__ == "__main__":
    cli()
