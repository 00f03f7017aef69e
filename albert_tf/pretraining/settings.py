"""The pretraining settings (the original's flag names and defaults where it has them): the run's inputs and
how it trains, as `FineTuneSettings` are a fine-tuning run's.

The sequence lengths default to the data's (its `metadata.json`); `for_data` fills them in.

Example:

>>> settings = PretrainSettings(output_dir="/tmp/run", input_file="data/pretrain", albert_config_file="c.json")
>>> settings.check_inputs()  # what the settings alone can say is missing: nothing here
>>> settings.max_seq_length is None  # the data's, once known
True
>>> PretrainSettings(output_dir="/tmp/run", albert_config_file="c.json").check_inputs()
Traceback (most recent call last):
...
albert_tf.pretraining.settings.PretrainingError: --input_file required (data_prep's output)
"""

import dataclasses
from typing import Optional

from albert_tf.compute import check_jit_compile
from albert_tf.distribution import jit_compile_option, mixed_precision_option
from albert_tf.errors import AlbertError
from albert_tf.options import option
from albert_tf.pretraining.health import DIVERGENCE_ACTIONS, SENTENCE_TASKS, HealthSettings
from albert_tf.range_checks import check_ranges, check_seed
from albert_tf.shard_set import PretrainingData


class PretrainingError(AlbertError, RuntimeError):
    """A run that cannot start or continue; the message says why and what is kept."""


@dataclasses.dataclass
class PretrainSettings:
    """A pretraining run: its inputs and outputs, and the flags that shape it."""

    output_dir: str = option(help="Checkpoints, summaries, final model and SavedModels.")
    input_file: Optional[str] = option(
        None,
        "data_prep output directories, globs or shard files, comma-separated. With no flag at all the demo runs.",
    )
    eval_file: Optional[str] = option(None, "Eval shards (default: --input_file, as the original).")
    albert_config_file: Optional[str] = option(None, "ALBERT config JSON.")
    init_checkpoint: Optional[str] = option(None, "Warm start: Google's TF1 checkpoint or ours (weights only).")
    do_train: bool = option(
        True,
        "With --do_train=false: evaluate every checkpoint kept in --output_dir on --eval_file (default "
        "--input_file) and print one JSON line each; nothing is trained or written.",
    )
    dry_run: bool = option(
        False,
        "Check the flags, data, config, vocabulary, memory and a resume's settings, print the plan (rows, "
        "epochs, batch per replica, memory) as JSON, and train and write nothing.",
    )
    # The command's: `pretrain()` writes final/, the CLI exports it (`albert_tf.export.exported_versions`).
    export: bool = option(True, "Write SavedModels at the end.")
    train_batch_size: int = option(4096, "Global batch (all replicas, all micro-steps).")
    eval_batch_size: int = option(64, "Eval batch.")
    # None: the data's (metadata.json), filled in by `for_data` before anything reads them.
    max_seq_length: Optional[int] = option(None, "Must match the data (default: the data's metadata.json).")
    max_predictions_per_seq: Optional[int] = option(None, "Must match the data (default: the data's).")
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

    def check_inputs(self) -> None:
        """What a run needs that the settings alone can say is missing or contradictory (before any file is read).

        Raises:
            PretrainingError: naming the flag.
        """
        if self.do_train and not self.input_file:
            raise PretrainingError("--input_file required (data_prep's output)")
        missing = [name for name in ("albert_config_file", "output_dir") if not getattr(self, name)]
        if missing:
            mode = "--input_file" if self.do_train else "--nodo_train"
            raise PretrainingError(", ".join(f"--{name}" for name in missing) + f" required with {mode}")
        if self.dry_run and not self.do_train:
            raise PretrainingError("--dry_run plans a training run; drop --nodo_train")
        if not self.do_train and not (self.eval_file or self.input_file):
            raise PretrainingError("--nodo_train needs --eval_file (the data to evaluate the checkpoints on)")
        if self.init_from_group0 and not self.init_checkpoint:
            raise PretrainingError(
                "--init_from_group0 needs --init_checkpoint (the checkpoint whose group 0 starts every group)"
            )

    def for_data(self, data: PretrainingData) -> "PretrainSettings":
        """These settings with the lengths not given set to the data's (`metadata.json`); given ones are kept
        (and checked against the data by `PretrainingData.check_fits`)."""
        return dataclasses.replace(
            self,
            max_seq_length=self.max_seq_length or data.max_seq_length,
            max_predictions_per_seq=self.max_predictions_per_seq or data.max_predictions_per_seq,
        )
