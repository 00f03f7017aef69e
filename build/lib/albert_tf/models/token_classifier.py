"""Token tagging (NER, POS): a label per token."""

import keras
from keras import ops

from albert_tf.models.task_base import TaskModel, head_initializer


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTokenClassifier(TaskModel):
    """ALBERT with a per-token classification head.

    Dropout on `sequence_output`, then a dense layer to `num_classes` logits
    per token (the usual BERT tagging head; the original has none).

    Inputs (dict): `input_ids`, `input_mask`, `segment_ids` int32 `[B, S]`.
    Outputs (dict): `logits` float32 `[B, S, num_classes]`.

    Args:
        backbone: an `AlbertBackbone`.
        num_classes: number of tags.
        dropout: dropout rate before the output layer.

    Example:

    >>> from albert_tf import AlbertBackbone
    >>> model = AlbertTokenClassifier(AlbertBackbone.from_albert_config("configs/albert_tiny.json"), 9)
    >>> ids = keras.ops.ones((2, 8), dtype="int32")
    >>> tuple(model({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids})["logits"].shape)
    (2, 8, 9)
    """

    reads_pooled_output = False
    hf_architectures = ("AlbertForTokenClassification",)  # HF's

    def __init__(self, backbone, num_classes, dropout=0.1, **kwargs):
        policy = backbone.dtype_policy

        # === Layers ===
        dropout_layer = keras.layers.Dropout(dropout, name="tagger_dropout", dtype=policy)
        output_layer = keras.layers.Dense(
            num_classes, kernel_initializer=head_initializer(backbone), name="tagger", dtype=policy
        )

        # === Functional model ===
        inputs = dict(backbone.input)
        sequence = backbone(inputs)["sequence_output"]
        logits = ops.cast(output_layer(dropout_layer(sequence)), "float32")
        super().__init__(inputs=inputs, outputs={"logits": logits}, **kwargs)

        # === Config ===
        self._set_task_config(backbone, num_classes=num_classes, dropout=dropout)
        self.output_layer = output_layer
