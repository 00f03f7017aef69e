"""What every fine-tuning run is told (the original's flag names), and its step schedule, in one place.

The schedule: an explicit `train_step` wins (with `warmup_step`, else
`warmup_proportion` of it); without one, the steps come from
`num_train_epochs` over the training examples, as the original
run_squad_v{1,2} (`steps_from_epochs`). The runners' defaults differ
(run_squad: 3 epochs, 10 % warmup; run_classifier and run_race: steps), the
rule does not.

Example:

>>> settings = FineTuneSettings(output_dir="/tmp/out", train_step=10)
>>> settings.learning_rate, settings.optimizer
(5e-05, 'adamw')
>>> FineTuneSettings(output_dir="/tmp/out", train_step=300, num_train_epochs=3.0, warmup_proportion=0.1).schedule(1000)
(300, 30)
"""

import dataclasses
from typing import Optional, Tuple

from albert_tf.compute import check_jit_compile
from albert_tf.distribution import (
    PRECISIONS,
    STRATEGIES,
    DistributionSettings,
    jit_compile_option,
    mixed_precision_option,
    strategy_option,
    tpu_option,
)
from albert_tf.errors import AlbertError
from albert_tf.options import option
from albert_tf.range_checks import check_ranges, check_seed
from albert_tf.tokenization.base import Tokenizer

EPOCH_OPTIONS = ("num_train_epochs", "warmup_proportion")  # options only the runners that schedule by epochs take
MULTI_WORKER = "multi_worker"  # pretraining's; Keras `fit` cannot run it on our inputs


class FineTuneError(AlbertError, RuntimeError):
    """A fine-tuning run that cannot go on; the message says why."""


