"""Fine-tunes ALBERT on SQuAD v1.1 or v2.0 and writes official-format predictions.

    python -m albert_tf.run_squad --version 1.1 --train_file train-v1.1.json --predict_file dev-v1.1.json \
        --albert_config_file albert_base/albert_config.json --spm_model_file albert_base/30k-clean.model \
        --init_checkpoint albert_base/model.ckpt-best --output_dir runs/squad1 --do_train --do_predict \
        --max_seq_length 384 --doc_stride 128 --num_train_epochs 3 --warmup_proportion 0.1 --learning_rate 5e-5

As the original, training runs `int(questions / train_batch_size * num_train_epochs)`
steps with `int(steps * warmup_proportion)` warmup; `--train_step` (and
`--warmup_step`) set the steps directly instead, whatever `--num_train_epochs` says.

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
The task is `albert_tf.tasks.squad.SquadTask` (its fields are the task's flags); the work is
`albert_tf.finetuning.runner`.
"""

import dataclasses
from typing import Optional

from absl import flags

from albert_tf import preemption
from albert_tf.cli.app import run_cli
from albert_tf.cli.flags import (
    define_finetune_flags,
    define_option_flags,
    finetune_settings_from_flags,
    task_from_flags,
)
from albert_tf.cli.run_record import record_settings
from albert_tf.finetuning.settings import FineTuneSettings
from albert_tf.options import option
from albert_tf.tasks.squad import SquadTask

FLAGS = flags.FLAGS


@dataclasses.dataclass
class SquadSettings(FineTuneSettings):
    """run_squad's run flags (the task's own are `SquadTask`'s fields)."""

    # The original run_squad's defaults: each step is asked for; 3 epochs, 10 % warmup.
    do_train: bool = False
    do_predict: bool = option(False, "Predict --predict_file with the best model.")
    max_seq_length: Optional[int] = 384
    train_step: Optional[int] = option(None, "Optimizer steps; given, wins over --num_train_epochs.")
    warmup_step: Optional[int] = option(None, "Warmup steps (default: --warmup_proportion).")
    num_train_epochs: Optional[float] = 3.0
    warmup_proportion: float = 0.1


def run(task: SquadTask, settings: SquadSettings) -> dict:
    """The whole job, holding the output directory's lock; returns a summary (also `output_dir/summary.json`).

    `--do_predict` predicts and scores `--predict_file` (the original's dev evaluation).
    """
    from albert_tf.finetuning import runner  # TensorFlow and Keras load here, after the flags

    return runner.run(task, settings, evaluate=settings.do_predict)


def define_flags():
    # The span heads have no dropout, and SQuAD's early exit is not built.
    define_finetune_flags(SquadSettings(output_dir=""), exclude=("dropout", "early_exit"))
    define_option_flags(SquadTask)
    flags.mark_flags_as_required(["output_dir"])


def from_flags() -> "tuple[SquadTask, SquadSettings]":
    """The task and the settings the parsed flags say."""
    return task_from_flags(SquadTask), finetune_settings_from_flags(SquadSettings)


def main(argv):
    del argv
    task, settings = from_flags()
    record_settings(settings.output_dir)  # written once the run holds the lock and is accepted
    with preemption.stop_signals():  # the work done, a signal before the exit must not fail it
        from albert_tf.finetuning import runner

        runner.print_summary(run(task, settings))


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    run_cli(main, define_flags)


if __name__ == "__main__":
    cli()
