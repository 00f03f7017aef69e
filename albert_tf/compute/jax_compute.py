"""`JaxCompute`: a run on Keras' JAX backend, data parallel over JAX's devices (`distribution.JaxDevices`).

The steps are `pretraining.jax_step`'s; the input pipeline is tf.data, one pipeline of global
batches that the step shards; the checkpoint holds tf.Variable copies of the state (`jax_state`).
TensorFlow and JAX are imported where they are used.

Example:

>>> JaxCompute.step_jit_compile(None), JaxCompute.predicts_per_shape
(True, True)
"""

from typing import Callable, Optional

from albert_tf import distribution, flops
from albert_tf.compute.base import CheckpointState, Compute, TrainStep


class JaxStep(TrainStep):
    """`jax_step.JaxTrainStep` on an iterator: the state stays on the devices between steps.

    Each call reads back the stats and the step count together (one transfer): the loop reads the
    loss of every step (a non-finite one stops or rolls back the run) and counts the steps.
    """

    def __init__(self, step):
        self.step = step
        self.count = None

    def __call__(self, iterator):
        import jax

        stats = self.step(*next(iterator))
        stats, self.count = jax.device_get((stats, self.step.iterations_array()))
        return stats

    def iterations(self) -> int:
        if self.count is None:  # before any step, or after a restore
            self.count = self.step.iterations_array()
        return int(self.count)

    def sync(self) -> None:
        self.step.sync()

    def reset(self) -> None:
        self.step.reset()
        self.count = None


class JaxCompute(Compute):
    """`devices` (`distribution.JaxDevices`, or anything answering as it does) as a `Compute`."""

    name = "jax"
    iterator_in_checkpoint = True  # one iterator reads the global batch, which the step shards
    predicts_per_shape = True

    def __init__(self, devices):
        self.distribution = devices
        self.num_replicas_in_sync = devices.num_replicas_in_sync
        self.num_processes = devices.num_processes
        self.process_id = devices.process_id

    @staticmethod
    def make_distribution(settings: distribution.DistributionSettings):
        distribution.check_tpu_flag(settings.strategy, settings.tpu)
        return distribution.jax_devices(settings.strategy, settings.processes())

    @property
    def chief(self) -> bool:
        return self.distribution.chief

    def describe(self) -> dict:
        return self.distribution.describe()

    def scope(self):
        return self.distribution.scope()

    def any_process(self, flag: bool) -> bool:
        return self.distribution.any_process(flag)

    def wait_for_all(self, name: str) -> None:
        self.distribution.wait_for_all(name)

    def peak_flops(self, mixed_precision: str) -> Optional[float]:
        import jax

        device = jax.devices()[0]
        if device.platform == "cpu":
            return None
        peak = flops.peak_flops_of(device.device_kind, mixed_precision)
        return peak * self.num_replicas_in_sync if peak else None

    @staticmethod
    def step_jit_compile(jit_compile: Optional[bool]) -> bool:
        """Always: uncompiled, Keras' JAX `fit` runs each primitive on its own (~100x slower)."""
        if jit_compile is False:
            raise distribution.DistributionError(
                "--nojit_compile: on Keras' JAX backend the training step is always compiled (uncompiled, each "
                "operation would run on its own, ~100x slower); drop the flag"
            )
        return True

    def compiles_every_shape(self, jit_compile: Optional[bool]) -> bool:
        return self.step_jit_compile(jit_compile)

    def train_iterator(self, dataset_fn: Callable):
        import tensorflow as tf

        return iter(dataset_fn(tf.distribute.InputContext()))

    def eval_iterator(self, dataset_fn: Callable):
        return self.train_iterator(dataset_fn)

    def train_step(
        self, model, optimizer, grad_accum_steps: int, jit_compile: Optional[bool], deterministic: bool, objective
    ):
        from albert_tf.pretraining.jax_step import JaxTrainStep

        self.step_jit_compile(jit_compile)
        return JaxStep(
            JaxTrainStep(model, optimizer, objective, grad_accum_steps, self.distribution, deterministic=deterministic)
        )

    def eval_step(self, model, deterministic: bool, objective):
        from albert_tf.pretraining.jax_step import JaxEvalStep

        step = JaxEvalStep(model, objective, self.distribution, deterministic=deterministic)
        return lambda iterator: step(*next(iterator))

    def checkpoint_state(self, model, optimizer, seed_states: bool = False) -> CheckpointState:
        from albert_tf.compute.jax_state import JaxStateCopy

        return JaxStateCopy(model, optimizer)  # every variable, the seed generators' among them

    def sync_fit_state(self, model) -> None:
        model.jax_state_sync()
