"""The runner every task shares: one call from settings to scores and files.

`run(task, settings)` checks everything it will read before any work (a
resume's binding to its checkpoints, the model and its config, the
vocabulary, every split's files), then holds the output directory's lock and
does, as the original runners: read and encode the dev split, fine-tune with
the best dev checkpoint kept in `best/` (with its tokenizer; without dev
data, the last step's model), score the best model on dev and write its
predictions, predict an unlabelled split (the submission file), and write
`summary.json`.

Example (a GLUE task; the same call runs any `Task`):

    from albert_tf.finetuning import runner

    from albert_tf.tasks import glue
    from albert_tf.finetuning.settings import FineTuneSettings

    summary = runner.run(
        glue.task("sst-2", "glue_data"),
        FineTuneSettings(output_dir="runs/sst2", init_checkpoint="albert_base", max_seq_length=128, train_step=100),
        predict_split="test",
    )
"""

import json
import logging
import os
from typing import Callable, Optional

import keras
import numpy as np

from albert_tf import preemption, run_plan
from albert_tf.compute import Compute, make_compute
from albert_tf.distribution import PRECISIONS
from albert_tf.finetuning import best_model, datasets, start, training
from albert_tf.finetuning.base import Encoded, Task
from albert_tf.finetuning.checkpoints import check_resume
from albert_tf.finetuning.settings import FineTuneError, FineTuneSettings
from albert_tf.finetuning.tflite_model import TFLiteTaskModel
from albert_tf.json_records import write_json
from albert_tf.locking import OutputDirLock
from albert_tf.models.task_base import label_names
from albert_tf.publish import remove_stale_staging
from albert_tf.run_layout import CHECKPOINT_DIR, SUMMARY_FILE


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
        task: what to read, encode, train, score and write (`settings.early_exit`: its early-exit form).
        settings: the runner's settings.
        evaluate: score the best model on `eval_split` and write its predictions.
        eval_split: the labelled split that picks the best checkpoint and is scored.
        predict_split: an unlabelled split to predict (GLUE's test submission), or None.

    Without `do_train`, the model is the `best/` that `output_dir` already holds, else the one
    `init_checkpoint` names (a fine-tuning output directory or its `best/`, or a `.tflite` file).
    Training without dev data (the task `has_data` no `eval_split`, and `evaluate` is off) keeps the last
    step's model as `best/`.
    """
    if not (settings.do_train or evaluate or predict_split):  # the original's rule: exit 0 doing nothing hides a typo
        raise FineTuneError("nothing to do: pass --do_train, --do_eval or --do_predict")
    compute = make_compute(settings.distribution)  # before any TF op (multi-worker collectives)
    if settings.max_seq_length is not None:  # given: checked before the model is loaded
        check_min_seq_length(task, settings)
    if settings.metric and task.metric_names() is not None:
        training.check_metric(settings.metric, task.metric_names())  # a typo fails now, not after an interval
    if settings.do_train and settings.early_stopping_patience and not reads_dev(task, settings, evaluate, eval_split):
        raise FineTuneError(f"--early_stopping_patience needs {eval_split} data to evaluate on; none is given")
    model_start = None
    if settings.do_train:
        check_resume(settings, task.binding(), compute.name)  # other labels, columns or backend: refused now
        model_start = start.for_training(settings)
    elif evaluate or predict_split:
        model_start = start.fine_tuned(settings)
        task = task.with_model_labels(saved_labels(model_start.model))  # class names map by name, not position
    settings = settings.with_max_seq_length_for(model_limit(model_start))
    check_min_seq_length(task, settings)
    if settings.early_exit:
        task = task.with_early_exit()
    if isinstance(model_start.model, TFLiteTaskModel):
        model_start.model.check_fits(task, model_start.config)  # another task's file fails before any reading
    _check_inputs(task, settings, evaluate, eval_split, predict_split)
    if settings.dry_run:
        return dry_run_plan(task, settings, model_start, evaluate, eval_split, predict_split, compute)
    # SIGTERM/SIGINT stop training after the current batch (`albert_tf.preemption`), lock released.
    # The run is accepted (its settings.json written) once a resume's whole binding is checked.
    with preemption.stop_signals(), OutputDirLock(settings.output_dir, accept=False) as lock:
        return _run(task, settings, model_start, evaluate, eval_split, predict_split, compute, lock.accept)


def reads_dev(task: Task, settings: FineTuneSettings, evaluate: bool, eval_split: str) -> bool:
    """Whether the run reads `eval_split`: to score it, or, training, to pick the best checkpoint when given."""
    return evaluate or (settings.do_train and task.has_data(eval_split))


def dry_run_plan(task, settings, model_start, evaluate, eval_split, predict_split, compute: Compute) -> dict:
    """What the run would do (`--dry_run`): each split read and encoded as the run reads it, the schedule,
    one step's memory and the checkpoint it would resume from; nothing is written. The shared plan
    (`albert_tf.run_plan`) with the task's sections."""
    from albert_tf import memory_check

    needed = [("train", True)] if settings.do_train else []
    needed += [(eval_split, False)] if reads_dev(task, settings, evaluate, eval_split) else []
    needed += [(predict_split, False)] if predict_split else []
    splits, warnings, rows = {}, [], {}
    for split, is_training in needed:
        examples, report = task.read(split)
        encoded = task.encode(split, examples, model_start.tokenizer, settings.max_seq_length, is_training)
        rows[split] = encoded.features["input_ids"]
        splits[split] = {"examples": len(examples), "rows": len(rows[split]), "skipped": report.skipped}
        if report.skipped:
            warnings.append(
                f"{report.file}: {report.skipped} of {report.rows} records skipped; first: " + report.first_problems[0]
            )
    config, replicas = model_start.config, compute.num_replicas_in_sync
    sections = {"task": task.name, "metric": settings.metric or task.metric, "splits": splits}
    sections["binding"] = task.binding()
    schedule, sequences_per_row = None, 1
    if settings.do_train:
        if not reads_dev(task, settings, evaluate, eval_split):
            warnings.append(training.no_dev_line(eval_split))
        settings = settings.with_schedule(splits["train"]["examples"])
        check_resume(settings, task.binding(), compute.name)  # a resume under other settings is refused now
        train_rows = rows["train"]
        sequences_per_row = int(np.prod(train_rows.shape[1:-1], dtype=int))  # RACE: 4 choices a row
        micro_batch = settings.train_batch_size // settings.grad_accum_steps // replicas
        memory_check.check_batch_fits(
            config,
            memory_check.parameter_count(config),
            sequences_per_row * micro_batch,
            settings.max_seq_length,
            settings.remat,
        )
        schedule = run_plan.Schedule(
            ("train_step", settings.train_step), ("warmup_step", settings.warmup_step), len(train_rows)
        )
    plan = run_plan.run_plan(
        settings,
        config,
        model_start.where,
        compute=compute,
        schedule=schedule,
        sections=sections,
        tokenizer=model_start.tokenizer,
        sequences_per_row=sequences_per_row,
        warnings=warnings,
    )
    plan["model"]["from"] = model_start.origin or f"a fresh model of {model_start.where}"
    return plan


def check_min_seq_length(task: Task, settings: FineTuneSettings) -> None:
    minimum, holds = task.min_seq_length()
    if settings.max_seq_length < minimum:
        raise FineTuneError(
            f"--max_seq_length {settings.max_seq_length}: {task.name} needs at least {minimum} ({holds})"
        )


def model_limit(model_start: start.Start) -> int:
    """The longest row the model takes: its position embeddings (a `.tflite` file: the length it was exported at)."""
    limit = model_start.config.max_position_embeddings
    if isinstance(model_start.model, TFLiteTaskModel):
        limit = model_start.model.runner.max_seq_length or limit
    return limit


def saved_labels(model):
    """The class names a fine-tuned model (Keras or a `.tflite` file) was trained with, or None."""
    if isinstance(model, TFLiteTaskModel):
        return model.runner.labels
    return label_names(model)


def _check_inputs(task: Task, settings: FineTuneSettings, evaluate: bool, eval_split: str, predict_split):
    """Every file the run will read exists, before it spends any time."""
    needed = []
    if settings.do_train:
        needed.append(("train", "to train"))
    if reads_dev(task, settings, evaluate, eval_split):
        needed.append((eval_split, "to evaluate" if evaluate else "to pick the best checkpoint"))
    if predict_split:
        needed.append((predict_split, "to predict"))
    for split, purpose in needed:
        for path in task.inputs(split):
            if not os.path.exists(path):
                raise FineTuneError(f"{path}: no such file or directory (the {split} split, read {purpose})")


def _run(
    task: Task,
    settings: FineTuneSettings,
    model_start: Optional[start.Start],
    evaluate: bool,
    eval_split: str,
    predict_split: Optional[str],
    compute: Compute,
    accept: Callable[[], None],
):
    log = print if settings.verbose else logging.info
    tokenizer = model_start.tokenizer if model_start else None
    os.makedirs(settings.output_dir, exist_ok=True)
    summary = {"task": task.name, "metric": settings.metric or task.metric}

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
        if isinstance(model, TFLiteTaskModel):  # one row at a time at its own length, as on a phone
            outputs = model.predict(data.features)
        else:
            outputs = datasets.predict(
                model,
                data.features,
                settings.eval_batch_size,
                length_grouping=settings.length_grouping,
                min_width=task.min_batch_width(),
                compiled=compute.predicts_per_shape,
            )
        return task.postprocess(data, outputs, tokenizer)

    dev = load(eval_split) if reads_dev(task, settings, evaluate, eval_split) else None
    if settings.do_train:
        keras.utils.set_random_seed(settings.seed)
        train = load("train", training=True)
        settings = settings.with_schedule(len(train.examples))
        check_resume(settings, task.binding(), compute.name)  # the steps and the length too, now known
    accept()
    # What a killed run left half-written (staging copies, TensorFlow's checkpoint temporaries).
    remove_stale_staging(settings.output_dir)
    remove_stale_staging(os.path.join(settings.output_dir, CHECKPOINT_DIR), checkpoints=True)
    if settings.do_train:
        summary["train_step"], summary["warmup_step"] = settings.train_step, settings.warmup_step
        # Built, compiled and fit under the strategy: Keras distributes `fit` over its replicas.
        with compute.scope():
            backbone = model_start.backbone(remat=settings.remat, dtype=PRECISIONS[settings.mixed_precision])
            model = task.build_model(backbone, settings.dropout)
            result = training.train(
                task,
                model,
                # A fresh dataset per call: its order is fixed by the seed, so a resumed run can skip what was used.
                lambda: datasets.train_dataset(
                    train.features,
                    train.labels,
                    settings.micro_batch_size,
                    settings.seed,
                    length_grouping=settings.length_grouping,
                    compiled=compute.compiles_every_shape(settings.jit_compile),
                ),
                settings,
                dev,
                predict,
                tokenizer,
                start_line=model_start.origin,
                compute=compute,
            )
        summary["history"] = result["history"]
        summary["best_step"] = result["best"]["global_step"] if result["best"] else None
        summary["stopped_early"] = result["stopped_early"]
        if evaluate or predict_split:
            model = best_model.load(settings.output_dir)  # the best evaluation's (without dev: the last step's)
    elif model_start is not None:
        model = model_start.model
    if evaluate:
        predictions = predict(model, dev)
        summary["eval"] = task.score(dev, predictions)
        if settings.metric:  # a task whose metric names are known only once scored: checked before anything is written
            training.check_metric(settings.metric, training.numeric_keys(summary["eval"]))
        summary["predictions"] = task.write(settings.output_dir, dev, predictions)
    if predict_split:
        data = load(predict_split)
        summary["submission"] = task.write(settings.output_dir, data, predict(model, data))
    write_json(os.path.join(settings.output_dir, SUMMARY_FILE), summary)
    return summary


def print_summary(summary: dict) -> None:
    """The CLIs' last output: the summary without the per-evaluation history."""
    print(json.dumps({k: v for k, v in summary.items() if k != "history"}, indent=2))
