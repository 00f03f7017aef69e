"""Fine-tunes ALBERT on RACE, as the original `run_race.py`.

    python -m albert_tf.run_race --data_dir RACE --albert_config_file albert_base/albert_config.json \
        --spm_model_file albert_base/30k-clean.model --init_checkpoint albert_base/model.ckpt-best \
        --output_dir runs/race --do_train --do_eval --max_seq_length 512 --max_qa_length 128 \
        --train_step 12000 --warmup_step 1000 --learning_rate 1e-5 --dropout 0 --save_checkpoints_steps 100

Reads `data_dir/{train,dev,test}/{middle,high}/` (see `albert_tf.tasks.race`).
Writes `eval_results.txt`, `best/model.keras` (best dev accuracy), and
`<split>_predictions.json` (`{id: "A".."D"}`); reports accuracy for middle,
high and all. The work is `albert_tf.finetuning.runner`.
"""

import dataclasses

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
from albert_tf.errors import AlbertError
from albert_tf.finetuning.settings import EPOCH_OPTIONS, FineTuneSettings
from albert_tf.options import option
from albert_tf.tasks import race

FLAGS = flags.FLAGS


@dataclasses.dataclass
class RaceSettings(FineTuneSettings):
    """run_race's run flags (the task's own are `RaceTask`'s fields)."""

    # The original run_race's defaults: it trains and evaluates unless told otherwise.
    do_train: bool = True
    do_eval: bool = option(True, "Evaluate the best model on --eval_split (as the original).")
    learning_rate: float = 1e-5
    train_step: int = 12000
    warmup_step: int = 1000
    save_checkpoints_steps: int = 100
    eval_split: str = option("dev", "Split evaluated (and used to pick the best).", choices=("dev", "test"))


def run(task: race.RaceTask, settings: RaceSettings) -> dict:
    """The whole job, holding the output directory's lock; returns a summary (also `output_dir/summary.json`)."""
    from albert_tf.finetuning import runner  # TensorFlow and Keras load here, after the flags

    return runner.run(task, settings, evaluate=settings.do_eval, eval_split=settings.eval_split)


def define_flags():
    define_finetune_flags(RaceSettings(output_dir=""), exclude=EPOCH_OPTIONS)
    define_option_flags(race.RaceTask)
    flags.DEFINE_alias("dropout_prob", "dropout")  # the original run_race's name
    flags.DEFINE_bool("high_only", False, "Only RACE-H.")
    flags.DEFINE_bool("middle_only", False, "Only RACE-M.")
    flags.mark_flags_as_required(["data_dir", "output_dir"])


def from_flags() -> "tuple[race.RaceTask, RaceSettings]":
    """The task and the settings the parsed flags say."""
    if FLAGS.high_only and FLAGS.middle_only:
        raise AlbertError("--high_only and --middle_only exclude each other")
    levels = ("high",) if FLAGS.high_only else ("middle",) if FLAGS.middle_only else race.LEVELS
    return task_from_flags(race.RaceTask, levels=levels), finetune_settings_from_flags(RaceSettings)


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
