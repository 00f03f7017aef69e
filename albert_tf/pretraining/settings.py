"""The pretraining settings (the original's flag names and defaults where it has them)."""

import dataclasses

from albert_tf.errors import AlbertError
from albert_tf.pretraining.health import HealthSettings
from albert_tf.range_checks import check_ranges, check_seed


class PretrainingError(AlbertError, RuntimeError):
    """A run that cannot start or continue; the message says why and what is kept."""


@dataclasses.dataclass
class PretrainSettings:
    """The pretraining flags that shape the run."""

    output_dir: str
    train_batch_size: int = 4096
    eval_batch_size: int = 64
    max_seq_length: int = 512
    max_predictions_per_seq: int = 20
    num_train_steps: int = 125000
    num_warmup_steps: int = 3125
    learning_rate: float = 0.00176
    poly_power: float = 1.0
    start_warmup_step: int = 0
    init_from_group0: bool = False
    optimizer: str = "lamb"
    save_checkpoints_steps: int = 5000
    keep_checkpoint_max: int = 5
    do_eval: bool = False
    max_eval_steps: int = 100
    length_grouping: bool = True  # eval batches cut to their longest row (summed metrics unchanged)
    grad_accum_steps: int = 1
    remat: bool = False
    mixed_precision: str = "float32"
    jit_compile: bool = False
    seed: int = 12345
    deterministic: bool = False
    log_every_steps: int = 10
    shuffle_buffer: int = 100  # the original's d.shuffle(buffer_size=100)
    eval_at_start: bool = False
    verify_data: bool = False
    worker_timeout_seconds: float = 1800.0  # multi-worker: no step finished for this long ends the run
    verbose: bool = True
    sentence_task: str = "sop"  # what the run means to learn; the data's metadata.json is checked against it
    on_divergence: str = "warn"  # a loss spike or accuracy collapse: warn, stop, or rollback
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
