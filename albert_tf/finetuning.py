"""The fine-tuning loop every task shares (`albert_tf.tasks.runner` calls it).

As the original: AdamW (or LAMB) with linear warmup and linear decay over
`train_step` steps, gradients clipped to global norm 1.0 before each update
(the original's `create_optimizer`, every task), evaluation every `save_checkpoints_steps`, and the
checkpoint with the best dev metric kept (published dev numbers are this
early-stopped score) as `best/model.keras`; predictions come from it.
Training is Keras `fit` (fine-tuning needs no input-iterator checkpoint).

Example:

>>> settings = FineTuneSettings(output_dir="/tmp/out", train_step=10)
>>> settings.learning_rate, settings.optimizer
(5e-05, 'adamw')
"""

import contextlib
import dataclasses
import json
import os
from typing import Callable, Dict, Optional, Tuple

import keras
import numpy as np
import tensorflow as tf

from albert_tf import formats, memory_check, optimization, preemption, run_history
from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError
from albert_tf.formats import CheckpointError, model_directory
from albert_tf.formats.native import CONFIG_FILE, KERAS_MODEL_FILE
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.publish import staged_dir
from albert_tf.range_checks import check_ranges, check_seed
from albert_tf.tokenization import check_vocab_size, resolve_tokenizer

BEST_DIR = "best"
CLIP_NORM = 1.0  # the original's create_optimizer: tf.clip_by_global_norm(grads, 1.0)


class FineTuneError(AlbertError, RuntimeError):
    """A fine-tuning run that cannot go on; the message says why."""


@dataclasses.dataclass
class FineTuneSettings:
    """What every fine-tuning runner shares (the original's flag names); runners add their own fields."""

    output_dir: str
    albert_config_file: Optional[str] = None
    init_checkpoint: Optional[str] = None
    spm_model_file: Optional[str] = None
    vocab_file: Optional[str] = None
    do_lower_case: Optional[bool] = None  # None: the init checkpoint's saved setting, else True
    do_train: bool = True
    max_seq_length: int = 512
    train_batch_size: int = 32
    eval_batch_size: int = 8
    learning_rate: float = 5e-5
    train_step: int = 1000
    warmup_step: int = 0
    # Set (run_squad): train_step and warmup_step are derived from the number of
    # training examples by `with_epoch_schedule`, as the original run_squad_v{1,2}.
    num_train_epochs: Optional[float] = None
    warmup_proportion: float = 0.0
    save_checkpoints_steps: int = 1000
    optimizer: str = "adamw"
    dropout: float = 0.1
    seed: int = 12345
    grad_accum_steps: int = 1  # micro-batches per optimizer step (their gradients averaged)
    remat: bool = False  # recompute each layer application in the backward pass (activation memory)
    verbose: bool = True

    def __post_init__(self):
        check_ranges(
            self,
            FineTuneError,
            positive=("max_seq_length", "train_batch_size", "eval_batch_size", "learning_rate", "train_step")
            + ("save_checkpoints_steps", "grad_accum_steps", "num_train_epochs"),
            non_negative=("warmup_step",),
            fractions=("warmup_proportion", "dropout"),
        )
        check_seed(self, FineTuneError)

    @property
    def micro_batch_size(self) -> int:
        """Examples per forward pass: `train_batch_size / grad_accum_steps`."""
        if self.grad_accum_steps < 1 or self.train_batch_size % self.grad_accum_steps:
            raise FineTuneError(
                f"--train_batch_size {self.train_batch_size} must divide by --grad_accum_steps {self.grad_accum_steps}"
            )
        return self.train_batch_size // self.grad_accum_steps


def steps_from_epochs(num_examples: int, batch_size: int, epochs: float, warmup_proportion: float) -> Tuple[int, int]:
    """(train steps, warmup steps) as the original run_squad_v{1,2}.

    `int(len(train_examples) / train_batch_size * num_train_epochs)` and
    `int(num_train_steps * warmup_proportion)`: the original counts questions
    (examples), not the windows (features) actually batched.

    >>> steps_from_epochs(87599, 32, 3.0, 0.1)
    (8212, 821)
    """
    steps = int(num_examples / batch_size * epochs)
    return steps, int(steps * warmup_proportion)


