"""The runner machinery every task shares: one call from settings to scores and files.

`run(task, settings)` holds the output directory's lock and does, as the
original runners: read and encode the dev split, fine-tune with the best dev
checkpoint kept in `best/` (with its tokenizer), score the best model on dev
and write its predictions, predict an unlabelled split (the submission file),
and write `summary.json`.

Example (a GLUE task; the same call runs any `Task`):

    from albert_tf.finetuning import FineTuneSettings
    from albert_tf.tasks import glue, runner

    summary = runner.run(
        glue.task("sst-2", "glue_data"),
        FineTuneSettings(output_dir="runs/sst2", init_checkpoint="albert_base", max_seq_length=128),
        predict_split="test",
    )
"""

import json
import logging
import os
from typing import Optional

import keras

from albert_tf import finetuning, preemption
from albert_tf.finetuning import FineTuneError, FineTuneSettings
from albert_tf.locking import OutputDirLock
from albert_tf.tasks.base import Encoded, Task


def run(
    task: Task,
    settings: FineTuneSettings,
    *,
    evaluate: bool = True,
    eval_split: str = "dev",
    predict_split: Optional[str] = None,
) -> dict:
    """Fine-tunes (with `settings.do_train`), evaluates and predicts `task`; returns the summary.

    Args:
        task: what to read, encode, train, score and write.
        settings: the runner's settings.
        evaluate: score the best model on `eval_split` and write its predictions.
        eval_split: the labelled split that picks the best checkpoint and is scored.
        predict_split: an unlabelled split to predict (GLUE's test submission), or None.

    Without `do_train`, the model is the one `output_dir` already holds, else
    `init_checkpoint`'s fine-tuned `best/`.
    """
    finetuning.check_max_seq_length(settings.max_seq_length, settings.albert_config_file, settings.init_checkpoint)
    minimum, holds = task.min_seq_length()
    if settings.max_seq_length < minimum:
        raise FineTuneError(
            f"--max_seq_length {settings.max_seq_length}: {task.name} needs at least {minimum} ({holds})"
        )
    # SIGTERM/SIGINT stop training after the current batch (`albert_tf.preemption`), lock released.
    with preemption.stop_signals(), OutputDirLock(settings.output_dir):
        return _run(task, settings, evaluate, eval_split, predict_split)


def _run(task: Task, settings: FineTuneSettings, evaluate: bool, eval_split: str, predict_split: Optional[str]):
    log = print if settings.verbose else logging.info
    tokenizer = finetuning.tokenizer_for(settings)
    os.makedirs(settings.output_dir, exist_ok=True)
    summary = {"task": task.name, "metric": task.metric}

    def load(split: str, training: bool = False) -> Encoded:
        examples, report = task.read(split)
        if report.skipped:
            log(
                f"{report.file}: skipped {report.skipped} of {report.rows} records; first: "
                + "; ".join(report.first_problems)
            )
        summary[f"{split}_examples"], summary[f"{split}_skipped"] = len(examples), report.skipped
        return task.encode(split, examples, tokenizer, settings.max_seq_length, training)

    def predict(model, data: Encoded):
        outputs = model.predict(data.features, batch_size=settings.eval_batch_size, verbose=0)
        return task.postprocess(data, outputs, tokenizer)

    dev = load(eval_split) if settings.do_train or evaluate else None
    if settings.do_train:
        keras.utils.set_random_seed(settings.seed)
        train = load("train", training=True)
        settings = finetuning.with_epoch_schedule(settings, len(train.examples))
        summary["train_step"], summary["warmup_step"] = settings.train_step, settings.warmup_step
        backbone = finetuning.build_backbone(
            settings.albert_config_file, settings.init_checkpoint, tokenizer, remat=settings.remat
        )
        model = task.build_model(backbone, settings.dropout)
        result = finetuning.train(
            task.training_model(model),
            finetuning.train_dataset(train.features, train.labels, settings.micro_batch_size, settings.seed),
            settings,
            task.losses(),
            lambda trained: task.score(dev, predict(trained, dev)),
            task.metric,
            loss_weights=task.loss_weights(),
            inference_model=model,
            tokenizer=tokenizer,
        )
        summary["history"] = result["history"]
    if evaluate or predict_split:
        model = finetuning.load_best(_fine_tuned_model_dir(settings))
    if evaluate:
        predictions = predict(model, dev)
        summary["eval"] = task.score(dev, predictions)
        summary["predictions"] = task.write(settings.output_dir, dev, predictions)
    if predict_split:
        data = load(predict_split)
        summary["submission"] = task.write(settings.output_dir, data, predict(model, data))
    with open(os.path.join(settings.output_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary


def _fine_tuned_model_dir(settings: FineTuneSettings) -> str:
    """Where the model to evaluate lives: this run's `best/`, else `--init_checkpoint`'s."""
    if settings.do_train or os.path.exists(os.path.join(settings.output_dir, finetuning.BEST_DIR)):
        return settings.output_dir
    if settings.init_checkpoint is None:
        raise FineTuneError(
            f"{settings.output_dir}: no fine-tuned model yet; run with --do_train, or give --init_checkpoint "
            "a fine-tuning output directory"
        )
    return settings.init_checkpoint


def print_summary(summary: dict) -> None:
    """The CLIs' last output: the summary without the per-evaluation history."""
    print(json.dumps({k: v for k, v in summary.items() if k != "history"}, indent=2))
