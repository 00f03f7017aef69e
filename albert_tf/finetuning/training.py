"""The fine-tuning loop every task shares (`albert_tf.finetuning.runner` calls it).

As the original: AdamW (or LAMB) with linear warmup and linear decay over
`train_step` steps, gradients clipped to global norm 1.0 before each update
(the original's `create_optimizer`, every task), evaluation every `save_checkpoints_steps`, and the
checkpoint with the best dev metric kept (published dev numbers are this
early-stopped score) as `best/model.keras`; predictions come from it.
`--metric` names the metric that picks it (default: the task's), and
`--early_stopping_patience N` stops after N evaluations without improvement.
Without dev data (as the original's `--do_train` alone) nothing is evaluated and
`best/` is the model of the last step.

Training is Keras `fit`, one call per evaluation interval. The run shows a live bar
(`albert_tf.progress`: ETA, steps/s, the last window's loss (and accuracy) and the learning rate), one
line per evaluation below it, and writes TensorBoard scalars to `output_dir/train` and
`output_dir/eval`. After each evaluation the training state goes to
`output_dir/checkpoints` (`albert_tf.finetuning.checkpoints`): the same command resumes a
killed or preempted run from there, data position included. A stop signal (SIGTERM,
Ctrl-C) ends training after the current optimizer step and saves a checkpoint of it.
"""

import contextlib
import math
import os
import time
from typing import Any, Callable, Optional, Sequence

import keras
import numpy as np

from albert_tf import memory_check, optimization, preemption
from albert_tf.compute import Compute, make_compute
from albert_tf.finetuning import best_model, history
from albert_tf.finetuning.base import Baseline, Encoded, Task
from albert_tf.finetuning.checkpoints import FineTuneCheckpoints
from albert_tf.finetuning.metrics import is_better
from albert_tf.finetuning.settings import FineTuneError, FineTuneSettings
from albert_tf.progress import TrainingBar, summary_writer, write_scalars
from albert_tf.run_layout import BEST_DIR, EVAL_SUMMARY_DIR, TRAIN_SUMMARY_DIR

CLIP_NORM = 1.0  # the original's create_optimizer: tf.clip_by_global_norm(grads, 1.0)
TRAIN_ACCURACY = "accuracy"  # the bar's and TensorBoard's name for the training window's accuracy
LOG_WINDOW = 50  # steps per logging window (bar values, TensorBoard's train scalars); at most the eval interval


@contextlib.contextmanager
def unread_pooler_frozen(task_model):
    """Freezes the pooler while training a head that never reads it, then restores it.

    No gradient reaches it (Keras would warn every step); left as loaded, as in the original.
    """
    pooler = task_model.backbone.pooler
    was_trainable = pooler.trainable
    pooler.trainable = was_trainable and task_model.reads_pooled_output
    try:
        yield
    finally:
        pooler.trainable = was_trainable


def _logged_name(logs: dict, name: str) -> str:
    """The key Keras logs `name` under (a metric of one output may carry the output's name first)."""
    return name if name in logs else next(key for key in logs if key.endswith("_" + name))


class _Progress(keras.callbacks.Callback):
    """Counts the micro-batches of one `fit` call, draws the bar, writes the train scalars every window,
    and ends `fit` after the optimizer step in which a stop signal arrived."""

    def __init__(
        self, bar: TrainingBar, writer, first_step: int, last_step: int, accum: int, window: int, optimizer, compute
    ):
        super().__init__()
        self.compute = compute
        self.bar, self.writer, self.accum, self.window = bar, writer, accum, window
        self.first_step, self.last_step = first_step, last_step
        self.optimizer = optimizer
        self.batches = 0
        self.values = {}
        self._mark = (0, {}, time.perf_counter())  # (batches, their windowed sums, time) at the window's start

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1
        if self.batches % self.accum:
            return  # within an optimizer step: a signal waits for its end (the accumulated gradient)
        step = self.first_step + self.batches // self.accum
        if step % self.window == 0 or step == self.last_step:
            # Keras logs the mean since this fit call began: the window's mean comes from the sums' difference.
            sums = {name: float(logs[_logged_name(logs, name)]) * self.batches for name in self.bar.windowed}
            marked_batches, marked_sums, marked_time = self._mark
            batches = self.batches - marked_batches
            self.values = {name: (total - marked_sums.get(name, 0.0)) / batches for name, total in sums.items()}
            self.compute.sync_fit_state(self.model)  # JAX's fit holds the state outside the variables
            self.values["lr"] = float(self.optimizer.learning_rate)
            self.values["steps/s"] = batches // self.accum / max(time.perf_counter() - marked_time, 1e-9)
            write_scalars(self.writer, step, self.values)
            self._mark = (self.batches, sums, time.perf_counter())
        self.bar.update(step, self.values)
        if preemption.requested():
            self.model.stop_training = True

    @property
    def steps(self) -> int:
        return self.batches // self.accum


