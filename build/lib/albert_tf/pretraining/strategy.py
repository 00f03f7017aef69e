"""The tf.distribute strategy of `--strategy`, and which task is the chief."""

import os
from typing import Optional

import tensorflow as tf

from albert_tf.pretraining.settings import STRATEGIES, TrainingError


def make_strategy(name: str, tpu: Optional[str] = None) -> tf.distribute.Strategy:
    """The tf.distribute strategy for `--strategy` (multi_worker reads TF_CONFIG)."""
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
    """
    return strategy.num_replicas_in_sync == 1 and not isinstance(
        strategy, (tf.distribute.MultiWorkerMirroredStrategy, tf.distribute.TPUStrategy)
    )
