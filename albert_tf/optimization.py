"""ALBERT's optimizers and learning-rate schedule, as Keras 3 optimizers.

Both follow Google's `optimization.py` / `lamb_optimizer.py` exactly:
no bias correction, ε outside the square root, weight decay added to the
update (inside LAMB's trust ratio), and `LayerNorm`/`layer_norm`/`bias`
variables excluded from both decay and adaptation (regex search on the
variable's path). Gradient clipping to global norm 1.0, before the update, as
the original's `create_optimizer` for every task: `create_optimizer(...,
clip_norm=1.0)` (Keras `global_clipnorm`, `tf.clip_by_global_norm` semantics,
used by fine-tuning), or by the training loop itself after the gradients of all
replicas are summed (pretraining, which passes `clip_norm=None`).

Example:

>>> import keras
>>> schedule = AlbertSchedule(1e-3, num_train_steps=100, num_warmup_steps=10)
>>> [round(float(schedule(s)), 6) for s in (0, 5, 10, 55, 100)]
[0.0, 0.0005, 0.0009, 0.00045, 0.0]
>>> w = keras.Variable([[3.0, 4.0]], name="kernel")
>>> opt = Lamb(learning_rate=0.1)
>>> opt.apply([keras.ops.ones((1, 2))], [w])
>>> [round(float(x), 3) for x in w.numpy()[0]]  # the step is scaled by ‖w‖/‖u‖ = 1.106
[2.647, 3.646]
"""

import re
from typing import Optional, Sequence

import keras
from keras import ops

EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup, then polynomial decay to 0 counted from step 0 (as the original).

    At step t: `lr0·(1 − min(t,T)/T)^power`, except `lr0·(t − start)/W` while
    `t − start < W`. The LR therefore jumps to `lr0·(1 − W/T)` at the end of warmup.
    `micro_steps_per_update`: Keras' gradient accumulation calls the schedule at
    every micro-batch; t counts optimizer updates, so it is divided by this.
    """

    def __init__(
        self,
        learning_rate: float,
        num_train_steps: int,
        num_warmup_steps: int = 0,
        poly_power: float = 1.0,
        start_warmup_step: int = 0,
        micro_steps_per_update: int = 1,
    ):
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
        self.learning_rate = learning_rate
        self.num_train_steps = num_train_steps
        self.num_warmup_steps = num_warmup_steps
        self.poly_power = poly_power
        self.start_warmup_step = start_warmup_step
        self.micro_steps_per_update = micro_steps_per_update

    def __call__(self, step):
        step = ops.cast(ops.floor_divide(step, self.micro_steps_per_update), "float32")
        decay_fraction = ops.minimum(step, float(self.num_train_steps)) / float(self.num_train_steps)
        decayed = self.learning_rate * ops.power(1.0 - decay_fraction, self.poly_power)
        if not self.num_warmup_steps:
            return decayed
        warm_step = step - float(self.start_warmup_step)
        warmup = self.learning_rate * warm_step / float(self.num_warmup_steps)
        return ops.where(warm_step < float(self.num_warmup_steps), warmup, decayed)

    def get_config(self):
        return {
            "learning_rate": self.learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "poly_power": self.poly_power,
            "start_warmup_step": self.start_warmup_step,
            "micro_steps_per_update": self.micro_steps_per_update,
        }


@keras.saving.register_keras_serializable(package="albert_tf")
def _dense(gradient):
    """The embedding's gradient arrives as IndexedSlices under Keras fit: sum its rows into place."""
    if hasattr(gradient, "indices") and hasattr(gradient, "dense_shape"):
        return ops.scatter(ops.expand_dims(gradient.indices, -1), gradient.values, gradient.dense_shape)
    return gradient