@dataclasses.dataclass
class FineTuneSettings:
    """What every fine-tuning runner shares; a runner's own options live on its `Task`."""

    output_dir: str = option(help="Where results and the best model go.")
    albert_config_file: Optional[str] = option(None, "ALBERT config (default: the one beside --init_checkpoint).")
    init_checkpoint: Optional[str] = option(None, "Google's TF1 checkpoint, our model dir, run dir or .keras.")
    # A vocabulary given by flag, resolved at the command's edge (`resolve_tokenizer`); None: the model's own.
    tokenizer: Optional[Tokenizer] = None
    do_lower_case: Optional[bool] = None  # for the model's own vocabulary; None: its saved setting
    do_train: bool = option(True, "Fine-tune.")
    # None (the commands, when the flag is not given): this class's default, lowered to the model's
    # max_position_embeddings where that is smaller (`with_max_seq_length_for`).
    max_seq_length: Optional[int] = option(
        512, "Tokens per example (not given: this default, or the model's max_position_embeddings where smaller)."
    )
    train_batch_size: int = option(32, "Training batch.")
    eval_batch_size: int = option(8, "Eval/predict batch.")
    learning_rate: float = option(5e-5, "Peak learning rate.")
    train_step: Optional[int] = option(None, "Optimizer steps.")  # None: from num_train_epochs
    warmup_step: Optional[int] = option(None, "Linear warmup steps.")  # None: warmup_proportion of the steps
    # Flags of the runners that schedule by epochs (run_squad); the others exclude them (EPOCH_OPTIONS).
    num_train_epochs: Optional[float] = option(None, "Epochs over the training examples (the original's count).")
    warmup_proportion: float = option(0.0, "Fraction of the steps with linear warmup.")
    save_checkpoints_steps: int = option(1000, "Evaluate (and keep the best) every N steps.")
    optimizer: str = option("adamw", "As the original.", choices=("adamw", "lamb"))
    dropout: float = option(0.1, "Head dropout (0.1 in the original; the README's v2 RACE: 0).")
    seed: int = option(12345, "Seed of head init and data order.")
    grad_accum_steps: int = option(
        1,
        "Micro-batches per optimizer step (their gradients averaged: the same update as one --train_batch_size "
        "batch, less memory).",
    )
    remat: bool = option(
        False,
        "Recompute each layer application in the backward pass: much less activation memory for some extra "
        "compute (large models on small GPUs).",
    )
    early_exit: bool = option(
        False, "Train a classifier after every layer (PABEE): served with a patience, it stops early (README)."
    )
    metric: Optional[str] = option(
        None,
        "The dev metric that picks best/: any the task computes (classification: accuracy, macro_f1, "
        "matthews_corr, f1 of label 1 for two classes; regression: pearson, spearman, mse, lower better). "
        "Default: the task's.",
    )
    early_stopping_patience: int = option(
        0, "Stop after this many evaluations without a better --metric (0: train all steps); best/ is kept."
    )
    length_grouping: bool = option(
        True,
        "Batch rows of similar length and cut each batch to its longest row (training under --jit_compile "
        "or a TPU: to the shortest of a few lengths that holds it); same outputs, much less padding. "
        "--nolength_grouping pads every row to --max_seq_length.",
    )
    mixed_precision: str = mixed_precision_option()  # best/ is saved in float32
    strategy: str = strategy_option()  # multi_worker is refused (see __post_init__)
    tpu: Optional[str] = tpu_option()
    jit_compile: Optional[bool] = jit_compile_option()  # None: the backend's default (Compute.step_jit_compile)
    dry_run: bool = option(
        False,
        "Check the flags, the model, every file (read and tokenized as the run reads them), memory and a "
        "resume's settings; print the plan (examples, steps, epochs, memory, warnings) as JSON; train nothing.",
    )
    verbose: bool = True

    def __post_init__(self):
        check_ranges(
            self,
            FineTuneError,
            positive=("max_seq_length", "train_batch_size", "eval_batch_size", "learning_rate", "train_step")
            + ("save_checkpoints_steps", "grad_accum_steps", "num_train_epochs"),
            non_negative=("warmup_step", "early_stopping_patience"),
            fractions=("warmup_proportion", "dropout"),
        )
        check_seed(self, FineTuneError)
        if self.mixed_precision not in PRECISIONS:
            raise FineTuneError(f"--mixed_precision must be one of {sorted(PRECISIONS)}, got {self.mixed_precision!r}")
        if self.strategy not in STRATEGIES:
            raise FineTuneError(f"--strategy must be one of {list(STRATEGIES)}, got {self.strategy!r}")
        if self.strategy == MULTI_WORKER:
            raise FineTuneError(
                "--strategy multi_worker: fine-tuning runs on one machine: on TensorFlow, Keras 3 `fit` cannot "
                "take dict inputs under MultiWorkerMirroredStrategy (keras-team/keras#20329: its reduce of the "
                "first batch fails); on --backend jax, `fit` would split each batch over the processes, but the "
                "dev evaluation, best/ model and checkpoints are one process's work (not built for several); use "
                "--strategy mirrored for the GPUs of one machine (--backend jax uses them all by default); "
                "pretraining, with its own loop, runs on many"
            )
        if self.train_step is None and self.warmup_step is not None:
            raise FineTuneError("--warmup_step needs --train_step (else use --warmup_proportion)")
        check_jit_compile(self.jit_compile)

    def with_max_seq_length_for(self, limit: int) -> "FineTuneSettings":
        """These settings with `max_seq_length` set where it is None: the class's default, at most `limit`."""
        if self.max_seq_length is not None:
            return self
        default = next(field.default for field in dataclasses.fields(self) if field.name == "max_seq_length")
        return dataclasses.replace(self, max_seq_length=min(default, limit))

    @property
    def distribution(self) -> DistributionSettings:
        """`--strategy` and `--tpu`, for `compute.make_compute`."""
        return DistributionSettings(strategy=self.strategy, tpu=self.tpu)

    @property
    def micro_batch_size(self) -> int:
        """Examples per forward pass: `train_batch_size / grad_accum_steps`."""
        if self.grad_accum_steps < 1 or self.train_batch_size % self.grad_accum_steps:
            raise FineTuneError(
                f"--train_batch_size {self.train_batch_size} must divide by --grad_accum_steps {self.grad_accum_steps}"
            )
        return self.train_batch_size // self.grad_accum_steps

    def schedule(self, num_examples: int) -> Tuple[int, int]:
        """(train steps, warmup steps) for `num_examples` training examples: explicit steps win over epochs."""
        if self.train_step is not None:
            warmup = self.warmup_step if self.warmup_step is not None else int(self.train_step * self.warmup_proportion)
            return self.train_step, warmup
        if self.num_train_epochs is None:
            raise FineTuneError("give --train_step or --num_train_epochs")
        steps, warmup = steps_from_epochs(
            num_examples, self.train_batch_size, self.num_train_epochs, self.warmup_proportion
        )
        if steps < 1:
            raise FineTuneError(
                f"{num_examples} training examples / --train_batch_size {self.train_batch_size} "
                f"× --num_train_epochs {self.num_train_epochs} is less than one step"
            )
        return steps, warmup

    def with_schedule(self, num_examples: int) -> "FineTuneSettings":
        """These settings with `train_step` and `warmup_step` resolved (`schedule`)."""
        train_step, warmup_step = self.schedule(num_examples)
        if (train_step, warmup_step) == (self.train_step, self.warmup_step):
            return self
        return dataclasses.replace(self, train_step=train_step, warmup_step=warmup_step)


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
