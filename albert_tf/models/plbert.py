"""PlbertPretrainer: PL-BERT (Li et al. 2023), an ALBERT pretrained on phonemes, with its two heads.

PL-BERT is the text encoder of StyleTTS 2 and Kokoro. Its pretraining model is
the reference's `MultiTaskModel`: the encoder (an `AlbertBackbone` here), a
`mask_predictor` Linear(hidden, phoneme symbols) for the masked phonemes and a
`word_predictor` Linear(hidden, word vocabulary) that predicts, at every
position, the word the phoneme belongs to. The loss:
`albert_tf.pretraining.plbert_objective`; the masking:
`albert_tf.pretraining.plbert_masking`; StyleTTS 2's checkpoint layout:
`albert_tf.formats.plbert`.

Example:

>>> model = PlbertPretrainer(AlbertBackbone.from_albert_config(plbert_config(hidden_size=32,
...     num_attention_heads=2, intermediate_size=64, num_hidden_layers=2)), word_vocab_size=50)
>>> ids = keras.ops.ones((2, 8), dtype="int32")
>>> out = model({"input_ids": ids, "input_mask": ids})
>>> tuple(out["phoneme_logits"].shape), tuple(out["word_kernel"].shape)
((2, 8, 178), (32, 50))
"""

import keras
from keras import ops

from albert_tf.config import AlbertConfig
from albert_tf.models.backbone import AlbertBackbone  # noqa: F401  (the docstring example)
from albert_tf.models.task_base import TaskModel, head_initializer
from albert_tf.tokenization.plbert_symbols import NUM_SYMBOLS, SYMBOL_IDS, WORD_SEPARATOR

PLBERT_SYMBOLS = NUM_SYMBOLS  # StyleTTS 2's phoneme symbol table (the reference's `num_tokens`: 178)
SEPARATOR_ID = SYMBOL_IDS[WORD_SEPARATOR]  # the reference's `token_separator` " ", after every word
MASK_ID = SYMBOL_IDS["M"]  # the reference's `token_mask` "M"
# The reference's config.yml `dataset_params` (its masking: albert_tf.pretraining.plbert_masking).
WORD_MASK_PROB = 0.15  # `word_mask_prob`: a word is picked
REPLACE_PROB = 0.2  # `replace_prob`: a picked word is not given "M" (random or kept)
PHONEME_MASK_PROB = 0.1  # `phoneme_mask_prob`: a picked word gets random phonemes


def plbert_config(
    vocab_size=PLBERT_SYMBOLS,
    hidden_size=768,
    num_attention_heads=12,
    intermediate_size=2048,
    num_hidden_layers=12,
    max_position_embeddings=512,
    embedding_size=128,
    dropout=0.0,
) -> AlbertConfig:
    """The reference's `Configs/config.yml` `model_params` as an `AlbertConfig` (`configs/plbert_base.json`).

    What the file leaves out is HF `AlbertConfig`'s default, as the reference builds
    `AlbertConfig(**model_params)`: one group, one inner block, tanh GELU (HF's
    `gelu_new`, our `gelu`), 2 token types, initializer range 0.02, and no dropout:
    the file's `dropout: 0.1` is no HF field, so the released PL-BERT trained with HF's
    default dropout 0.0 (as ALBERT v2). `dropout` sets both of ours.
    """
    return AlbertConfig(
        vocab_size=vocab_size,
        embedding_size=embedding_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_hidden_groups=1,
        num_attention_heads=num_attention_heads,
        intermediate_size=intermediate_size,
        inner_group_num=1,
        hidden_act="gelu",
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        max_position_embeddings=max_position_embeddings,
        type_vocab_size=2,
        initializer_range=0.02,
    )