class AdamWeightDecay(keras.optimizers.Optimizer):
    """Adam with weight decay added to the update, no bias correction (the original AdamW).

    Args:
        learning_rate: float or schedule.
        weight_decay_rate: decay added as `wd·w` to the update.
        beta_1, beta_2, epsilon: Adam's constants (ε outside the square root).
        exclude_from_weight_decay: regexes searched in variable paths.
        exclude_from_layer_adaptation: LAMB only; defaults to the decay list, as the original.
    """

    layer_adaptation = False

    def __init__(
        self,
        learning_rate=0.00176,
        weight_decay_rate: float = 0.01,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-6,
        exclude_from_weight_decay: Sequence[str] = EXCLUDE_FROM_WEIGHT_DECAY,
        exclude_from_layer_adaptation: Optional[Sequence[str]] = None,
        name: Optional[str] = None,
        **kwargs,
    ):
        super().__init__(learning_rate=learning_rate, name=name or type(self).__name__.lower(), **kwargs)
        self.weight_decay_rate = weight_decay_rate
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
        self.exclude_from_weight_decay = list(exclude_from_weight_decay or [])
        self.exclude_from_layer_adaptation = (
            list(exclude_from_layer_adaptation)
            if exclude_from_layer_adaptation is not None
            else list(self.exclude_from_weight_decay)
        )

    @staticmethod
    def _matches(path: str, patterns) -> bool:
        return any(re.search(p, path) for p in patterns)

    def decay_and_adaptation(self, variable):
        """(weight decay applies, layer adaptation applies) for a Keras variable, by its path."""
        decay = self.weight_decay_rate > 0 and not self._matches(variable.path, self.exclude_from_weight_decay)
        adapt = self.layer_adaptation and not self._matches(variable.path, self.exclude_from_layer_adaptation)
        return decay, adapt

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m, self._v, self._decays, self._adapts = [], [], [], []
        for variable in var_list:
            self._m.append(self.add_variable_from_reference(variable, "m"))
            self._v.append(self.add_variable_from_reference(variable, "v"))
            # Decided here from the Keras path: under tf.distribute, update_step
            # sees the per-replica tf.Variable, whose name lacks the path.
            decay, adapt = self.decay_and_adaptation(variable)
            self._decays.append(decay)
            self._adapts.append(adapt)

    def _clip_gradients(self, grads):
        # The global norm is that of the summed gradient, as for a dense gradient
        # (the original's one-hot/TPU embedding and our pretraining loop): an
        # embedding's IndexedSlices would otherwise count each repeated token's
        # row separately (tf.clip_by_global_norm on the slices' values).
        if self.global_clipnorm:
            grads = [None if g is None else _dense(g) for g in grads]
        return super()._clip_gradients(grads)

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        dtype = variable.dtype
        lr = ops.cast(learning_rate, dtype)
        gradient = ops.cast(_dense(gradient), dtype)
        m, v = self._m[index], self._v[index]
        self.assign(m, self.beta_1 * m + (1.0 - self.beta_1) * gradient)
        self.assign(v, self.beta_2 * v + (1.0 - self.beta_2) * ops.square(gradient))
        update = m / (ops.sqrt(v) + self.epsilon)
        if self._decays[index]:
            update = update + self.weight_decay_rate * variable
        if self._adapts[index]:
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
            ratio = ops.where((w_norm > 0) & (u_norm > 0), w_norm / ops.maximum(u_norm, 1e-30), 1.0)
            update = ratio * update
        self.assign_sub(variable, lr * update)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "weight_decay_rate": self.weight_decay_rate,
                "beta_1": self.beta_1,
                "beta_2": self.beta_2,
                "epsilon": self.epsilon,
                "exclude_from_weight_decay": self.exclude_from_weight_decay,
                "exclude_from_layer_adaptation": self.exclude_from_layer_adaptation,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class Lamb(AdamWeightDecay):
    """LAMB (You et al.) as ALBERT's `lamb_optimizer.py`: AdamW's update times ‖w‖/‖u‖."""

    layer_adaptation = True


OPTIMIZERS = {"lamb": Lamb, "adamw": AdamWeightDecay}


def create_optimizer(
    name: str,
    learning_rate: float,
    num_train_steps: int,
    num_warmup_steps: int,
    poly_power: float = 1.0,
    start_warmup_step: int = 0,
    clip_norm: Optional[float] = None,
    grad_accum_steps: int = 1,
) -> AdamWeightDecay:
    """The original's `create_optimizer`: schedule + LAMB or AdamW (wd 0.01, ε 1e-6).

    `clip_norm=1.0` clips all gradients together to that global norm before the
    update, as the original; `None` leaves clipping to the caller's loop.
    `grad_accum_steps > 1` (Keras `fit` loops): the mean of that many
    micro-batches' gradients is clipped and applied once; the schedule counts
    optimizer steps.
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}, got {name!r}")
    schedule = AlbertSchedule(
        learning_rate,
        num_train_steps,
        num_warmup_steps,
        poly_power,
        start_warmup_step,
        micro_steps_per_update=max(grad_accum_steps, 1),
    )
    accumulation = {"gradient_accumulation_steps": grad_accum_steps} if grad_accum_steps > 1 else {}
    return OPTIMIZERS[name](learning_rate=schedule, global_clipnorm=clip_norm, **accumulation)
