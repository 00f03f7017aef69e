"""Where a run computes: `--mixed_precision`'s policies and `--strategy`'s distribution, for every training command.

Pretraining and fine-tuning both take them from here. Under Keras' JAX backend the distribution is
`JaxDevices` (data parallel over the local devices); on TensorFlow, a tf.distribute strategy. Neither
TensorFlow nor JAX is imported until a distribution is made, so `jax_step` (run where there is no
TensorFlow) and the settings modules can import this one.

Example:

>>> PRECISIONS["bfloat16"], STRATEGIES[0]
('mixed_bfloat16', 'default')
"""

import contextlib
import dataclasses
import os
from typing import Optional

from albert_tf.errors import AlbertError
from albert_tf.options import option

STRATEGIES = ("default", "mirrored", "multi_worker", "tpu")
PRECISIONS = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}


def mixed_precision_option():
    """The `--mixed_precision` field of pretraining's and fine-tuning's settings."""
    return option(
        "float32",
        "Compute dtype policy: bfloat16/float16 matmuls, float32 weights, LayerNorm and softmax "
        "(float16 with loss scaling).",
        choices=sorted(PRECISIONS),
    )


def jit_compile_option():
    """The `--jit_compile` field of pretraining's and fine-tuning's settings (`step_jit_compile` resolves it)."""
    return option(
        None,
        "XLA-compile the training step (default: off on TensorFlow; on Keras' JAX backend the step is always "
        "compiled, and --nojit_compile is refused there).",
    )


def strategy_option():
    """The `--strategy` field of pretraining's and fine-tuning's settings."""
    return option(STRATEGIES[0], "tf.distribute strategy (multi_worker reads TF_CONFIG).", choices=STRATEGIES)


def tpu_option():
    """The `--tpu` field of pretraining's and fine-tuning's settings."""
    return option(None, "TPU name or address for --strategy=tpu.")


@dataclasses.dataclass(frozen=True)
class DistributionSettings:
    """`--strategy` and `--tpu` where a command makes the distribution itself, before its other settings
    (pretraining: before any TensorFlow op, for multi-worker collectives)."""

    strategy: str = strategy_option()
    tpu: Optional[str] = tpu_option()


class DistributionError(AlbertError, ValueError):
    """A `--strategy` or `--mixed_precision` this process cannot run; the message says why."""


def check_jit_compile(jit_compile: Optional[bool]) -> None:
    """Refuses `--nojit_compile` on Keras' JAX backend, where the step is always compiled (Keras is imported
    only for an explicit False: settings stay constructible without it)."""
    if jit_compile is False:
        step_jit_compile(jit_compile)


def step_jit_compile(jit_compile: Optional[bool]) -> bool:
    """Whether the training step is XLA-compiled: on Keras' JAX backend always (uncompiled, its `fit` runs each
    primitive on its own, ~100x slower), on TensorFlow when `--jit_compile` asks."""
    import keras

    if keras.backend.backend() != "jax":
        return bool(jit_compile)
    if jit_compile is False:
        raise DistributionError(
            "--nojit_compile: on Keras' JAX backend the training step is always compiled (uncompiled, each "
            "operation would run on its own, ~100x slower); drop the flag"
        )
    return True


def check_precision(name: str) -> str:
    """The Keras dtype policy of `--mixed_precision name`."""
    if name not in PRECISIONS:
        raise DistributionError(f"--mixed_precision must be one of {sorted(PRECISIONS)}, got {name!r}")
    return PRECISIONS[name]


def make_strategy(name: str, tpu: Optional[str] = None):
    """The distribution of `--strategy name`: a tf.distribute strategy (multi_worker reads TF_CONFIG).

    Under Keras' JAX backend: data parallelism over every local device (`default` and `mirrored`).
    """
    import keras

    if tpu is not None and name != "tpu":
        raise DistributionError(f"--tpu {tpu}: names the TPU of --strategy tpu, but --strategy is {name}")
    if keras.backend.backend() == "jax":
        return jax_devices(name)
    import tensorflow as tf

    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise DistributionError("--strategy=multi_worker needs TF_CONFIG (cluster spec and this task)")
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or "")
        except ValueError as error:  # no --tpu and not on a TPU VM: TensorFlow's "Please provide a TPU Name"
            shown = f"--tpu {tpu}" if tpu else "no --tpu given and this machine is no TPU VM"
            raise DistributionError(f"--strategy tpu: {shown}: {error}") from None
        try:
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
        except tf.errors.OpError as error:  # an address where no TPU answers
            first_line = (error.message or type(error).__name__).splitlines()[0]
            raise DistributionError(
                f"--strategy tpu: cannot reach the TPU {tpu or '(this VM)'}: {first_line}"
            ) from None
        return tf.distribute.TPUStrategy(resolver)
    raise DistributionError(f"--strategy must be one of {STRATEGIES}, got {name!r}")


def jax_devices(name: str) -> "JaxDevices":
    if name not in ("default", "mirrored"):
        raise DistributionError(
            f"--strategy {name} is a tf.distribute strategy; on Keras' JAX backend a run is data parallel over "
            "every local device (--strategy default); several hosts are not supported there yet"
        )
    return JaxDevices()


class JaxDevices:
    """Data parallelism over every local device (`keras.distribution.DataParallel` when there are several).

    What the loop asks of a distribution, as of a tf.distribute strategy: `num_replicas_in_sync`, `scope()`
    (variables made inside are replicated), and `shard(batch)` (the global batch split over the devices).
    """

    cluster_resolver = None  # one process: it is the chief

    def __init__(self):
        import keras

        devices = keras.distribution.list_devices()
        self.num_replicas_in_sync = len(devices)
        self.distribution = keras.distribution.DataParallel(devices=devices) if len(devices) > 1 else None

    def scope(self):
        return self.distribution.scope() if self.distribution else contextlib.nullcontext()

    def shard(self, batch):
        """numpy (or TF eager) arrays → device arrays; split over the devices along the batch axis."""
        import jax
        import keras

        arrays = jax.tree.map(jax.numpy.asarray, batch)
        if self.distribution is None:
            return arrays
        layout = self.distribution.get_data_layout
        return jax.tree.map(lambda t: keras.distribution.distribute_tensor(t, layout(t.shape)), arrays)


def is_chief(strategy) -> bool:
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    cluster = resolver.cluster_spec().as_dict()
    if "chief" in cluster:
        return resolver.task_type == "chief"
    return resolver.task_type == "worker" and resolver.task_id == 0


def checkpoints_iterator(strategy) -> bool:
    """Whether the input iterator can be saved in the checkpoint (one worker, one replica).

    tf.distribute's iterators cannot be checkpointed; a multi-replica run
    instead skips the batches already used (the pipeline is deterministic).
    Under JAX one iterator reads the global batch, which the step shards.
    """
    if isinstance(strategy, JaxDevices):
        return True
    import tensorflow as tf

    return strategy.num_replicas_in_sync == 1 and not isinstance(
        strategy, (tf.distribute.MultiWorkerMirroredStrategy, tf.distribute.TPUStrategy)
    )