@keras.saving.register_keras_serializable(package="albert_tf")
class PlbertWordHead(keras.layers.Layer):
    """The word predictor's weights, kernel `[H, V]` and bias `[V]`, handed out as float32 tensors.

    Over a 30k–85k word vocabulary `[B, S, V]` logits do not fit in memory, so the
    model does not compute them: it outputs these weights and the loss takes them
    chunk by chunk (`plbert_objective.word_stats`). `logits(x)` gives the full
    logits for a small batch. Float32 whatever the model's policy: the loss is.
    """

    def __init__(self, word_vocab_size, initializer_range=0.02, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.word_vocab_size = word_vocab_size
        self.initializer_range = initializer_range

    def build(self, input_shape):
        self.kernel = self.add_weight(
            name="kernel",
            shape=(input_shape[-1], self.word_vocab_size),
            initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range),
        )
        self.bias = self.add_weight(name="bias", shape=(self.word_vocab_size,), initializer="zeros")

    def call(self, sequence_output):
        del sequence_output  # only sizes the kernel; the loss multiplies chunk by chunk
        return {"word_kernel": ops.multiply(self.kernel, 1.0), "word_bias": ops.multiply(self.bias, 1.0)}

    def compute_output_spec(self, sequence_output):
        return {
            "word_kernel": keras.KerasTensor((sequence_output.shape[-1], self.word_vocab_size), "float32"),
            "word_bias": keras.KerasTensor((self.word_vocab_size,), "float32"),
        }

    def logits(self, sequence_output):
        """`[..., V]` word logits (all of them: for a few positions, not for training)."""
        return ops.matmul(ops.cast(sequence_output, "float32"), self.kernel) + self.bias

    def get_config(self):
        config = super().get_config()
        config.update({"word_vocab_size": self.word_vocab_size, "initializer_range": self.initializer_range})
        config.pop("dtype", None)  # always float32
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class PlbertPretrainer(TaskModel):
    """PL-BERT's pretraining model: the backbone, a phoneme head and a word head.

    Inputs (dict): `input_ids` int32 `[B, S]` (phoneme symbol ids, masked) and
    `input_mask` int32 `[B, S]` (the instance number from 1, 0 on padding; the
    token types are all 0, as in the reference).
    Outputs (dict): `phoneme_logits` float32 `[B, S, P]` (the reference's
    `mask_predictor`), `sequence_output` `[B, S, H]`, and the word head's
    `word_kernel` float32 `[H, V]` and `word_bias` `[V]` (the reference's
    `word_predictor`, applied by the loss in chunks: `PlbertWordHead`).

    With `packed_rows=True` a row holds several instances, numbered by
    `input_mask`; attention and positions stay within each (as ALBERT's packed
    rows: `albert_tf.layers.packed_rows`). The weights are the same either way.

    Args:
        backbone: an `AlbertBackbone` (`plbert_config()` for the reference's).
        word_vocab_size: rows of the word vocabulary (`word_vocab.txt`), padding and `[UNK]` included.
        packed_rows: read packed rows (sets `backbone.packed_rows`).
    """

    reads_pooled_output = False  # the pooler gets no gradient, as in the reference
    hf_architectures = ("AlbertModel",)  # the encoder alone, as StyleTTS 2 loads it: HF has no PL-BERT heads

    def __init__(self, backbone, word_vocab_size, packed_rows=False, **kwargs):
        config = backbone.albert_config

        # === Layers ===
        phoneme_head = keras.layers.Dense(
            config.vocab_size,
            kernel_initializer=head_initializer(backbone),
            name="phoneme_head",
            dtype=backbone.dtype_policy,
        )
        word_head = PlbertWordHead(word_vocab_size, config.initializer_range, name="word_head")

        # === Functional model ===
        input_ids = keras.Input(shape=(None,), dtype="int32", name="input_ids")
        input_mask = keras.Input(shape=(None,), dtype="int32", name="input_mask")
        if packed_rows:  # (a plain model leaves a packed backbone as it is: 0/1 masks compute the same)
            backbone.packed_rows = True
        sequence_output = backbone(
            {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": ops.zeros_like(input_ids)}
        )["sequence_output"]
        phoneme_logits = ops.cast(phoneme_head(sequence_output), "float32")
        outputs = {"phoneme_logits": phoneme_logits, "sequence_output": sequence_output}
        outputs.update(word_head(sequence_output))  # word_kernel, word_bias
        super().__init__(
            inputs={"input_ids": input_ids, "input_mask": input_mask},
            outputs=outputs,
            **kwargs,
        )

        # === Config ===
        self._set_task_config(backbone, word_vocab_size=word_vocab_size, packed_rows=packed_rows)
        self.word_vocab_size = word_vocab_size
        self.packed_rows = packed_rows
        self.phoneme_head = phoneme_head
        self.word_head = word_head
