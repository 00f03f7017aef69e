"""The self-attention half of ALBERT's post-LN transformer block."""

import math

import keras
from keras import ops

from albert_tf.layers import fused_attention, packed_rows
from albert_tf.layers.precision import layer_norm
from albert_tf.layers.remat import recompute_in_backward
from albert_tf.layers.weight_cast import compute_weight, dense_on_rows
from albert_tf.layers.weight_chain import chain_shared_weights

# The original's additive key mask: (1 - mask) * -10000.
MASK_ADDER = -10000.0


class AlbertAttention(keras.layers.Layer):
    """Multi-head self-attention, residual, LayerNorm (post-LN, as BERT).

    Computes `LayerNorm(h + dropout(W_o · softmax(q kᵀ/√D + bias) v))` where the
    bias is `(1 - input_mask) * -10000` on the keys only, as in Google's code.
    Logits and softmax are computed in float32 under mixed precision.

    Sublayer names are stable (the checkpoint converter targets them):
    `query`, `key`, `value` (kernels `[H, N, D]`), `output` (`[N, D, H]`) and
    `layer_norm`.

    Args:
        hidden_size: width H.
        num_attention_heads: heads N (D = H / N).
        initializer_range: stddev of the truncated-normal initializer.
        attention_dropout: dropout on the attention probabilities.
        output_dropout: dropout on the projected output, before the residual.
        layer_norm_epsilon: LayerNorm epsilon.
        remat: in training, keep only the inputs for the backward pass and
            recompute the rest there (see `albert_tf.layers.remat`).
        fused_qkv: compute q, k and v with one matmul against the three
            kernels concatenated at call time (the variables stay three);
            the same numbers to float rounding.

    Example:

    >>> layer = AlbertAttention(16, 4, 0.02, 0.0, 0.0)
    >>> x = keras.ops.ones((2, 5, 16))
    >>> tuple(layer(x, keras.ops.ones((2, 5), dtype="int32")).shape)
    (2, 5, 16)
    """

    def __init__(
        self,
        hidden_size,
        num_attention_heads,
        initializer_range,
        attention_dropout,
        output_dropout,
        layer_norm_epsilon=1e-12,
        remat=False,
        fused_qkv=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.remat = remat
        self.fused_qkv = fused_qkv
        # Not config. None: cuDNN's fused attention where it runs (`fused_attention.kernel_for`), else
        # the einsum path. To choose (tests, benchmarks): "einsum"; "xla" or "cudnn" (each row's key
        # length, `fused_attention.attend`); "keras": `keras.ops.dot_product_attention` with a boolean
        # key mask (the same probabilities in float32, exp(-10000) underflowing to 0, for rows that keep
        # a key). Attention dropout in training always runs the einsum path.
        self.attention_kernel = None
        # Not config: pretraining on packed rows sets it (`albert_tf.layers.packed_rows`): `input_mask` then
        # numbers instances and attention stays within each.
        self.packed_rows = False
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.initializer_range = initializer_range
        self.attention_dropout = attention_dropout
        self.output_dropout = output_dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.head_size = hidden_size // num_attention_heads

        def projection(name):
            return keras.layers.EinsumDense(
                "bsh,hnd->bsnd",
                output_shape=(None, num_attention_heads, self.head_size),
                bias_axes="nd",
                kernel_initializer=self._initializer(),
                name=name,
                dtype=self.dtype_policy,
            )

        self.query = projection("query")
        self.key = projection("key")
        self.value = projection("value")
        self.output_dense = keras.layers.EinsumDense(
            "bsnd,ndh->bsh",
            output_shape=(None, hidden_size),
            bias_axes="h",
            kernel_initializer=self._initializer(),
            name="output",
            dtype=self.dtype_policy,
        )
        self.attention_dropout_layer = keras.layers.Dropout(
            attention_dropout, name="attention_dropout", dtype=self.dtype_policy
        )
        self.output_dropout_layer = keras.layers.Dropout(output_dropout, name="output_dropout", dtype=self.dtype_policy)
        self.layer_norm = layer_norm(layer_norm_epsilon, "layer_norm", self.dtype_policy)

    def _initializer(self):
        return keras.initializers.TruncatedNormal(stddev=self.initializer_range)

    def build(self, hidden_shape, input_mask_shape=None):
        hidden_shape = tuple(hidden_shape)
        for projection in (self.query, self.key, self.value):
            projection.build(hidden_shape)
        self.output_dense.build(hidden_shape[:2] + (self.num_attention_heads, self.head_size))
        self.layer_norm.build(hidden_shape)
        self.built = True

    @chain_shared_weights
    def call(self, hidden, input_mask, training=None):
        if self.remat and training:
            return recompute_in_backward(
                lambda h, m: self._attend(h, m, training),
                (self.attention_dropout_layer, self.output_dropout_layer),
                hidden,
                input_mask,
            )
        return self._attend(hidden, input_mask, training)

    def _project_qkv(self, rows):
        projections = (self.query, self.key, self.value)
        if not self.fused_qkv:
            # 2-D GEMMs, where the 3-D einsum ran as a BatchMatMulV2 with a broadcast kernel and a
            # separate add (bench/journal/2026-11-24-batch1-graph.md).
            return [dense_on_rows(rows, p, self.compute_dtype) for p in projections]
        # One [H, 3·N·D] matmul instead of three [H, N·D] ones. Off by default:
        # the concat copies the three kernels on every call (bench/levers.py, README);
        # kept for accelerators, where one wide GEMM usually is faster.
        cast = lambda v: compute_weight(v, self.compute_dtype)  # noqa: E731
        kernel = ops.concatenate([ops.reshape(cast(p.kernel), (self.hidden_size, -1)) for p in projections], axis=1)
        bias = ops.concatenate([ops.reshape(cast(p.bias), (-1,)) for p in projections], axis=0)
        return ops.split(ops.matmul(rows, kernel) + bias, 3, axis=1)

    def _attend(self, hidden, input_mask, training):
        batch, seq = ops.shape(hidden)[0], ops.shape(hidden)[1]
        # The projections run on the B·S rows as 2-D GEMMs; heads are a reshape of their output.
        rows = ops.reshape(hidden, (-1, self.hidden_size))
        query, key, value = [
            ops.reshape(t, (batch, seq, self.num_attention_heads, self.head_size))
            for t in self._project_qkv(ops.cast(rows, self.compute_dtype))
        ]
        # Scaling q (B·S·H values) is cheaper than scaling the logits (B·N·S·S).
        query = query * ops.cast(1.0 / math.sqrt(self.head_size), self.compute_dtype)
        kernel = self.attention_kernel or fused_attention.kernel_for(self.compute_dtype, self.head_size)
        if training and self.attention_dropout > 0:
            kernel = "einsum"
        if kernel in ("xla", "cudnn"):
            # Each row's key length (cuDNN's fast case) unless rows are packed.
            mask = self._allowed(input_mask) if self.packed_rows else None
            context = fused_attention.attend(query, key, value, input_mask, kernel, mask=mask)
            return self._output(context, hidden, rows, training)
        if kernel == "keras":
            context = ops.dot_product_attention(query, key, value, mask=self._allowed(input_mask), scale=1.0)
            return self._output(context, hidden, rows, training)
        logits = ops.einsum("bqnd,bknd->bnqk", query, key)
        if self.packed_rows:
            bias = (1.0 - ops.cast(self._allowed(input_mask), "float32")) * MASK_ADDER
        else:  # the original's, [B, 1, 1, S] (by reshape: a `[:, None, None, :]` slice is no TFLite builtin)
            bias = ops.expand_dims(ops.expand_dims((1.0 - ops.cast(input_mask, "float32")) * MASK_ADDER, 1), 1)
        probs = ops.softmax(ops.cast(logits, "float32") + bias, axis=-1)
        probs = ops.cast(probs, self.compute_dtype)
        if self.attention_dropout > 0:
            probs = self.attention_dropout_layer(probs, training=training)
        context = ops.einsum("bnqk,bknd->bqnd", probs, value)
        return self._output(context, hidden, rows, training)

    def _allowed(self, input_mask):
        """bool: which keys each query attends to; [B, 1, S, S] for packed rows, else the key mask [B, 1, 1, S]."""
        if self.packed_rows:
            return packed_rows.attention_allowed(input_mask)
        return ops.expand_dims(ops.expand_dims(ops.cast(input_mask, "bool"), 1), 1)

    def _output(self, context, hidden, rows, training):
        context_rows = ops.reshape(context, (-1, self.num_attention_heads * self.head_size))
        output = dense_on_rows(context_rows, self.output_dense, self.compute_dtype)
        if self.output_dropout > 0:
            output = self.output_dropout_layer(output, training=training)
        return ops.reshape(self.layer_norm(output + rows), ops.shape(hidden))

    def compute_output_shape(self, hidden_shape, input_mask_shape=None):
        return tuple(hidden_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hidden_size": self.hidden_size,
                "num_attention_heads": self.num_attention_heads,
                "initializer_range": self.initializer_range,
                "attention_dropout": self.attention_dropout,
                "output_dropout": self.output_dropout,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "remat": self.remat,
                "fused_qkv": self.fused_qkv,
            }
        )
        return config