def train(
    task: Task,
    model: keras.Model,
    dataset,
    settings: FineTuneSettings,
    dev: Encoded,
    predict: Callable[[keras.Model, Encoded], Any],
    tokenizer=None,
    *,
    start_line: Optional[str] = None,
    compute: Optional[Compute] = None,
) -> dict:
    """Trains `task`'s `model`; every `save_checkpoints_steps` evaluates on `dev`, keeps the best in `best/`
    and checkpoints.

    The task gives the rest: the model trained (`training_model`, when training wires it differently,
    as SQuAD v2's answerability head), losses and their weights, the metric that picks `best/`
    (`settings.metric` overrides it; checked against `metric_names` when the task knows them, else at
    the first evaluation), the score, a trivial predictor's dev score (`baseline`, shown with every
    evaluation and warned about if not beaten), whether the bar shows the training accuracy, and the
    binding (`binding()`: name, labels, columns) under which a resume is accepted.

    `dataset` is a function returning the training batches (a fresh `tf.data.Dataset` whose order is
    fixed by the seed: a resumed run skips the batches already used), or a dataset itself.
    `predict(model, dev)` is the runner's: the model's predictions on `dev`, which `task.score` scores.
    `dev` None (no dev data): nothing is evaluated, and `best/` is the model of the last step.
    `tokenizer`'s vocabulary (`spm.model` or `vocab.txt`) is saved beside the best model.
    `start_line` says what the weights start from (printed unless the run resumes). `compute`: where the
    run computes (the runner's; default: `settings.distribution` on the backend Keras runs on).

    An earlier run's `best/` in `output_dir` is kept until an evaluation beats its
    score; each line of `eval_results.txt` names the `run` that wrote it.

    Returns `{"best": metrics of the best evaluation (maybe an earlier run's), "history": [...],
    "stopped_early": bool}`.
    """
    compute = compute or make_compute(settings.distribution)
    training_model = task.training_model(model)
    backbone = model.backbone
    sequences_per_example = int(np.prod(training_model.input["input_ids"].shape[1:-1], dtype=int))  # RACE: 4 choices
    memory_check.check_batch_fits(
        backbone.albert_config,
        model.count_params(),
        settings.micro_batch_size * sequences_per_example,
        settings.max_seq_length,
        backbone.remat,
    )
    if settings.train_step is None:
        raise FineTuneError("no --train_step: resolve the schedule first (FineTuneSettings.with_schedule)")
    metric = settings.metric or task.metric
    metric_names = task.metric_names()
    if metric_names is not None:
        check_metric(metric, metric_names)
    baseline = task.baseline(dev) if dev is not None else None
    train_accuracy = task.train_accuracy()
    os.makedirs(settings.output_dir, exist_ok=True)
    say = print if settings.verbose else (lambda line: None)
    accum = settings.grad_accum_steps
    optimizer = optimization.create_optimizer(
        settings.optimizer,
        settings.learning_rate,
        settings.train_step,
        settings.warmup_step,
        clip_norm=CLIP_NORM,
        grad_accum_steps=accum,
    )
    if settings.mixed_precision == "float16":  # float16 gradients underflow without loss scaling
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    accuracy = keras.metrics.SparseCategoricalAccuracy(name=TRAIN_ACCURACY)
    train_metrics = {"logits": [accuracy]} if train_accuracy else None
    with unread_pooler_frozen(model):
        training_model.compile(
            optimizer=optimizer,
            loss=task.losses(),
            loss_weights=task.loss_weights(),
            metrics=train_metrics,
            jit_compile=compute.step_jit_compile(settings.jit_compile),  # on JAX always: uncompiled, very slow
        )
        optimizer.build(training_model.trainable_variables)  # its slots must exist before a checkpoint restores them
        checkpoints = FineTuneCheckpoints(settings, task.binding(), training_model, optimizer, compute)
        resumed = checkpoints.restore()
        # Optimizer updates: with accumulation Keras counts micro-batches and divides (`iterations`).
        step = int(keras.ops.convert_to_numpy(optimizer.iterations))
        # An earlier run's best/ (e.g. killed) is replaced only by a better evaluation.
        best = history.earlier_best(settings.output_dir, metric if dev is not None else None)
        if dev is None:
            say(no_dev_line())
        if resumed:
            kept = ""
            if best is not None and dev is not None:
                kept = f"; best/ kept: {metric} {best[metric]:.4f} of step {best.get('global_step')}"
            say(f"resumed from {resumed} at step {step}{kept}")
        else:
            if start_line:
                say(start_line)
            if best is not None and dev is not None:
                say(f"note: keeping the earlier best/ ({metric} {best[metric]:.4f}) until an evaluation beats it")
        run_id = history.new_run_id()
        interval = max(1, min(settings.save_checkpoints_steps, settings.train_step))
        window = max(1, min(LOG_WINDOW, interval))
        windowed = ("loss", TRAIN_ACCURACY) if train_accuracy else ("loss",)
        bar = TrainingBar(settings.train_step, windowed, window, settings.verbose)
        train_writer = summary_writer(settings.output_dir, TRAIN_SUMMARY_DIR)
        eval_writer = summary_writer(settings.output_dir, EVAL_SUMMARY_DIR) if dev is not None else None
        evaluations = []
        patience = settings.early_stopping_patience
        stopped_early = bool(patience) and int(checkpoints.stale_evaluations.numpy()) >= patience
        if step >= settings.train_step or stopped_early:
            say(
                f"already at step {step} (of --train_step {settings.train_step}"
                + (", stopped early" if stopped_early else "")
                + "): nothing to train"
            )
        else:
            bar.update(step)
        while step < settings.train_step and not stopped_early:
            target = min((step // interval + 1) * interval, settings.train_step)  # the next evaluation's step
            batches = dataset() if callable(dataset) else dataset
            progress = _Progress(bar, train_writer, step, target, accum, window, optimizer, compute)
            # `dataset` yields micro-batches: `accum` of them make one optimizer step.
            fit = training_model.fit(
                batches.skip(step * accum),  # the ones an earlier (killed) run of this output_dir used
                steps_per_epoch=(target - step) * accum,
                epochs=1,
                shuffle=False,
                verbose=0,
                callbacks=[progress],
            )
            step += progress.steps
            if step < target:  # a stop signal ended fit early
                saved = checkpoints.save(step)
                _raise_preempted(saved, best)
            loss_value = float(fit.history["loss"][-1])
            if not math.isfinite(loss_value):
                raise FineTuneError(f"loss became {loss_value} at step {step}; lower --learning_rate")
            if dev is None:
                if step == settings.train_step:  # published before its checkpoint: a kill between retrains to it
                    best = {"global_step": step, "train_loss": loss_value}
                    best_model.save(model, settings.output_dir, best, tokenizer)
                saved = checkpoints.save(step)
                if step < settings.train_step and preemption.requested():
                    _raise_preempted(saved, best)
                continue
            metrics = {**task.score(dev, predict(model, dev)), "global_step": step, "train_loss": loss_value}
            if not evaluations and metric not in numeric_keys(metrics):
                saved = checkpoints.save(step)  # the steps trained are kept: the same command with a metric resumes
                check_metric(metric, numeric_keys(metrics), f"; checkpoint of step {step} saved ({saved})")
            if baseline is not None:
                metrics[baseline.key] = baseline.value
            evaluations.append(metrics)
            history.record_evaluation(settings.output_dir, metrics, run_id)
            write_scalars(eval_writer, step, metrics)
            if best is None or is_better(metrics[metric], best[metric], metric):
                best = metrics
                best_model.save(model, settings.output_dir, metrics, tokenizer)
                checkpoints.stale_evaluations.assign(0)
            else:
                checkpoints.stale_evaluations.assign_add(1)
            bar.say(eval_line(step, metrics, metric, best, baseline))
            stale = int(checkpoints.stale_evaluations.numpy())
            stopped_early = bool(patience) and stale >= patience and step < settings.train_step
            saved = checkpoints.save(step)
            if stopped_early:
                say(
                    f"early stopping at step {step}: no better {metric} in {stale} evaluations "
                    f"(--early_stopping_patience {patience}); best/ of step {best['global_step']} kept"
                )
            elif step < settings.train_step and preemption.requested():  # a signal during the evaluation
                _raise_preempted(saved, best)
    bar.say("\n".join(end_table(best, metric, baseline, settings.output_dir)))
    return {"best": best, "history": evaluations, "stopped_early": stopped_early}


def _raise_preempted(checkpoint: str, best: Optional[dict]) -> None:
    kept = f"best/ of step {best['global_step']} is whole" if best else "no evaluation yet, no best/"
    preemption.raise_preempted(f"checkpoint of step {checkpoint.rsplit('-', 1)[-1]} saved ({checkpoint}); {kept}")


def check_metric(metric: str, names: Sequence[str], kept: str = "") -> None:
    """Fails with the choices when `metric` is not one the task computes (`kept`: what was saved first)."""
    if metric not in names:
        raise FineTuneError(f"--metric {metric}: the task computes {', '.join(sorted(names))}{kept}")


def numeric_keys(scores: dict) -> list:
    """The keys of `scores` that a `--metric` can name (numbers, not counts' companions like lists)."""
    return [key for key, value in scores.items() if isinstance(value, (int, float)) and not isinstance(value, bool)]


def eval_line(step: int, metrics: dict, metric: str, best: dict, baseline: Optional[Baseline] = None) -> str:
    """One evaluation: the selecting metric, the best so far, and the trivial predictor's score where known."""
    line = f"step {step}: {metric} {metrics[metric]:.4f} (best {best[metric]:.4f} at step {best['global_step']})"
    others = [f"{k} {v:.4f}" for k, v in metrics.items() if k in _SHOWN and k != metric]
    if others:
        line += "; " + ", ".join(others)
    if baseline is not None:
        line += f"; {baseline.label} {baseline.value:.4f}"
    return line


_SHOWN = ("accuracy", "f1", "macro_f1", "matthews_corr", "exact_match", "pearson", "mse")


def no_dev_line(split: str = "dev") -> str:
    """What a training run without dev data says once."""
    return f"no {split} data given: best/ will be the model of the last step (nothing evaluates the others)"


def end_table(best: Optional[dict], metric: str, baseline: Optional[Baseline], output_dir: str) -> list:
    """The run's last lines: the best evaluation, the trivial baseline (and a health warning), best/'s path."""
    if best is None:
        return ["no evaluation: no best/"]
    if metric not in best:  # trained without dev data
        model = os.path.join(output_dir, BEST_DIR)
        return [f"best/ is the model of the last step ({best.get('global_step')}, no dev data): {model}"]
    rows = [("best step", str(best.get("global_step"))), (f"best {metric}", f"{best[metric]:.4f}")]
    if baseline is not None:
        rows.append((baseline.label, f"{baseline.value:.4f} ({baseline.meaning})"))
    rows.append(("model", os.path.join(output_dir, BEST_DIR)))
    width = max(len(name) for name, _ in rows)
    lines = [f"{name:<{width}}  {value}" for name, value in rows]
    warning = baseline_warning(best, baseline)
    return lines + ([warning] if warning else [])


def baseline_warning(best: dict, baseline: Optional[Baseline]) -> Optional[str]:
    """`health: ...` when the best evaluation is no better than the trivial predictor (`Task.baseline`)."""
    score = best.get(baseline.metric) if baseline is not None else None
    if not isinstance(score, (int, float)) or is_better(score, baseline.value, baseline.metric):
        return None
    where = "at" if abs(score - baseline.value) < 1e-9 else ("worse than" if baseline.metric == "mse" else "below")
    if baseline.key == "majority_baseline":
        return (
            f"health: the best accuracy {score:.4f} is {where} the majority-class share {baseline.value:.4f}: the "
            "model may predict one class for everything; try another --learning_rate or more --train_step, and "
            "look at macro_f1 / matthews_corr (--metric)"
        )
    return (
        f"health: the best {baseline.metric} {score:.4f} is {where} the {baseline.name}'s {baseline.value:.4f} "
        f"({baseline.meaning}): the model has learnt nothing the dev set rewards yet; try another "
        "--learning_rate or more --train_step"
    )
