"""Extractive question answering (SQuAD v1.1): start and end logits per token."""

import keras
from keras import ops

from albert_tf.models.task_base import TaskModel, head_initializer


@keras.saving.register_keras_serializable(package="albert_tf")
class SplitLogits(keras.layers.Layer):
    """`[B, S, 2]` → start `[B, S]`, end `[B, S]` (float32)."""

    def call(self, x):
        x = ops.cast(x, "float32")
        return x[..., 0], x[..., 1]

    def compute_output_shape(self, input_shape):
        return input_shape[:-1], input_shape[:-1]


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSpanQA(TaskModel):
    """ALBERT with the original SQuAD v1 head (`cls/squad/output_weights [2, H]`, no dropout).

    Inputs (dict): `input_ids`, `input_mask`, `segment_ids` int32 `[B, S]`.
    Outputs (dict): `start_logits`, `end_logits` float32 `[B, S]`.

    Args:
        backbone: an `AlbertBackbone`.

    Example:

    >>> from albert_tf import AlbertBackbone
    >>> model = AlbertSpanQA(AlbertBackbone.from_albert_config("configs/albert_tiny.json"))
    >>> ids = keras.ops.ones((2, 8), dtype="int32")
    >>> out = model({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids})
    >>> tuple(out["start_logits"].shape), tuple(out["end_logits"].shape)
    ((2, 8), (2, 8))
    """

    reads_pooled_output = False
    hf_architectures = ("AlbertForQuestionAnswering",)  # HF's

    def __init__(self, backbone, **kwargs):
        policy = backbone.dtype_policy

        # === Layers ===
        output_layer = keras.layers.Dense(
            2, kernel_initializer=head_initializer(backbone), name="span_scorer", dtype=policy
        )
        split = SplitLogits(name="split_logits", dtype=policy)

        # === Functional model ===
        inputs = dict(backbone.input)
        start_logits, end_logits = split(output_layer(backbone(inputs)["sequence_output"]))
        super().__init__(inputs=inputs, outputs={"start_logits": start_logits, "end_logits": end_logits}, **kwargs)

        # === Config ===
        self._set_task_config(backbone)
        self.output_layer = output_layer
