"""The `Compute` interface (where a run computes) and its `CheckpointState`; `albert_tf.compute` makes one."""

import abc
from typing import Callable, Dict, Optional


class CheckpointState(abc.ABC):
    """What a `tf.train.Checkpoint` of a run's model and optimizer tracks, and the copies around a save
    and a restore (none on TensorFlow; JAX's arrays go through tf.Variable copies: `jax_state`)."""

    @abc.abstractmethod
    def trackables(self) -> Dict[str, object]:
        """The checkpoint's objects by name (names are part of the checkpoint format: never renamed)."""

    @abc.abstractmethod
    def before_save(self) -> None:
        """The checkpoint is about to be written: the values it must hold go into its objects."""

    @abc.abstractmethod
    def after_restore(self) -> None:
        """A checkpoint was read into its objects: their values go into the model and optimizer."""


class TrainStep(abc.ABC):
    """Pretraining's step on a `Compute`: `step(iterator) → stats`, one optimizer step a call.

    It may hold the newest state where it computes (JAX: on the devices) rather than in the Keras
    variables: `sync()` before reading them, `reset()` after writing them.
    """

    @abc.abstractmethod
    def __call__(self, iterator) -> Dict[str, object]:
        """One optimizer step on the iterator's next batch; the objective's stats (`pretraining.objectives`)."""

    @abc.abstractmethod
    def iterations(self) -> int:
        """The optimizer's step count (a float16 step the loss scale skipped does not count)."""

    @abc.abstractmethod
    def sync(self) -> None:
        """The Keras variables take the newest state, for whatever reads them next."""

    @abc.abstractmethod
    def reset(self) -> None:
        """The Keras variables were written (a restore): the next step starts from them."""


class Compute(abc.ABC):
    """One run's place of computation: a backend and its devices, replicas and processes.

    Attributes:
        name: the Keras backend ("tensorflow", "jax"), recorded with a run's checkpoints and settings.
        distribution: the underlying tf.distribute strategy or `JaxDevices`.
        num_replicas_in_sync: devices a global batch is split over.
        num_processes / process_id: the processes this object joined itself (JAX's `jax.distributed`);
            a TensorFlow cluster's workers are its strategy's (`cluster_resolver`), so 1 / 0 there.
    """

    name: str
    distribution: object
    num_replicas_in_sync: int
    num_processes: int = 1
    process_id: int = 0
    # Whether the checkpoint can hold the input iterator (else a resumed run skips the batches used).
    iterator_in_checkpoint: bool = True
    # Whether a Keras model predicts through Keras' own step, compiled per batch shape (few widths wanted),
    # rather than one tf.function traced for any width.
    predicts_per_shape: bool = False

    @staticmethod
    @abc.abstractmethod
    def make_distribution(settings):
        """`--strategy`'s distribution on this backend (`DistributionSettings`), which the constructor takes."""

    @property
    def cluster_resolver(self):
        """TensorFlow's cluster (TF_CONFIG) of a multi-worker strategy, else None."""
        return None

    @property
    @abc.abstractmethod
    def chief(self) -> bool:
        """Whether this process writes the run's files."""

    def describe(self) -> Optional[dict]:
        """The processes and devices, for the run's records; None where TF_CONFIG says them."""
        return None

    @abc.abstractmethod
    def scope(self):
        """Variables made inside are placed for the replicas (Keras `fit` runs under it too)."""

    def any_process(self, flag: bool) -> bool:
        """Whether `flag` is set on any process (a collective where there are several)."""
        return flag

    def wait_for_all(self, name: str) -> None:
        """Returns once every process reached the barrier `name` (no-op with one process)."""
        del name  # one process: nobody to wait for

    @abc.abstractmethod
    def peak_flops(self, mixed_precision: str) -> Optional[float]:
        """The replicas' peak FLOP/s together under `--mixed_precision` (`flops.PEAKS`); None on CPUs or an
        unknown device."""

    # --- compilation ---------------------------------------------------------------------------------

    @staticmethod
    @abc.abstractmethod
    def step_jit_compile(jit_compile: Optional[bool]) -> bool:
        """Whether the training step is XLA-compiled under `--jit_compile` (None: the backend's default)."""

    @abc.abstractmethod
    def compiles_every_shape(self, jit_compile: Optional[bool]) -> bool:
        """Whether the training step compiles once per input shape, so batch widths must be few."""

    # --- pretraining's input and steps ---------------------------------------------------------------

    @abc.abstractmethod
    def train_iterator(self, dataset_fn: Callable):
        """An iterator over `dataset_fn(input_context)`'s batches, placed for the train step."""

    @abc.abstractmethod
    def eval_iterator(self, dataset_fn: Callable):
        """As `train_iterator`, for the eval step (a fresh one per evaluation)."""

    @abc.abstractmethod
    def train_step(
        self, model, optimizer, grad_accum_steps: int, jit_compile: Optional[bool], deterministic: bool, objective
    ) -> TrainStep:
        """Pretraining's `TrainStep` for `model` and `optimizer`, minimizing `objective`'s loss
        (`pretraining.objectives`)."""

    @abc.abstractmethod
    def eval_step(self, model, deterministic: bool, objective):
        """`step(iterator) → stats`: `objective`'s sums on the iterator's next batch."""

    # --- state ---------------------------------------------------------------------------------------

    @abc.abstractmethod
    def checkpoint_state(self, model, optimizer, seed_states: bool = False) -> CheckpointState:
        """The model's and optimizer's state in a checkpoint; `seed_states`: the dropout layers' seed
        generators too (fine-tuning's; under JAX every variable is held anyway)."""

    def sync_fit_state(self, model) -> None:
        """Keras `fit` keeps the state outside the variables until synced (JAX): reads after this see it."""
        del model  # TensorFlow's fit updates the variables themselves
