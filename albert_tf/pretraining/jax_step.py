"""The pretraining step on Keras' JAX backend, and its data parallelism.

`make_train_step` returns one pure function `(state, inputs, labels) → (state, stats)`
that `jax.jit` compiles whole: forward, backward, gradient accumulation, clipping and
the LAMB/AdamW update, with the TensorFlow step's objective, order and numbers
(`tf_step`). The model and optimizer run through Keras' stateless API, so the state is
a tuple of arrays. Under data parallelism the batch is sharded over the devices and the
variables replicated (`keras.distribution.DataParallel`); XLA inserts the all-reduce.
The loss is the global batch's, so N devices compute what one device does (without
accumulation: with it, micro-batch i is chunk i of every device's rows, as tf.distribute splits).

No TensorFlow here: `bench/gpu_jax.py` times this very step on machines without it.

Example (micro-batches under accumulation, as the TensorFlow step splits each replica's rows):

>>> import numpy as np
>>> micro_batch(np.arange(8), count=2, index=1, replicas=2).tolist()  # replica 0 holds rows 0-3, replica 1 rows 4-7
[2, 3, 6, 7]
"""

from typing import Callable, Dict, Tuple

import jax
import keras
from keras import ops

from albert_tf.distribution import JaxDevices

CLIP_NORM = 1.0  # the original's clip_by_global_norm(grads, 1.0), after aggregation
# `--deterministic`: XLA's GPU reductions and scatters (the embedding gradient) without atomics; CPUs are already.
DETERMINISTIC_OPTIONS = {"xla_gpu_deterministic_ops": True}


def micro_batch(tree, count: int, index: int, replicas: int = 1):
    """Micro-batch `index` of `count`: the `index`-th contiguous chunk of each replica's rows.

    The TensorFlow step's micro-batches (each replica splits its own rows), and no row leaves its device.
    """
    if count == 1:
        return tree

    def chunk(t):
        per_chunk = t.shape[0] // (replicas * count)
        split = t.reshape((replicas, count, per_chunk) + t.shape[1:])[:, index]
        return split.reshape((replicas * per_chunk,) + t.shape[1:])

    return jax.tree.map(chunk, tree)


def make_train_step(model, optimizer, objective, grad_accum_steps: int = 1, replicas: int = 1) -> Callable:
    """The pure step `(state, inputs, labels) → (state, stats)`; state is (trainable, non-trainable, optimizer) values.

    `objective`: the run's (`batch_stats(outputs, labels)`, `loss(stats)`: `pretraining.objectives`).
    Stats are the objective's sums over the global batch (its `STAT_KEYS`), `loss` as the TF step reports
    it (the mean of the micro-batches' losses), and `grad_norm` (before clipping).
    """
    loss_scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)

    def scaled_loss(trainable, non_trainable, optimizer_values, inputs, labels):
        outputs, non_trainable = model.stateless_call(trainable, non_trainable, inputs, training=True)
        stats = objective.batch_stats(outputs, labels)
        loss = objective.loss(stats) / float(grad_accum_steps)  # gradients are summed over micro-batches
        stats["loss"] = loss
        if loss_scaled:  # the scale is optimizer state: read this step's, not the traced constant
            with keras.StatelessScope(state_mapping=list(zip(optimizer.variables, optimizer_values))):
                loss = optimizer.scale_loss(loss)
        return loss, (stats, non_trainable)

    gradient = jax.grad(scaled_loss, has_aux=True)

    def train_step(state, inputs, labels):
        trainable, non_trainable, optimizer_values = state
        grads, stats = None, None
        for index in range(grad_accum_steps):  # unrolled: the count is small and static
            g, (st, non_trainable) = gradient(
                trainable,
                non_trainable,
                optimizer_values,
                micro_batch(inputs, grad_accum_steps, index, replicas),
                micro_batch(labels, grad_accum_steps, index, replicas),
            )
            grads = g if grads is None else [a + b for a, b in zip(grads, g)]
            stats = st if stats is None else {k: stats[k] + st[k] for k in st}
        scale = 1.0
        if loss_scaled:
            with keras.StatelessScope(state_mapping=list(zip(optimizer.variables, optimizer_values))):
                scale = ops.cast(optimizer.scale_loss(1.0), "float32")
            grads = [g / scale for g in grads]
        norm = ops.sqrt(sum(ops.sum(ops.square(ops.cast(g, "float32"))) for g in grads))
        # The clipped gradient; LossScaleOptimizer unscales (and skips non-finite steps) itself.
        factor = CLIP_NORM / ops.maximum(norm, CLIP_NORM) * scale
        grads = [g * ops.cast(factor, g.dtype) for g in grads]
        trainable, optimizer_values = optimizer.stateless_apply(optimizer_values, grads, trainable)
        stats["grad_norm"] = norm
        return (trainable, non_trainable, optimizer_values), stats

    return train_step