def with_epoch_schedule(settings: FineTuneSettings, num_examples: int) -> FineTuneSettings:
    """`settings` with `train_step`/`warmup_step` from its epochs (unchanged when `num_train_epochs` is None)."""
    if settings.num_train_epochs is None:
        return settings
    if settings.num_train_epochs <= 0:
        raise FineTuneError(f"--num_train_epochs must be positive, got {settings.num_train_epochs}")
    if not 0.0 <= settings.warmup_proportion <= 1.0:
        raise FineTuneError(f"--warmup_proportion must be in [0, 1], got {settings.warmup_proportion}")
    steps, warmup = steps_from_epochs(
        num_examples, settings.train_batch_size, settings.num_train_epochs, settings.warmup_proportion
    )
    if steps < 1:
        raise FineTuneError(
            f"{num_examples} training examples / --train_batch_size {settings.train_batch_size} "
            f"× --num_train_epochs {settings.num_train_epochs} is less than one step"
        )
    return dataclasses.replace(settings, train_step=steps, warmup_step=warmup)


def tokenizer_for(settings: FineTuneSettings):
    """The run's tokenizer: the flags' vocabulary, else the one saved with `--init_checkpoint`."""
    model_dir = model_directory(settings.init_checkpoint) if settings.init_checkpoint else None
    return resolve_tokenizer(settings.spm_model_file, settings.vocab_file, settings.do_lower_case, model_dir)


def build_backbone(
    albert_config_file: Optional[str], init_checkpoint: Optional[str], tokenizer=None, remat: bool = False
) -> AlbertBackbone:
    """The backbone of `albert_config_file`, with the weights of `init_checkpoint` (any format we load).

    Its `vocab_size` must be `tokenizer`'s.
    """
    if init_checkpoint is None:
        if albert_config_file is None:
            raise FineTuneError("give --albert_config_file, --init_checkpoint, or both")
        backbone = AlbertBackbone.from_albert_config(albert_config_file, remat=remat)
        check_vocab_size(backbone.albert_config.vocab_size, tokenizer, albert_config_file)
        return backbone
    loaded = formats.load(init_checkpoint, albert_config_file).model
    source = getattr(loaded, "backbone", loaded)
    backbone = AlbertBackbone.from_albert_config(albert_config_file or source.albert_config, remat=remat)
    check_vocab_size(backbone.albert_config.vocab_size, tokenizer, albert_config_file or init_checkpoint)
    try:
        backbone.set_weights(source.get_weights())
    except ValueError as error:
        raise CheckpointError(f"{init_checkpoint}: does not fit {albert_config_file}: {error}") from None
    return backbone


def check_max_seq_length(
    max_seq_length: int, albert_config_file: Optional[str] = None, init_checkpoint: Optional[str] = None
) -> None:
    """Fails before any work when `--max_seq_length` exceeds the model's `max_position_embeddings`.

    The config is `albert_config_file`, else the `albert_config.json` beside
    `init_checkpoint`; with neither (a `.keras` file), the model's own check applies later.
    """
    config_file = albert_config_file
    if config_file is None and init_checkpoint is not None:
        beside = os.path.join(model_directory(init_checkpoint), CONFIG_FILE)
        config_file = beside if os.path.isfile(beside) else None
    if config_file is None:
        return
    limit = AlbertConfig.from_json_file(config_file).max_position_embeddings
    if max_seq_length > limit:
        raise FineTuneError(
            f"--max_seq_length {max_seq_length} exceeds max_position_embeddings = {limit} of {config_file}: "
            f"the model has no position embedding beyond {limit}; use --max_seq_length {limit} or less"
        )


