"""SQuAD v2.0 with the original's answerability head (XLNet style)."""

import keras
from keras import ops

from albert_tf.layers.answerability import AlbertAnswerabilityHead
from albert_tf.models.backbone import LAYER_NORM_EPSILON
from albert_tf.models.task_base import TaskModel

START_POSITIONS = "start_positions"


@keras.saving.register_keras_serializable(package="albert_tf")
class ContextPositionMask(keras.layers.Layer):
    """The original's `p_mask`: 0 where an answer may be ([CLS] and context pieces), 1 elsewhere.

    Context = segment 1 without its closing [SEP] (the last real token);
    [CLS] (position 0) stands for "no answer".
    """

    def call(self, input_mask, segment_ids):
        input_mask = ops.cast(input_mask, "int32")
        positions = ops.expand_dims(ops.arange(ops.shape(input_mask)[1], dtype="int32"), 0)
        last = ops.sum(input_mask, axis=1, keepdims=True) - 1
        context = (ops.cast(segment_ids, "int32") == 1) & (input_mask == 1) & (positions != last)
        allowed = context | (positions == 0)
        return 1 - ops.cast(allowed, "int32")

    def compute_output_spec(self, input_mask, segment_ids):
        return keras.KerasTensor(input_mask.shape, "int32")


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSpanQAv2(TaskModel):
    """ALBERT with the original SQuAD v2 head: start, end given the start, and answerability.

    The model predicts: its end logits are for the top `start_n_top` starts
    (beam search over starts; `albert_tf.tasks.squad.decode_v2` takes the top
    ends of each). `training_model()` returns the same layers wired for
    training, with the gold start as an extra input, as the original trains.

    Inputs (dict): `input_ids`, `input_mask`, `segment_ids` int32 `[B, S]`,
    packed `[CLS] question [SEP] context [SEP]` (segment 1 = context).
    Outputs (dict): `start_logits [B, S]`, `end_logits [B, start_n_top, S]`,
    `start_positions [B, start_n_top]` (int32), `cls_logits [B]` (higher =
    more likely unanswerable); logits float32, masked with −1e30 outside the context.

    Args:
        backbone: an `AlbertBackbone`.
        start_n_top: starts kept at inference (original: 5).
        dropout: dropout before the answerability logit (original: 0.1).

    Example:

    >>> from albert_tf import AlbertBackbone
    >>> model = AlbertSpanQAv2(AlbertBackbone.from_albert_config("configs/albert_tiny.json"), start_n_top=2)
    >>> ids = keras.ops.ones((1, 8), dtype="int32")
    >>> out = model({"input_ids": ids, "input_mask": ids, "segment_ids": keras.ops.ones_like(ids)})
    >>> tuple(out["end_logits"].shape), tuple(out["cls_logits"].shape)
    ((1, 2, 8), (1,))
    """

    reads_pooled_output = False

    def __init__(self, backbone, start_n_top=5, dropout=0.1, **kwargs):
        config = backbone.albert_config

        # === Layers ===
        position_mask = ContextPositionMask(name="context_position_mask", dtype=backbone.dtype_policy)
        head = AlbertAnswerabilityHead(
            config.hidden_size,
            start_n_top=start_n_top,
            dropout=dropout,
            initializer_range=config.initializer_range,
            layer_norm_epsilon=LAYER_NORM_EPSILON,
            name="answerability_head",
            dtype=backbone.dtype_policy,
        )

        # === Functional model ===
        inputs = dict(backbone.input)
        sequence_output = backbone(inputs)["sequence_output"]
        outputs = head(sequence_output, position_mask(inputs["input_mask"], inputs["segment_ids"]))
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self._set_task_config(backbone, start_n_top=start_n_top, dropout=dropout)
        self.position_mask = position_mask
        self.head = head

    def training_model(self) -> keras.Model:
        """The same layers with the gold start as input `start_positions [B, 1]`.

        Outputs `start_logits [B, S]`, `end_logits [B, 1, S]` (for the gold
        start) and `cls_logits [B]`; training it trains this model.
        """
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in self.backbone.input}
        inputs[START_POSITIONS] = keras.Input(shape=(1,), dtype="int32", name=START_POSITIONS)
        sequence_output = self.backbone({name: inputs[name] for name in self.backbone.input})["sequence_output"]
        p_mask = self.position_mask(inputs["input_mask"], inputs["segment_ids"])
        outputs = self.head(sequence_output, p_mask, inputs[START_POSITIONS])
        outputs = {name: outputs[name] for name in ("start_logits", "end_logits", "cls_logits")}
        return keras.Model(inputs=inputs, outputs=outputs, name=f"{self.name}_training")
