"""Multiple choice (RACE): one score per option, softmax over the options."""

import keras
from keras import ops

from albert_tf.models.task_base import TaskModel, head_initializer


@keras.saving.register_keras_serializable(package="albert_tf")
class ChoicesToBatch(keras.layers.Layer):
    """`[B, C, S]` → `[B·C, S]`, so the backbone sees one option per row."""

    def call(self, x):
        return ops.reshape(x, (-1, ops.shape(x)[-1]))

    def compute_output_shape(self, input_shape):
        return (None, input_shape[-1])


@keras.saving.register_keras_serializable(package="albert_tf")
class ScoresToChoices(keras.layers.Layer):
    """`[B·C, 1]` scores → `[B, C]`."""

    def __init__(self, num_choices, **kwargs):
        super().__init__(**kwargs)
        self.num_choices = num_choices

    def call(self, x):
        return ops.reshape(x, (-1, self.num_choices))

    def compute_output_shape(self, input_shape):
        return (None, self.num_choices)

    def get_config(self):
        return {**super().get_config(), "num_choices": self.num_choices}


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertMultipleChoice(TaskModel):
    """ALBERT with the original `run_race.py` head.

    Each option is packed on its own (`[CLS] article [SEP] question+option
    [SEP]`); dropout on its `pooled_output`, `output_weights [1, H]`, and the
    scores reshaped to `[B, num_choices]`.

    Inputs (dict): `input_ids`, `input_mask`, `segment_ids` int32 `[B, C, S]`.
    Outputs (dict): `logits` float32 `[B, C]`.

    Args:
        backbone: an `AlbertBackbone`.
        num_choices: options per question (4 for RACE).
        dropout: dropout rate before the output layer (the README's v2 setting is 0).

    Example:

    >>> from albert_tf import AlbertBackbone
    >>> model = AlbertMultipleChoice(AlbertBackbone.from_albert_config("configs/albert_tiny.json"))
    >>> ids = keras.ops.ones((2, 4, 8), dtype="int32")
    >>> tuple(model({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids})["logits"].shape)
    (2, 4)
    """

    hf_architectures = ("AlbertForMultipleChoice",)  # HF's

    def __init__(self, backbone, num_choices=4, dropout=0.1, **kwargs):
        policy = backbone.dtype_policy

        # === Layers ===
        to_batch = ChoicesToBatch(name="choices_to_batch", dtype=policy)
        dropout_layer = keras.layers.Dropout(dropout, name="choice_dropout", dtype=policy)
        output_layer = keras.layers.Dense(
            1, kernel_initializer=head_initializer(backbone), name="choice_scorer", dtype=policy
        )
        to_choices = ScoresToChoices(num_choices, name="scores_to_choices", dtype=policy)

        # === Functional model ===
        inputs = {
            name: keras.Input(shape=(num_choices, None), dtype="int32", name=name)
            for name in ("input_ids", "input_mask", "segment_ids")
        }
        pooled = backbone({name: to_batch(tensor) for name, tensor in inputs.items()})["pooled_output"]
        logits = ops.cast(to_choices(output_layer(dropout_layer(pooled))), "float32")
        super().__init__(inputs=inputs, outputs={"logits": logits}, **kwargs)

        # === Config ===
        self._set_task_config(backbone, num_choices=num_choices, dropout=dropout)
        self.output_layer = output_layer
