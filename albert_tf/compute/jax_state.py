"""A JAX run's variables in a TensorFlow checkpoint: one tf.Variable copy of each.

The `CheckpointState` of `compute.JaxCompute`: pretraining's and fine-tuning's checkpoints alike.

Under Keras' JAX backend the model's and optimizer's variables hold JAX arrays, which
`tf.train.Checkpoint` cannot track. Their values are copied into tf.Variables before each
save and back after each restore, so a JAX run keeps every property of the TensorFlow
run's checkpoints (atomic files, `CheckpointManager`'s keep/rollback/discard, the input
iterator in the same checkpoint). The model's variables include the dropout layers' seed
generator states, so a resumed run draws the masks an uninterrupted one would. The copies
live on the host: one more copy of the weights and optimizer slots in host memory.
"""

from typing import Dict

import numpy as np
import tensorflow as tf

from albert_tf.compute.base import CheckpointState

# Checkpoint object names; a TensorFlow run's checkpoint has "model" and "optimizer" instead.
MODEL_KEY = "jax_model"
OPTIMIZER_KEY = "jax_optimizer"


class JaxStateCopy(CheckpointState):
    """tf.Variable copies of a model's and an optimizer's Keras variables (JAX backend).

    The checkpoint holds them as lists: by position, not by Keras path, whose names carry process-wide
    counters (`seed_generator_3`, `loss_scale_optimizer_1`) that differ when another model was built
    first. The order is the architecture's, and a run's config is bound to its checkpoints.
    """

    def __init__(self, model, optimizer):
        self.keras_variables = {MODEL_KEY: list(model.variables), OPTIMIZER_KEY: list(optimizer.variables)}
        with tf.device("/CPU:0"):  # beside JAX's, never in the accelerator's memory
            self.tf_variables = {
                group: [tf.Variable(np.asarray(v.value), trainable=False) for v in variables]
                for group, variables in self.keras_variables.items()
            }

    def trackables(self) -> Dict[str, object]:
        return dict(self.tf_variables)

    def copy_from_keras(self) -> None:
        for group, variables in self.keras_variables.items():
            for variable, copy in zip(variables, self.tf_variables[group]):
                copy.assign(np.asarray(variable.value))

    def before_save(self) -> None:
        self.copy_from_keras()

    def after_restore(self) -> None:
        self.copy_to_keras()

    def copy_to_keras(self) -> None:
        for group, variables in self.keras_variables.items():
            for variable, copy in zip(variables, self.tf_variables[group]):
                variable.assign(copy.numpy())
