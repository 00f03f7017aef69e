"""AlbertBackbone: embeddings, shared transformer layers, pooler."""

import keras

from albert_tf.config import AlbertConfig
from albert_tf.layers.attention import AlbertAttention
from albert_tf.layers.embedding import AlbertEmbedding
from albert_tf.layers.feedforward import AlbertFeedForward
from albert_tf.layers.weight_cast import SharedWeightCasts
from albert_tf.layers.weight_chain import SharedWeightChain

LAYER_NORM_EPSILON = 1e-12


def group_index(layer_index, num_layers, num_groups):
    """The original's routing, float arithmetic included: `int(l / L * G)`.

    It differs from `l * G // L` for a few (L, G) pairs (e.g. L = G = 22), so it
    is copied exactly.
    """
    return int(layer_index / num_layers * num_groups)


def block_slot(component, layer_index, num_layers, num_groups, sharing):
    """Name prefix of the weights layer `layer_index` uses for `component`.

    `component` is `attention` or `ffn`. A component that is shared (by
    `sharing`) follows the group routing (`group_{g}`); one that is not gets
    its own weights in every layer (`layer_{l}`).
    """
    shared = sharing == "all" or sharing == component
    if shared:
        return f"group_{group_index(layer_index, num_layers, num_groups)}"
    return f"layer_{layer_index}"


