"""Where a run computes, as one object: a `Compute`, made once at the command's edge (`make_compute`).

Pretraining's loop and fine-tuning ask it, never the Keras backend: its `name` (bound to the
checkpoints), its replicas and processes, the input iterators, the pretraining steps, the checkpoint
state, whether each input shape compiles, and fine-tuning's sync after `fit`. `TensorFlowCompute`
runs a tf.distribute strategy; `JaxCompute` data parallelism over JAX's devices (`JaxDevices`).
Adding a backend is adding one implementation: the layers are `keras.ops` already.

Nothing here imports TensorFlow or JAX until a compute is made, so the settings modules can import it.

Example:

>>> compute = make_compute()
>>> compute.name, compute.num_replicas_in_sync, compute.chief
('tensorflow', 1, True)
>>> compute.compiles_every_shape(jit_compile=None), compute.compiles_every_shape(jit_compile=True)
(False, True)
"""

from typing import Optional

from albert_tf.compute.base import CheckpointState, Compute, TrainStep
from albert_tf.distribution import DistributionSettings

__all__ = ["CheckpointState", "Compute", "TrainStep", "check_jit_compile", "make_compute"]


def _implementation():
    """The Compute class of the backend Keras runs on: the one place training asks Keras which it is."""
    import keras

    if keras.backend.backend() == "jax":
        from albert_tf.compute.jax_compute import JaxCompute

        return JaxCompute
    from albert_tf.compute.tf_compute import TensorFlowCompute

    return TensorFlowCompute


def check_jit_compile(jit_compile: Optional[bool]) -> None:
    """Refuses `--nojit_compile` where the step is always compiled (Keras is imported only for an explicit
    False: settings stay constructible without it)."""
    if jit_compile is False:
        _implementation().step_jit_compile(jit_compile)


def make_compute(distribution: DistributionSettings = DistributionSettings()) -> Compute:
    """The run's `Compute`: `--strategy`'s distribution on the backend Keras runs on.

    Make it first: multi-worker collectives and JAX's processes are set up before any TensorFlow op
    or JAX computation.
    """
    implementation = _implementation()
    return implementation(implementation.make_distribution(distribution))
