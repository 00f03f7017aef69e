import math

import keras
import numpy as np

from albert_tf.layers import AlbertAttention, AlbertEmbedding, AlbertFeedForward, AlbertMaskedLMHead
from albert_tf.layers.activations import gelu_tanh

from helpers import run_layer_test

RNG = np.random.default_rng(0)


def hidden(seq_len, width=16, batch=2):
    return RNG.standard_normal((batch, seq_len, width)).astype("float32")


def mask(seq_len, batch=2):
    m = np.ones((batch, seq_len), "int32")
    m[1, seq_len // 2 :] = 0  # second example is padded
    return m


def test_embedding_layer():
    run_layer_test(
        AlbertEmbedding,
        dict(
            vocab_size=50,
            embedding_size=8,
            max_position_embeddings=16,
            type_vocab_size=2,
            initializer_range=0.02,
            dropout=0.1,
        ),
        lambda s: (RNG.integers(0, 50, (2, s)).astype("int32"), RNG.integers(0, 2, (2, s)).astype("int32")),
        lambda s: (2, s, 8),
    )


def test_attention_layer():
    run_layer_test(
        AlbertAttention,
        dict(hidden_size=16, num_attention_heads=4, initializer_range=0.02, attention_dropout=0.1, output_dropout=0.1),
        lambda s: (hidden(s), mask(s)),
        lambda s: (2, s, 16),
    )


def test_feedforward_layer():
    run_layer_test(
        AlbertFeedForward,
        dict(hidden_size=16, intermediate_size=32, hidden_act="gelu", initializer_range=0.02, dropout=0.1),
        lambda s: (hidden(s),),
        lambda s: (2, s, 16),
    )


def test_masked_lm_head_layer():
    table = keras.layers.Embedding(50, 8, name="word_embeddings")
    table.build((None,))
    run_layer_test(
        AlbertMaskedLMHead,
        dict(hidden_act="gelu", initializer_range=0.02),
        lambda s: (hidden(s), RNG.integers(0, s, (2, 3)).astype("int32")),
        lambda s: (2, 3, 50),
        rebuild_kwargs={"word_embeddings": table},
    )


def test_attention_masks_keys_with_the_original_additive_constant():
    layer = AlbertAttention(16, 4, 0.02, 0.0, 0.0)
    x, m = hidden(6), mask(6)
    out = keras.ops.convert_to_numpy(layer(x, m))
    # NumPy version of the original: logits/√D + (1-mask)·-10000 on keys.
    heads, size = 4, 4

    def proj(dense):
        return (
            (x @ dense.kernel.numpy().reshape(16, 16) + dense.bias.numpy().reshape(16))
            .reshape(2, 6, heads, size)
            .transpose(0, 2, 1, 3)
        )

    q, k, v = proj(layer.query), proj(layer.key), proj(layer.value)
    logits = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + (1 - m[:, None, None, :]) * -10000.0
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(2, 6, 16)
    a = ctx @ layer.output_dense.kernel.numpy().reshape(16, 16) + layer.output_dense.bias.numpy() + x
    a = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-12)
    np.testing.assert_allclose(out, a, atol=1e-5)
    # Padded keys do not influence the unpadded queries' outputs.
    x2 = x.copy()
    x2[1, 3:] += 5.0
    out2 = keras.ops.convert_to_numpy(layer(x2, m))
    np.testing.assert_allclose(out2[1, :3], out[1, :3], atol=1e-5)


def test_gelu_is_the_tanh_approximation():
    x = np.linspace(-4, 4, 101).astype("float32")
    expected = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(gelu_tanh(x)), expected, atol=1e-6)
    erf_form = keras.ops.convert_to_numpy(keras.activations.gelu(x, approximate=False))
    assert np.max(np.abs(erf_form - expected)) > 1e-4  # the two forms really differ


def test_layer_norm_epsilon_is_the_originals():
    for layer in (AlbertAttention(16, 4, 0.02, 0.0, 0.0), AlbertFeedForward(16, 32, "gelu", 0.02, 0.0)):
        assert layer.layer_norm.epsilon == 1e-12


def test_dropout_is_active_only_in_training():
    layer = AlbertFeedForward(16, 32, "gelu", 0.02, dropout=0.5)
    x = hidden(7)
    a = keras.ops.convert_to_numpy(layer(x, training=False))
    b = keras.ops.convert_to_numpy(layer(x, training=False))
    c = keras.ops.convert_to_numpy(layer(x, training=True))
    np.testing.assert_array_equal(a, b)
    assert np.max(np.abs(a - c)) > 1e-3
