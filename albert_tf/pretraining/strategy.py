"""The distribution of `--strategy` (a tf.distribute strategy; under Keras' JAX backend, `jax_step.JaxDevices`),
and which task is the chief."""

import os
from typing import Optional

import keras
import tensorflow as tf

from albert_tf.pretraining.settings import STRATEGIES, TrainingError


def make_strategy(name: str, tpu: Optional[str] = None) -> tf.distribute.Strategy:
    """The tf.distribute strategy for `--strategy` (multi_worker reads TF_CONFIG).

    Under Keras' JAX backend: data parallelism over every local device (`default` and `mirrored`).
    """
    if keras.backend.backend() == "jax":
        return jax_devices(name)
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise TrainingError("--strategy=multi_worker needs TF_CONFIG (cluster spec and this task)")
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or "")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise TrainingError(f"--strategy must be one of {STRATEGIES}, got {name!r}")


def jax_devices(name: str):
    if name not in ("default", "mirrored"):
        raise TrainingError(
            f"--strategy {name} is a tf.distribute strategy; on Keras' JAX backend a run is data parallel over "
            "every local device (--strategy default); several hosts are not supported there yet"
        )
    from albert_tf.pretraining.jax_step import JaxDevices

    return JaxDevices()


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    cluster = resolver.cluster_spec().as_dict()
    if "chief" in cluster:
        return resolver.task_type == "chief"
    return resolver.task_type == "worker" and resolver.task_id == 0


def checkpoints_iterator(strategy: tf.distribute.Strategy) -> bool:
    """Whether the input iterator can be saved in the checkpoint (one worker, one replica).

    tf.distribute's iterators cannot be checkpointed; a multi-replica run
    instead skips the batches already used (the pipeline is deterministic).
    Under JAX one iterator reads the global batch, which the step shards.
    """
    if keras.backend.backend() == "jax":
        return True
    return strategy.num_replicas_in_sync == 1 and not isinstance(
        strategy, (tf.distribute.MultiWorkerMirroredStrategy, tf.distribute.TPUStrategy)
    )