def block_name(slot, inner_index, component):
    """Stable layer name, e.g. `group_0_inner_0_attention`."""
    return f"{slot}_inner_{inner_index}_{component}"


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertBackbone(keras.Model):
    """The ALBERT encoder, as Google's `AlbertModel`.

    Factorized embedding (width E), an E→H projection when E ≠ H, then L layer
    applications routed over `num_hidden_groups` × `inner_group_num` blocks of
    post-LN attention + FFN, and a tanh pooler on the first token.

    The keyword arguments are the `albert_config.json` field names (see
    `AlbertConfig`), so `AlbertBackbone(**config.backbone_kwargs())` builds the
    model for a config; `AlbertBackbone.from_albert_config` does just that.

    Inputs (dict): `input_ids`, `input_mask`, `segment_ids`, int32 `[B, S]`.
    Outputs (dict): `sequence_output` `[B, S, H]`, `pooled_output` `[B, H]`,
    and with `output_all_layers=True` also `encoder_outputs`, the list of the
    L·K block outputs (as the original's `all_encoder_layers`).

    `remat=True` recomputes every attention and FFN application in the
    backward pass (training only) instead of storing its activations: the
    activation memory of training drops several-fold for ~1/3 more compute;
    the numbers computed are the same.

    Example:

    >>> config = AlbertConfig.from_json_file("configs/albert_tiny.json")
    >>> backbone = AlbertBackbone.from_albert_config(config)
    >>> ids = keras.ops.ones((1, 8), dtype="int32")
    >>> out = backbone({"input_ids": ids, "input_mask": ids,
    ...                 "segment_ids": keras.ops.zeros_like(ids)})
    >>> tuple(out["pooled_output"].shape) == (1, config.hidden_size)
    True
    """

    # The same model in the peers' formats (albert_tf.formats): HF architectures, first one written.
    hf_architectures = ("AlbertModel",)

    def __init__(
        self,
        vocab_size,
        embedding_size,
        hidden_size,
        num_hidden_layers,
        num_hidden_groups,
        num_attention_heads,
        intermediate_size,
        inner_group_num,
        hidden_act,
        hidden_dropout_prob,
        attention_probs_dropout_prob,
        max_position_embeddings,
        type_vocab_size,
        initializer_range,
        sharing="all",
        output_all_layers=False,
        remat=False,
        dtype=None,
        **kwargs,
    ):
        # Validates every field with errors that name it.
        config = AlbertConfig(
            vocab_size=vocab_size,
            embedding_size=embedding_size,
            hidden_size=hidden_size,
            num_hidden_layers=num_hidden_layers,
            num_hidden_groups=num_hidden_groups,
            num_attention_heads=num_attention_heads,
            intermediate_size=intermediate_size,
            inner_group_num=inner_group_num,
            hidden_act=hidden_act,
            hidden_dropout_prob=hidden_dropout_prob,
            attention_probs_dropout_prob=attention_probs_dropout_prob,
            max_position_embeddings=max_position_embeddings,
            type_vocab_size=type_vocab_size,
            initializer_range=initializer_range,
            sharing=sharing,
        )
        policy = keras.dtype_policies.get(dtype)

        def initializer():
            # A fresh instance per weight: Keras 3 gives an unseeded instance one
            # fixed seed, so a shared one would draw the same values twice.
            return keras.initializers.TruncatedNormal(stddev=initializer_range)

        # === Layers ===
        embeddings = AlbertEmbedding(
            vocab_size=vocab_size,
            embedding_size=embedding_size,
            max_position_embeddings=max_position_embeddings,
            type_vocab_size=type_vocab_size,
            initializer_range=initializer_range,
            dropout=hidden_dropout_prob,
            layer_norm_epsilon=LAYER_NORM_EPSILON,
            name="embeddings",
            dtype=policy,
        )
        projection = None
        if embedding_size != hidden_size:
            projection = keras.layers.Dense(
                hidden_size,
                kernel_initializer=initializer(),
                name="embedding_projection",
                dtype=policy,
            )
        blocks = {}  # layer name -> layer; one entry per distinct weight set

        def block(component, layer_index, inner_index):
            slot = block_slot(
                component,
                layer_index,
                num_hidden_layers,
                num_hidden_groups,
                sharing,
            )
            name = block_name(slot, inner_index, component)
            if name not in blocks:
                if component == "attention":
                    blocks[name] = AlbertAttention(
                        hidden_size=hidden_size,
                        num_attention_heads=num_attention_heads,
                        initializer_range=initializer_range,
                        attention_dropout=attention_probs_dropout_prob,
                        output_dropout=hidden_dropout_prob,
                        layer_norm_epsilon=LAYER_NORM_EPSILON,
                        remat=remat,
                        name=name,
                        dtype=policy,
                    )
                else:
                    blocks[name] = AlbertFeedForward(
                        hidden_size=hidden_size,
                        intermediate_size=intermediate_size,
                        hidden_act=hidden_act,
                        initializer_range=initializer_range,
                        dropout=hidden_dropout_prob,
                        layer_norm_epsilon=LAYER_NORM_EPSILON,
                        remat=remat,
                        name=name,
                        dtype=policy,
                    )
            return blocks[name]

        pooler = keras.layers.Dense(
            hidden_size,
            activation="tanh",
            kernel_initializer=initializer(),
            name="pooler",
            dtype=policy,
        )

        # === Functional model ===
        input_ids = keras.Input(shape=(None,), dtype="int32", name="input_ids")
        input_mask = keras.Input(shape=(None,), dtype="int32", name="input_mask")
        segment_ids = keras.Input(shape=(None,), dtype="int32", name="segment_ids")

        x = embeddings(input_ids, segment_ids, input_mask)
        if projection is not None:
            x = projection(x)
        encoder_outputs = []
        applications = []
        for layer_index in range(num_hidden_layers):
            for inner_index in range(inner_group_num):
                applications += [block("attention", layer_index, inner_index), block("ffn", layer_index, inner_index)]
                x = applications[-2](x, input_mask)
                x = applications[-1](x)
                encoder_outputs.append(x)
        pooled_output = pooler(x[:, 0, :])
        outputs = {"sequence_output": x, "pooled_output": pooled_output}
        if output_all_layers:
            outputs["encoder_outputs"] = encoder_outputs
        super().__init__(
            inputs={
                "input_ids": input_ids,
                "input_mask": input_mask,
                "segment_ids": segment_ids,
            },
            outputs=outputs,
            **kwargs,
        )
        # Functional models drop a `dtype` argument; set it so task heads (which take
        # `backbone.dtype_policy`) and `get_config` see the backbone's policy.
        self.dtype_policy = policy

        # === Config ===
        self.albert_config = config
        self.output_all_layers = output_all_layers
        self.remat = remat
        self.embeddings = embeddings
        self.embedding_projection = projection
        self.pooler = pooler
        self.block_names = tuple(blocks)
        # How often a forward pass applies each block (shared ones: several times).
        self.block_applications = {name: applications.count(layer) for name, layer in blocks.items()}
        # Training sums a shared weight's gradient one application at a time
        # (albert_tf.layers.weight_chain; xxlarge's b1 x 512 step 14.1 -> 8.6 GB, no cost in
        # speed). An attribute, not config: it changes memory, never what the model computes.
        self.chain_shared_weights = True

    def call(self, inputs, training=None, mask=None, **kwargs):
        if training and self.chain_shared_weights and keras.backend.backend() == "tensorflow":
            uses = [(self.get_layer(name), count) for name, count in self.block_applications.items()]
            with SharedWeightChain(uses):
                return super().call(inputs, training=training, mask=mask, **kwargs)
        if not training and self.compute_dtype != self.variable_dtype:
            # Mixed precision: each shared kernel is cast once, not once per layer application.
            with SharedWeightCasts():
                return super().call(inputs, training=training, mask=mask, **kwargs)
        return super().call(inputs, training=training, mask=mask, **kwargs)

    @classmethod
    def from_albert_config(cls, config, **kwargs):
        """Builds the backbone for an `AlbertConfig` (or a config file path)."""
        if isinstance(config, str):
            config = AlbertConfig.from_json_file(config)
        model = cls(**config.backbone_kwargs(), **kwargs)
        # The constructor's config has the architecture fields only; keep the file's
        # passthrough keys (`gap_size`, ...) so a saved albert_config.json writes them back.
        model.albert_config = config
        return model

    @property
    def packed_rows(self) -> bool:
        """Whether `input_mask` numbers several instances a row (`albert_tf.layers.packed_rows`).

        Not config: pretraining on packed data sets it; on a mask of 0s and 1s the model computes the same
        either way, so a saved or exported model never carries it.
        """
        return self.embeddings.packed_rows

    @packed_rows.setter
    def packed_rows(self, value: bool):
        self.embeddings.packed_rows = value
        for name in self.block_names:
            layer = self.get_layer(name)
            if isinstance(layer, AlbertAttention):
                layer.packed_rows = value

    @property
    def word_embeddings(self):
        """The `[V, E]` word `Embedding` layer (the MLM decoder is tied to it)."""
        return self.embeddings.word_embeddings

    def get_config(self):
        config = {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            "output_all_layers": self.output_all_layers,
            "remat": self.remat,
        }
        config.update(self.albert_config.backbone_kwargs())
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)
