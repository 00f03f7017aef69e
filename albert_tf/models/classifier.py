"""Sentence (pair) classification and regression: GLUE's head."""

import keras
from keras import ops

from albert_tf.models.task_base import TaskModel, head_initializer, label_config


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertClassifier(TaskModel):
    """ALBERT with the original `run_classifier.py` head.

    Dropout (0.1, hard-coded in the original even for v2) on `pooled_output`,
    then a dense layer to `num_classes` logits. Regression (STS-B) is
    `num_classes=1`: `logits[:, 0]` is the score.

    Inputs (dict): `input_ids`, `input_mask`, `segment_ids` int32 `[B, S]`.
    Outputs (dict): `logits` float32 `[B, num_classes]`.

    Args:
        backbone: an `AlbertBackbone`.
        num_classes: number of labels (1 for regression).
        dropout: dropout rate before the output layer.
        labels: the class names in class order (saved in the config; what `predict`
            and every export print); None: none known.

    Example:

    >>> from albert_tf import AlbertBackbone
    >>> model = AlbertClassifier(AlbertBackbone.from_albert_config("configs/albert_tiny.json"), num_classes=3)
    >>> ids = keras.ops.ones((2, 8), dtype="int32")
    >>> tuple(model({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids})["logits"].shape)
    (2, 3)
    """

    hf_architectures = ("AlbertForSequenceClassification",)  # HF's
    keras_hub_task = "classifier"

    def __init__(self, backbone, num_classes, dropout=0.1, labels=None, **kwargs):
        policy = backbone.dtype_policy

        # === Layers ===
        dropout_layer = keras.layers.Dropout(dropout, name="classifier_dropout", dtype=policy)
        output_layer = keras.layers.Dense(
            num_classes, kernel_initializer=head_initializer(backbone), name="classifier", dtype=policy
        )

        # === Functional model ===
        inputs = dict(backbone.input)
        pooled = backbone(inputs)["pooled_output"]
        logits = ops.cast(output_layer(dropout_layer(pooled)), "float32")
        super().__init__(inputs=inputs, outputs={"logits": logits}, **kwargs)

        # === Config ===
        self._set_task_config(backbone, num_classes=num_classes, dropout=dropout, **label_config(labels, num_classes))
        self.output_layer = output_layer