def make_eval_step(model, objective) -> Callable:
    """The pure eval step `(trainable, non_trainable, inputs, labels) → stats` (summed, as `make_train_step`)."""

    def eval_step(trainable, non_trainable, inputs, labels):
        outputs, _ = model.stateless_call(trainable, non_trainable, inputs, training=False)
        stats = objective.batch_stats(outputs, labels)
        stats["loss"] = objective.loss(stats)
        return stats

    return eval_step


class JaxTrainStep:
    """`make_train_step` jitted and bound to the Keras variables: `step(inputs, labels) → stats`.

    The state stays on the devices between steps, in this object: writing ~100 arrays into the Keras
    variables after every step cost more than a small model's step. Whatever reads the variables
    (checkpoints, evaluation, `model.get_weights()`, the learning rate) calls `sync()` first, and a
    restore that wrote them calls `reset()`; `iterations()` is the optimizer's step count meanwhile.
    """

    def __init__(
        self,
        model,
        optimizer,
        objective,
        grad_accum_steps: int = 1,
        devices: JaxDevices = None,
        deterministic: bool = False,
    ):
        self.devices = devices or JaxDevices()
        self.variables = (model.trainable_variables, model.non_trainable_variables, optimizer.variables)
        self.held = None  # the state after the last step, while the Keras variables are older
        # Where the optimizer's step count is in its variables (LossScaleOptimizer: its inner optimizer's).
        (self.iterations_index,) = [i for i, v in enumerate(optimizer.variables) if v is optimizer.iterations]
        # Donated buffers are reused for the new state (no second copy of weights and slots); CPUs cannot.
        donate = () if jax.default_backend() == "cpu" else (0,)
        replicas = self.devices.num_replicas_in_sync
        self.compiler_options = DETERMINISTIC_OPTIONS if deterministic else None
        self.step = jax.jit(
            make_train_step(model, optimizer, objective, grad_accum_steps, replicas),
            donate_argnums=donate,
            compiler_options=self.compiler_options,
        )

    def state(self) -> Tuple[list, list, list]:
        """The newest state: held since the last step, else the Keras variables'."""
        if self.held is not None:
            return self.held
        return tuple([v.value for v in group] for group in self.variables)

    def __call__(self, inputs, labels) -> Dict[str, object]:
        # The state given is donated (on accelerators): only the new one is valid after the call.
        self.held, stats = self.step(self.state(), *self.devices.shard((inputs, labels)))
        return stats

    def iterations_array(self):
        """The optimizer's step count, as an array of the newest state (not read back yet)."""
        return self.state()[2][self.iterations_index]

    def sync(self) -> None:
        """Writes the held state into the Keras variables, for whatever reads them next."""
        if self.held is None:
            return
        for group, values in zip(self.variables, self.held):
            for variable, value in zip(group, values):
                variable.assign(value)
        self.held = None

    def reset(self) -> None:
        """The Keras variables were written (a restore): the next step starts from them, not the held state."""
        self.held = None


class JaxEvalStep:
    """`make_eval_step` jitted and bound to the model's variables: `step(inputs, labels) → stats`."""

    def __init__(self, model, objective, devices: JaxDevices = None, deterministic: bool = False):
        self.devices = devices or JaxDevices()
        self.model = model
        self.compiler_options = DETERMINISTIC_OPTIONS if deterministic else None
        self.step = jax.jit(make_eval_step(model, objective), compiler_options=self.compiler_options)

    def __call__(self, inputs, labels) -> Dict[str, object]:
        trainable = [v.value for v in self.model.trainable_variables]
        non_trainable = [v.value for v in self.model.non_trainable_variables]
        return self.step(trainable, non_trainable, *self.devices.shard((inputs, labels)))
