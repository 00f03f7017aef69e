"""The fine-tuning loop every task shares (`albert_tf.tasks.runner` calls it).

As the original: AdamW (or LAMB) with linear warmup and linear decay over
`train_step` steps, gradients clipped to global norm 1.0 before each update
(the original's `create_optimizer`, every task), evaluation every `save_checkpoints_steps`, and the
checkpoint with the best dev metric kept (published dev numbers are this
early-stopped score) as `best/model.keras`; predictions come from it.
Training is Keras `fit` (fine-tuning needs no input-iterator checkpoint).

A stop signal (SIGTERM, Ctrl-C) ends training after the current batch; `best/`
is whole, and the same command trains again from step 0, keeping that `best/`
until an evaluation beats it (`albert_tf.tasks.history`).
"""

import contextlib
import os
from typing import Callable, Optional

import keras
import numpy as np

from albert_tf import memory_check, optimization, preemption
from albert_tf.tasks import best_model, history
from albert_tf.tasks.settings import FineTuneError, FineTuneSettings

# What a stopped run's next start does: fine-tuning has no checkpoint to resume from.
RESTART = "the same command trains again from step 0 and keeps that best/ until an evaluation beats it"
CLIP_NORM = 1.0  # the original's create_optimizer: tf.clip_by_global_norm(grads, 1.0)


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


class _BatchCounter(keras.callbacks.Callback):
    """Counts the batches `fit` ran (a stop signal ends it early)."""

    def __init__(self):
        super().__init__()
        self.batches = 0

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1


def train(
    model,
    dataset,
    settings: FineTuneSettings,
    loss,
    evaluate: Callable[[keras.Model], dict],
    metric: str,
    loss_weights: Optional[dict] = None,
    inference_model: Optional[keras.Model] = None,
    tokenizer=None,
) -> dict:
    """Trains `model`; every `save_checkpoints_steps` evaluates and keeps the best in `best/`.

    `loss` is one function (for the `logits` output) or `{output: function}`.
    `inference_model` (default `model`) is what is evaluated and saved, when
    training uses a differently wired model on the same layers. `tokenizer`'s
    vocabulary (`spm.model` or `vocab.txt`) is saved beside the best model.

    An earlier run's `best/` in `output_dir` (a killed run) is kept until an evaluation beats its
    score; each line of `eval_results.txt` names the `run` that wrote it.

    Returns `{"best": metrics of the best evaluation (maybe the earlier run's), "history": [...]}`.
    """
    task_model = inference_model or model
    backbone = task_model.backbone
    sequences_per_example = int(np.prod(model.input["input_ids"].shape[1:-1], dtype=int))  # RACE: 4 choices
    memory_check.check_batch_fits(
        backbone.albert_config,
        task_model.count_params(),
        settings.micro_batch_size * sequences_per_example,
        settings.max_seq_length,
        backbone.remat,
    )
    if settings.train_step is None:
        raise FineTuneError("no --train_step: resolve the schedule first (FineTuneSettings.with_schedule)")
    os.makedirs(settings.output_dir, exist_ok=True)
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
    with unread_pooler_frozen(task_model):
        model.compile(
            optimizer=optimizer,
            loss=loss if isinstance(loss, dict) else {"logits": loss},
            loss_weights=loss_weights,
            jit_compile=settings.jit_compile,
        )
        evaluations = []
        # An earlier run's best/ (e.g. killed) is replaced only by a better evaluation.
        best = history.earlier_best(settings.output_dir, metric)
        if best is not None and settings.verbose:
            print(f"note: keeping the earlier best/ ({metric} {best[metric]:.4f}) until an evaluation beats it")
        run_id = history.new_run_id()
        interval = max(1, min(settings.save_checkpoints_steps, settings.train_step))
        step = 0
        while step < settings.train_step:
            steps = min(interval, settings.train_step - step)
            counter = _BatchCounter()
            # `dataset` yields micro-batches: `accum` of them make one optimizer step.
            fit = model.fit(
                dataset,
                steps_per_epoch=steps * accum,
                epochs=1,
                shuffle=False,
                verbose=2 if settings.verbose else 0,
                callbacks=[preemption.keras_callback(), counter],  # SIGTERM/SIGINT end fit after the current batch
            )
            if counter.batches < steps * accum and preemption.requested():  # a signal in the last batch: done
                kept = f"best/ of step {best['global_step']} is whole" if best else "no evaluation yet, no best/"
                preemption.raise_preempted(kept, RESTART)
            step += steps
            loss_value = float(fit.history["loss"][-1])
            if not np.isfinite(loss_value):
                raise FineTuneError(f"loss became {loss_value} at step {step}; lower --learning_rate")
            metrics = {**evaluate(task_model), "global_step": step, "train_loss": loss_value}
            evaluations.append(metrics)
            history.record_evaluation(settings.output_dir, metrics, run_id)
            if best is None or metrics[metric] > best[metric]:
                best = metrics
                best_model.save(task_model, settings.output_dir, metrics, tokenizer)
            if settings.verbose:
                print(f"step {step}: {metric} {metrics[metric]:.4f} (best {best[metric]:.4f})", flush=True)
    return {"best": best, "history": evaluations}