def train_dataset(features: Dict[str, np.ndarray], labels, batch_size: int, seed: int):
    """Shuffled, repeated batches of `(features, labels)`; an array of labels is `{"logits": labels}`."""
    labels = labels if isinstance(labels, dict) else {"logits": labels}
    count = len(next(iter(labels.values())))
    if count < batch_size:
        raise FineTuneError(f"{count} training examples, fewer than --train_batch_size {batch_size}")
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    return (
        dataset.shuffle(count, seed=seed, reshuffle_each_iteration=True)
        .repeat()
        .batch(batch_size, drop_remainder=True)
        .prefetch(tf.data.AUTOTUNE)
    )


def classification_loss(labels, logits):
    return keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)


def binary_loss(labels, logits):
    """Sigmoid cross-entropy per example (SQuAD v2 answerability)."""
    return keras.ops.binary_crossentropy(keras.ops.cast(labels, "float32"), logits, from_logits=True)


def regression_loss(labels, logits):
    return keras.ops.square(logits[:, 0] - keras.ops.cast(labels, logits.dtype))


def predict_logits(model, features: Dict[str, np.ndarray], batch_size: int, output: str = "logits") -> np.ndarray:
    outputs = model.predict(features, batch_size=batch_size, verbose=0)
    return outputs[output] if output else outputs


def _save_best(model, output_dir: str, metrics: dict, tokenizer=None):
    with staged_dir(os.path.join(output_dir, BEST_DIR)) as staging:
        formats.save(model, staging, tokenizer=tokenizer)  # the model carries its tokenizer
        with open(os.path.join(staging, "eval_results.json"), "w") as f:
            json.dump(metrics, f, indent=2)


@contextlib.contextmanager
def _unread_pooler_frozen(task_model):
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
    with _unread_pooler_frozen(task_model):
        model.compile(
            optimizer=optimizer, loss=loss if isinstance(loss, dict) else {"logits": loss}, loss_weights=loss_weights
        )
        history = []
        # An earlier run's best/ (e.g. killed) is replaced only by a better evaluation.
        best = run_history.earlier_best(settings.output_dir, metric)
        if best is not None and settings.verbose:
            print(f"note: keeping the earlier best/ ({metric} {best[metric]:.4f}) until an evaluation beats it")
        run_id = run_history.new_run_id()
        interval = max(1, min(settings.save_checkpoints_steps, settings.train_step))
        step = 0
        while step < settings.train_step:
            steps = min(interval, settings.train_step - step)
            # `dataset` yields micro-batches: `accum` of them make one optimizer step.
            fit = model.fit(
                dataset,
                steps_per_epoch=steps * accum,
                epochs=1,
                shuffle=False,
                verbose=2 if settings.verbose else 0,
                callbacks=[preemption.keras_callback()],  # SIGTERM/SIGINT end fit after the current batch
            )
            kept = f"best/ of step {best['global_step']} is whole" if best else "no evaluation yet"
            preemption.raise_if_requested(f"{kept}; the same command trains again from step 0")
            step += steps
            loss_value = float(fit.history["loss"][-1])
            if not np.isfinite(loss_value):
                raise FineTuneError(f"loss became {loss_value} at step {step}; lower --learning_rate")
            metrics = {**evaluate(task_model), "global_step": step, "train_loss": loss_value}
            history.append(metrics)
            with open(os.path.join(settings.output_dir, "eval_results.txt"), "a") as f:
                f.write(json.dumps({**metrics, "run": run_id}) + "\n")
            if best is None or metrics[metric] > best[metric]:
                best = metrics
                _save_best(task_model, settings.output_dir, metrics, tokenizer)
            if settings.verbose:
                print(f"step {step}: {metric} {metrics[metric]:.4f} (best {best[metric]:.4f})", flush=True)
    return {"best": best, "history": history}


def load_best(output_dir: str) -> keras.Model:
    path = os.path.join(output_dir, BEST_DIR, KERAS_MODEL_FILE)
    if not os.path.exists(path):
        raise FineTuneError(f"{path}: no fine-tuned model yet (run with --do_train first)")
    return formats.load(path).model
