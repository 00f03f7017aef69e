"""`TensorFlowCompute`: a run on Keras' TensorFlow backend, under a tf.distribute strategy.

Example:

>>> import tensorflow as tf
>>> compute = TensorFlowCompute(tf.distribute.get_strategy())
>>> compute.name, compute.chief, compute.iterator_in_checkpoint, compute.describe()
('tensorflow', True, True, None)
"""

from typing import Callable, Dict, Optional

import tensorflow as tf

from albert_tf import distribution, flops
from albert_tf.compute.base import CheckpointState, Compute, TrainStep
from albert_tf.pretraining import tf_step


class TrackedState(CheckpointState):
    """TensorFlow's model and optimizer are checkpoint objects themselves."""

    def __init__(self, objects: Dict[str, object]):
        self.objects = objects

    def trackables(self) -> Dict[str, object]:
        return dict(self.objects)

    def before_save(self) -> None:
        """Nothing to copy: the checkpoint reads the variables."""

    def after_restore(self) -> None:
        """Nothing to copy: the restore wrote the variables."""


class TensorFlowStep(TrainStep):
    """`tf_step`'s step: the variables are the state, always current."""

    def __init__(self, step, optimizer):
        self.step = step
        self.optimizer = optimizer

    def __call__(self, iterator):
        return self.step(iterator)

    def iterations(self) -> int:
        return int(self.optimizer.iterations.numpy())

    def sync(self) -> None:
        """Nothing held: the step updates the variables themselves."""

    def reset(self) -> None:
        """Nothing held: the next step reads the variables."""


class TensorFlowCompute(Compute):
    """A tf.distribute `strategy` (from `distribution.tf_strategy`) as a `Compute`."""

    name = "tensorflow"

    def __init__(self, strategy):
        self.distribution = strategy
        self.num_replicas_in_sync = strategy.num_replicas_in_sync
        # tf.distribute's iterators cannot be checkpointed: a multi-replica run skips the batches used instead.
        self.iterator_in_checkpoint = self.num_replicas_in_sync == 1 and not isinstance(
            strategy, (tf.distribute.MultiWorkerMirroredStrategy, tf.distribute.TPUStrategy)
        )

    @staticmethod
    def make_distribution(settings: distribution.DistributionSettings):
        return distribution.tf_strategy(settings.strategy, settings.tpu, settings.processes())

    @property
    def cluster_resolver(self):
        return getattr(self.distribution, "cluster_resolver", None)

    @property
    def chief(self) -> bool:
        resolver = self.cluster_resolver
        if resolver is None or not resolver.task_type:
            return True
        cluster = resolver.cluster_spec().as_dict()
        if "chief" in cluster:
            return resolver.task_type == "chief"
        return resolver.task_type == "worker" and resolver.task_id == 0

    def scope(self):
        return self.distribution.scope()

    def any_process(self, flag: bool) -> bool:
        """One scalar all-reduce over a multi-worker strategy's workers; the flag itself elsewhere."""
        if not isinstance(self.distribution, tf.distribute.MultiWorkerMirroredStrategy):
            return flag
        strategy = self.distribution
        vote = tf.constant(1 if flag else 0, tf.int32)
        return int(strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: vote), axis=None)) > 0

    def peak_flops(self, mixed_precision: str) -> Optional[float]:
        """The GPUs' (a TPU's is not looked up here); None without one."""
        gpus = tf.config.list_physical_devices("GPU")
        if not gpus:
            return None
        peak = flops.peak_flops_of(
            tf.config.experimental.get_device_details(gpus[0]).get("device_name", ""), mixed_precision
        )
        return peak * self.num_replicas_in_sync if peak else None

    @staticmethod
    def step_jit_compile(jit_compile: Optional[bool]) -> bool:
        return bool(jit_compile)

    def compiles_every_shape(self, jit_compile: Optional[bool]) -> bool:
        """Under `--jit_compile` or on a TPU; graph mode traces one step for any width."""
        return self.step_jit_compile(jit_compile) or isinstance(self.distribution, tf.distribute.TPUStrategy)

    def train_iterator(self, dataset_fn: Callable):
        if self.iterator_in_checkpoint:
            return iter(dataset_fn(tf.distribute.InputContext()))
        return iter(self.distribution.distribute_datasets_from_function(dataset_fn))

    def eval_iterator(self, dataset_fn: Callable):
        return iter(self.distribution.distribute_datasets_from_function(dataset_fn))

    def train_step(
        self, model, optimizer, grad_accum_steps: int, jit_compile: Optional[bool], deterministic: bool, objective
    ):
        del deterministic  # TensorFlow's op determinism is process-wide (the job enables it)
        step = tf_step.make_train_step(
            self.distribution, model, optimizer, grad_accum_steps, self.step_jit_compile(jit_compile), objective
        )
        return TensorFlowStep(step, optimizer)

    def eval_step(self, model, deterministic: bool, objective):
        return tf_step.make_eval_step(self.distribution, model, objective)

    def checkpoint_state(self, model, optimizer, seed_states: bool = False) -> CheckpointState:
        objects = {"model": model, "optimizer": optimizer}
        if seed_states:
            # The dropout layers' seed generators: a resumed run draws the masks the uninterrupted one would.
            weights = {id(weight) for weight in model.weights}
            objects["seed_states"] = [variable.value for variable in model.variables if id(variable) not in weights]
        return TrackedState(objects)
