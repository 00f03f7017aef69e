"""A JAX run's variables in a TensorFlow checkpoint: one tf.Variable copy of each, keyed by its Keras path.

Used by pretraining's and fine-tuning's checkpoints alike.

Under Keras' JAX backend the model's and optimizer's variables hold JAX arrays, which
`tf.train.Checkpoint` cannot track. Their values are copied into tf.Variables before each
save and back after each restore, so a JAX run keeps every property of the TensorFlow
run's checkpoints (atomic files, `CheckpointManager`'s keep/rollback/discard, the input
iterator in the same checkpoint). The model's variables include the dropout layers' seed
generator states, so a resumed run draws the masks an uninterrupted one would. The copies
live on the host: one more copy of the weights and optimizer slots in host memory.
"""

from typing import Dict, List

import numpy as np
import tensorflow as tf

# Checkpoint object names; a TensorFlow run's checkpoint has "model" and "optimizer" instead.
MODEL_KEY = "jax_model"
OPTIMIZER_KEY = "jax_optimizer"


def _by_path(variables: List) -> Dict[str, object]:
    named = {}
    for index, variable in enumerate(variables):
        key = variable.path if variable.path not in named else f"{variable.path}#{index}"
        named[key] = variable
    return named


class JaxStateCopy:
    """tf.Variable copies of a model's and an optimizer's Keras variables (JAX backend)."""

    def __init__(self, model, optimizer):
        self.keras_variables = {MODEL_KEY: _by_path(model.variables), OPTIMIZER_KEY: _by_path(optimizer.variables)}
        self.tf_variables = {
            group: {key: tf.Variable(np.asarray(v.value), trainable=False) for key, v in variables.items()}
            for group, variables in self.keras_variables.items()
        }

    def trackables(self) -> Dict[str, object]:
        return dict(self.tf_variables)

    def copy_from_keras(self) -> None:
        for group, variables in self.keras_variables.items():
            for key, variable in variables.items():
                self.tf_variables[group][key].assign(np.asarray(variable.value))

    def copy_to_keras(self) -> None:
        for group, variables in self.keras_variables.items():
            for key, variable in variables.items():
                variable.assign(self.tf_variables[group][key].numpy())
