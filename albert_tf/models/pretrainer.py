"""AlbertPretrainer: the backbone with the masked-LM and SOP heads (the loss: `albert_tf.pretraining.objective`)."""

import keras
from keras import ops

from albert_tf.layers.heads import AlbertMaskedLMHead, gather_positions
from albert_tf.models.backbone import LAYER_NORM_EPSILON, AlbertBackbone  # noqa: F401  (the docstring example)
from albert_tf.models.task_base import TaskModel


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertPretrainer(TaskModel):
    """ALBERT with the pretraining heads of Google's `run_pretraining.py`.

    Inputs (dict): the backbone's `input_ids`, `input_mask`, `segment_ids`,
    plus `masked_lm_positions` int32 `[B, P]`.
    Outputs (dict): `mlm_logits` float32 `[B, P, V]` (computed only at the
    masked positions; the decoder is the word-embedding table) and
    `sop_logits` float32 `[B, 2]` (label 1 = swapped / random next).

    With `packed_rows=True` a row holds up to K instances (`data_prep.packing`):
    `input_mask` numbers each token's instance from 1, the backbone keeps the
    instances apart (`albert_tf.layers.packed_rows`), an input `cls_positions`
    int32 `[B, K]` says where each instance's `[CLS]` is, and `sop_logits` is
    `[B, K, 2]`, one pair per instance slot (empty slots: any position, weighted 0
    in the loss). The weights are the same as without packing.

    Args:
        backbone: an `AlbertBackbone`.
        packed_rows: read packed rows (sets `backbone.packed_rows`).

    Example:

    >>> backbone = AlbertBackbone.from_albert_config("configs/albert_tiny.json")
    >>> model = AlbertPretrainer(backbone)
    >>> ids = keras.ops.ones((2, 8), dtype="int32")
    >>> out = model({"input_ids": ids, "input_mask": ids,
    ...              "segment_ids": keras.ops.zeros_like(ids),
    ...              "masked_lm_positions": keras.ops.ones((2, 3), "int32")})
    >>> tuple(out["sop_logits"].shape)
    (2, 2)
    """

    hf_architectures = ("AlbertForPreTraining", "AlbertForMaskedLM")  # HF's, first one written
    keras_hub_task = "masked_lm"

    def __init__(self, backbone, packed_rows=False, **kwargs):
        config = backbone.albert_config
        policy = backbone.dtype_policy

        # === Layers ===
        mlm_head = AlbertMaskedLMHead(
            backbone.word_embeddings,
            hidden_act=config.hidden_act,
            initializer_range=config.initializer_range,
            layer_norm_epsilon=LAYER_NORM_EPSILON,
            name="mlm_head",
            dtype=policy,
        )
        sop_head = keras.layers.Dense(
            2,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=config.initializer_range),
            name="sop_head",
            dtype=policy,
        )

        # === Functional model ===
        inputs = dict(backbone.input)
        inputs["masked_lm_positions"] = keras.Input(shape=(None,), dtype="int32", name="masked_lm_positions")
        if packed_rows:  # (a plain pretrainer leaves a packed backbone as it is: 0/1 masks compute the same)
            backbone.packed_rows = True
        backbone_outputs = backbone({k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids")})
        mlm_logits = mlm_head(backbone_outputs["sequence_output"], inputs["masked_lm_positions"])
        pooled_output = backbone_outputs["pooled_output"]
        if packed_rows:  # the pooler on every instance's [CLS]
            inputs["cls_positions"] = keras.Input(shape=(None,), dtype="int32", name="cls_positions")
            cls_vectors = gather_positions(backbone_outputs["sequence_output"], inputs["cls_positions"])
            pooled_output = backbone.pooler(cls_vectors)
        sop_logits = ops.cast(sop_head(pooled_output), "float32")
        super().__init__(
            inputs=inputs,
            outputs={"mlm_logits": mlm_logits, "sop_logits": sop_logits},
            **kwargs,
        )

        # === Config ===
        self._set_task_config(backbone, packed_rows=packed_rows)
        self.packed_rows = packed_rows
        self.mlm_head = mlm_head
        self.sop_head = sop_head
