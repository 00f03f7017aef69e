"""Fine-tunes ALBERT on a GLUE task, as the original `run_classifier.py`.

    python -m albert_tf.run_classifier --task_name sst-2 --data_dir glue_data \
        --albert_config_file albert_base/albert_config.json --spm_model_file albert_base/30k-clean.model \
        --init_checkpoint albert_base/model.ckpt-best --output_dir runs/sst2 \
        --do_train --do_eval --do_predict --max_seq_length 128 --train_step 20935 \
        --warmup_step 1256 --learning_rate 1e-5 --train_batch_size 32 --save_checkpoints_steps 100

Reads `data_dir/<TASK>/{train,dev,test}.tsv` (or the files directly in
`data_dir`). Writes `eval_results.txt` (one JSON line per evaluation),
`best/model.keras` (best dev metric: accuracy, Matthews corr for CoLA,
Pearson for STS-B), `dev_predictions.tsv`, and with `--do_predict` the GLUE
submission file (`SST-2.tsv`, ...: `index<TAB>prediction`). Every file the
run will read is checked before it starts. The task is `albert_tf.tasks.glue`;
the work is `albert_tf.tasks.runner`.
"""

import dataclasses

from absl import flags

from albert_tf import preemption
from albert_tf.cli.app import run_cli
from albert_tf.cli.flags import define_finetune_flags, settings_from_flags
from albert_tf.cli.run_record import record_settings
from albert_tf.tasks import glue, runner
from albert_tf.tasks.settings import FineTuneSettings


@dataclasses.dataclass
class ClassifierSettings(FineTuneSettings):
    """run_classifier's flags."""

    task_name: str = ""
    data_dir: str = ""
    # The original run_classifier's defaults: each step is asked for.
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    train_step: int = 1000
    warmup_step: int = 0


def run(settings: ClassifierSettings) -> dict:
    """The whole job, holding the output directory's lock; returns a summary (also `output_dir/summary.json`)."""
    task = glue.task(settings.task_name, settings.data_dir)
    return runner.run(task, settings, evaluate=settings.do_eval, predict_split="test" if settings.do_predict else None)


def define_flags():
    defaults = ClassifierSettings(output_dir="")
    define_finetune_flags(defaults, early_exit=True)
    flags.DEFINE_string("task_name", None, f"One of {', '.join(sorted(glue.TASKS))} (case-insensitive).")
    flags.DEFINE_string("data_dir", None, "GLUE directory (with <TASK>/train.tsv ...) or the task's own.")
    flags.DEFINE_bool("do_eval", defaults.do_eval, "Evaluate the best model on dev.")
    flags.DEFINE_bool("do_predict", defaults.do_predict, "Write the GLUE submission file for test.tsv.")
    flags.mark_flags_as_required(["task_name", "data_dir", "output_dir"])


def main(argv):
    del argv
    settings = settings_from_flags(ClassifierSettings)
    record_settings(settings.output_dir)  # written once the run holds the lock
    with preemption.stop_signals():  # the work done, a signal before the exit must not fail it
        runner.print_summary(run(settings))


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    run_cli(main, define_flags)


if __name__ == "__main__":
    cli()
