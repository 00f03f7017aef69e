"""The pretraining settings (the original's flag names and defaults where it has them)."""

import dataclasses
from typing import Optional

from albert_tf.compute import check_jit_compile
from albert_tf.distribution import jit_compile_option, mixed_precision_option
from albert_tf.errors import AlbertError
from albert_tf.options import option
from albert_tf.pretraining.health import DIVERGENCE_ACTIONS, SENTENCE_TASKS, HealthSettings
from albert_tf.range_checks import check_ranges, check_seed


class PretrainingError(AlbertError, RuntimeError):
    """A run that cannot start or continue; the message says why and what is kept."""


@dataclasses.dataclass
class PretrainSettings:
    """The pretraining flags that shape the run."""

    output_dir: str = option(help="Checkpoints, summaries, final model and SavedModels.")
    train_batch_size: int = option(4096, "Global batch (all replicas, all micro-steps).")
    eval_batch_size: int = option(64, "Eval batch.")
    # The data's lengths (metadata.json) unless their own flags, which default to None, say otherwise.
    max_seq_length: int = 512
    max_predictions_per_seq: int = 20
    num_train_steps: int = option(125000, "Optimizer steps.")
    num_warmup_steps: int = option(3125, "Linear warmup steps.")
    learning_rate: float = option(0.00176, "Peak learning rate.")
    poly_power: float = option(1.0, "Polynomial decay power.")
    start_warmup_step: int = option(0, "The step warmup starts from (LR < 0 before it, as the original).")
    init_from_group0: bool = option(
        False, "With --init_checkpoint: groups it lacks start from its group 0 (grow num_hidden_groups)."
    )
    optimizer: str = option("lamb", "As the original (no bias correction).", choices=("lamb", "adamw"))
    save_checkpoints_steps: int = option(5000, "Checkpoint every N steps.")
    keep_checkpoint_max: int = option(5, "Checkpoints kept.")
    do_eval: bool = option(False, "Evaluate at each checkpoint and at the end; keep the best.")
    max_eval_steps: int = option(100, "Eval batches.")
    length_grouping: bool = option(
        True,
        "Cut each eval batch to its longest row (on a TPU: to the shortest of a few lengths that holds it); "
        "same metrics, less padding. --nolength_grouping evaluates every row at --max_seq_length.",
    )
    grad_accum_steps: int = option(1, "Micro-batches per optimizer step.")
    remat: bool = option(
        False, "Recompute each layer application in the backward pass (less activation memory, more compute)."
    )
    mixed_precision: str = mixed_precision_option()
    jit_compile: Optional[bool] = jit_compile_option()  # None: the backend's default (Compute.step_jit_compile)
    seed: int = option(12345, "Seed of weights init and data order.")
    deterministic: bool = option(
        False,
        "Deterministic ops: TensorFlow's (the input pipeline; the step on TensorFlow) and, on Keras' JAX backend, "
        "XLA's deterministic GPU ops in the compiled step (bit-reproducible on CPU).",
    )
    log_every_steps: int = option(10, "Progress/TensorBoard interval.")
    shuffle_buffer: int = 100  # the original's d.shuffle(buffer_size=100)
    eval_at_start: bool = False
    verify_data: bool = option(False, "Check every shard's sha256 against metadata.json first.")
    worker_timeout_seconds: float = option(
        1800.0,
        "--strategy=multi_worker: end the run (naming the unreachable workers) when no training step has "
        "finished for this long; more than the slowest step + checkpoint + eval. 0: off.",
    )
    verbose: bool = True
    sentence_task: str = option(
        "sop",
        "The sentence task the run means to learn; a warning at start when the data's metadata.json says the other.",
        choices=SENTENCE_TASKS,
    )
    on_divergence: str = option(
        "warn",
        "A loss spike or accuracy collapse: warn; stop; or rollback (restore the last good checkpoint and skip "
        "the batches after it, at most 3 times, then stop).",
        choices=DIVERGENCE_ACTIONS,
    )
    health: HealthSettings = dataclasses.field(default_factory=HealthSettings)

    def __post_init__(self):
        check_ranges(
            self,
            PretrainingError,
            positive=("train_batch_size", "eval_batch_size", "max_seq_length", "max_predictions_per_seq")
            + ("num_train_steps", "learning_rate", "poly_power", "save_checkpoints_steps", "keep_checkpoint_max")
            + ("max_eval_steps", "grad_accum_steps", "log_every_steps", "shuffle_buffer"),
            non_negative=("num_warmup_steps", "start_warmup_step"),
        )
        check_seed(self, PretrainingError)
        check_jit_compile(self.jit_compile)
