"""Fine-tunes ALBERT on a GLUE task, as the original `run_classifier.py`.

    python -m albert_tf.run_classifier --task_name sst-2 --data_dir glue_data \
        --albert_config_file albert_base/albert_config.json --spm_model_file albert_base/30k-clean.model \
        --init_checkpoint albert_base/model.ckpt-best --output_dir runs/sst2 \
        --do_train --do_eval --do_predict --max_seq_length 128 --train_step 20935 \
        --warmup_step 1256 --learning_rate 1e-5 --train_batch_size 32 --save_checkpoints_steps 100

Reads `data_dir/<TASK>/{train,dev,test}.tsv` (or the files directly in
`data_dir`); or your own data instead of a GLUE task:

    python -m albert_tf.run_classifier --train_file reviews_train.csv --dev_file reviews_dev.csv \
        --text_column review --label_column sentiment --init_checkpoint albert_base --output_dir runs/reviews \
        --do_train --do_eval

(TSV, CSV or JSON lines; labels found in the training file, or `--labels`;
`--task_type regression` for a number to predict: `albert_tf.tasks.file_task`).
The label names are saved in the model and printed by `predict` and the exports.

Writes `eval_results.txt` (one JSON line per evaluation),
`best/model.keras` (best dev metric: accuracy, Matthews corr for CoLA,
Pearson for STS-B), `dev_predictions.tsv`, and with `--do_predict` the GLUE
submission file (`SST-2.tsv`, ...: `index<TAB>prediction`). Every file the
run will read is checked before it starts. The task is `albert_tf.tasks.glue`;
the work is `albert_tf.finetuning.runner`.
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
from albert_tf.finetuning.settings import EPOCH_OPTIONS, FineTuneSettings
from albert_tf.options import option
from albert_tf.tasks import file_task, glue
from albert_tf.tasks.file_task import FileOptions


@dataclasses.dataclass
class ClassifierSettings(FineTuneSettings):
    """run_classifier's flags."""

    task_name: str = option("", f"One of {', '.join(sorted(glue.TASKS))} (case-insensitive).")
    data_dir: str = option("", "GLUE directory (with <TASK>/train.tsv ...) or the task's own.")
    # The original run_classifier's defaults: each step is asked for.
    do_train: bool = False
    do_eval: bool = option(False, "Evaluate the best model on dev.")
    do_predict: bool = option(False, "Write the GLUE submission file for test.tsv.")
    train_step: int = 1000
    warmup_step: int = 0


def run(settings: ClassifierSettings, files: FileOptions = FileOptions()) -> dict:
    """The whole job, holding the output directory's lock; returns a summary (also `output_dir/summary.json`).

    `files`: your own data instead of the GLUE task `settings.task_name` names.
    """
    task = classifier_task(settings, files)
    from albert_tf.finetuning import runner  # TensorFlow and Keras load here, after the flags

    return runner.run(task, settings, evaluate=settings.do_eval, predict_split="test" if settings.do_predict else None)


def classifier_task(settings: ClassifierSettings, files: FileOptions) -> glue.TsvTask:
    """The GLUE task `--task_name`, or the task of `--train_file`/`--dev_file`/`--test_file`."""
    own_files = files.given
    if own_files and settings.task_name:
        raise file_task.DataFileError("--task_name and --train_file/--dev_file/--test_file: give one or the other")
    if not own_files:
        if not settings.task_name or not settings.data_dir:
            raise file_task.DataFileError(
                "--task_name and --data_dir (a GLUE task), or --train_file/--dev_file/--test_file (your own data)"
            )
        return glue.task(settings.task_name, settings.data_dir)
    return files.task()


def define_flags():
    define_finetune_flags(ClassifierSettings(output_dir=""), exclude=EPOCH_OPTIONS)
    define_option_flags(FileOptions)  # your own files instead of a GLUE task
    flags.mark_flags_as_required(["output_dir"])


def main(argv):
    del argv
    settings = finetune_settings_from_flags(ClassifierSettings)
    files = task_from_flags(FileOptions)
    record_settings(settings.output_dir)  # written once the run holds the lock and is accepted
    with preemption.stop_signals():  # the work done, a signal before the exit must not fail it
        from albert_tf.finetuning import runner

        runner.print_summary(run(settings, files))


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    run_cli(main, define_flags)


if __name__ == "__main__":
    cli()
