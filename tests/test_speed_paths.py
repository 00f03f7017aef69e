"""The speed and memory paths compute the same numbers as the plain ones.

Remat (recompute each layer application in the backward pass) gives the same
loss and gradients, dropout included; the fused QKV projection gives the same
outputs as three separate ones; the XLA-compiled serving function gives the
same outputs as the graph one. No timings here: `bench/` measures speed.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertBackbone, AlbertConfig, AlbertPretrainer
from albert_tf.layers import AlbertAttention
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.pretraining.objective import pretraining_loss

RNG = np.random.default_rng(7)


def tiny(**overrides):
    with open("configs/albert_tiny.json") as f:
        values = json.load(f)
    values.update(overrides)
    return AlbertConfig.from_dict(values)


def pretraining_batch(config, batch=2, seq_len=12, positions=3):
    ids = RNG.integers(5, config.vocab_size, (batch, seq_len)).astype("int32")
    mask = np.ones((batch, seq_len), "int32")
    mask[1, seq_len - 3 :] = 0
    return {
        "input_ids": ids,
        "input_mask": mask,
        "segment_ids": (np.arange(seq_len) >= seq_len // 2).astype("int32")[None].repeat(batch, 0),
        "masked_lm_positions": RNG.integers(1, seq_len - 3, (batch, positions)).astype("int32"),
        "masked_lm_ids": RNG.integers(5, config.vocab_size, (batch, positions)).astype("int32"),
        "masked_lm_weights": np.ones((batch, positions), "float32"),
        "next_sentence_labels": RNG.integers(0, 2, (batch, 1)).astype("int32"),
    }


def seed_states(model):
    return [v for v in model.variables if "seed_generator_state" in v.path]


def loss_and_gradients(model, features, steps=1):
    names = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            out = model({k: features[k] for k in names}, training=True)
            loss = pretraining_loss(out, features)
        return loss, tape.gradient(loss, model.trainable_variables)

    results = [step() for _ in range(steps)]
    return [(float(loss), [tf.convert_to_tensor(g).numpy() for g in grads]) for loss, grads in results]


def twin_pretrainers(config, dtype=None):
    plain = AlbertPretrainer(AlbertBackbone.from_albert_config(config, dtype=dtype))
    remat = AlbertPretrainer(AlbertBackbone.from_albert_config(config, dtype=dtype, remat=True))
    remat.set_weights(plain.get_weights())
    # Dropout seed states are variables, not weights: copy them too.
    for mine, theirs in zip(seed_states(remat), seed_states(plain), strict=True):
        mine.assign(theirs.numpy())
    return plain, remat


@pytest.mark.slow
@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_remat_gives_the_same_loss_and_gradients(dropout):
    config = tiny(
        num_hidden_groups=2, inner_group_num=2, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout
    )
    plain, remat = twin_pretrainers(config)
    assert all(layer.remat for layer in remat.backbone.layers if hasattr(layer, "remat"))
    features = {k: tf.constant(v) for k, v in pretraining_batch(config).items()}
    # Two steps: the second checks that remat leaves the dropout seeds where
    # the plain model leaves them (new masks every step, the same ones).
    expected = loss_and_gradients(plain, features, steps=2)
    got = loss_and_gradients(remat, features, steps=2)
    for (loss, grads), (remat_loss, remat_grads) in zip(expected, got):
        np.testing.assert_allclose(remat_loss, loss, rtol=1e-6)
        assert len(grads) == len(remat_grads)
        for g, r in zip(grads, remat_grads):
            np.testing.assert_allclose(r, g, rtol=1e-5, atol=1e-7)
    if dropout:
        assert expected[0][0] != expected[1][0]  # the masks did change between steps
        for a, b in zip(seed_states(plain), seed_states(remat)):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_remat_is_in_the_config_and_off_in_inference():
    config = tiny()
    backbone = AlbertBackbone.from_albert_config(config, remat=True)
    clone = AlbertBackbone.from_config(backbone.get_config())
    assert clone.remat and clone.get_config() == backbone.get_config()
    assert AlbertBackbone.from_albert_config(config).get_config()["remat"] is False
    clone.set_weights(backbone.get_weights())
    inputs = {k: v for k, v in pretraining_batch(config).items() if k in ("input_ids", "input_mask", "segment_ids")}
    np.testing.assert_array_equal(clone(inputs)["sequence_output"], backbone(inputs)["sequence_output"])


@pytest.mark.slow
def test_remat_under_mixed_precision():
    config = tiny()
    plain, remat = twin_pretrainers(config, dtype="mixed_bfloat16")
    features = {k: tf.constant(v) for k, v in pretraining_batch(config).items()}
    ((loss, grads),) = loss_and_gradients(plain, features)
    ((remat_loss, remat_grads),) = loss_and_gradients(remat, features)
    np.testing.assert_allclose(remat_loss, loss, rtol=1e-6)
    for g, r in zip(grads, remat_grads):
        np.testing.assert_allclose(r, g, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_fused_qkv_matches_three_projections(dtype):
    fused = AlbertAttention(32, 4, 0.02, 0.0, 0.0, fused_qkv=True, dtype=dtype)
    plain = AlbertAttention(32, 4, 0.02, 0.0, 0.0, fused_qkv=False, dtype=dtype)
    x = RNG.standard_normal((3, 9, 32)).astype("float32")
    mask = np.ones((3, 9), "int32")
    mask[2, 5:] = 0
    fused(x, mask)
    plain(x, mask)
    plain.set_weights(fused.get_weights())
    # Give the biases values, so that their concatenation is checked too.
    for layer in (fused, plain):
        for projection in (layer.query, layer.key, layer.value):
            projection.bias.assign(np.linspace(-1, 1, 32, dtype="float32").reshape(4, 8))
    tolerance = 1e-6 if dtype == "float32" else 2e-2
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(fused(x, mask)), keras.ops.convert_to_numpy(plain(x, mask)), atol=tolerance, rtol=0
    )


@pytest.mark.slow
def test_xla_serving_default_matches_the_graph_one(tmp_path):
    from albert_tf.export import export_saved_model
    from albert_tf.export.common import random_inputs

    model = AlbertPretrainer(AlbertBackbone.from_albert_config(tiny()))
    paths = {
        jit: export_saved_model(model, str(tmp_path / f"jit_{jit}"), version=1, warmup=False, jit_compile=jit)
        for jit in (False, True)
    }
    inputs = {k: tf.constant(v) for k, v in random_inputs(model, 3, 10).items()}
    outputs = {jit: tf.saved_model.load(path).signatures["serving_default"](**inputs) for jit, path in paths.items()}
    assert sorted(outputs[True]) == sorted(outputs[False])
    for name, value in outputs[False].items():
        np.testing.assert_allclose(outputs[True][name].numpy(), value.numpy(), atol=1e-5, rtol=0)
    # The compiled function is in the SavedModel (TF Serving compiles it on load).
    with open(f"{paths[True]}/saved_model.pb", "rb") as f:
        assert b"_XlaMustCompile" in f.read()


def test_dot_product_attention_path_matches_the_einsum_one():
    layer = AlbertAttention(32, 4, 0.02, 0.0, 0.0)
    x = RNG.standard_normal((3, 9, 32)).astype("float32")
    mask = np.ones((3, 9), "int32")
    mask[1, 4:] = 0
    expected = keras.ops.convert_to_numpy(layer(x, mask))
    layer.attention_kernel = "keras"
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(x, mask)), expected, atol=1e-6, rtol=0)


JAX_REMAT = """
import json, sys
import jax, keras, numpy as np
from albert_tf import AlbertBackbone, AlbertConfig, AlbertPretrainer
from albert_tf.pretraining.objective import pretraining_loss
config = AlbertConfig.from_dict(json.loads(sys.argv[1]))
features = {k: jax.numpy.asarray(v) for k, v in np.load(sys.argv[2]).items()}
names = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
results = []
for remat in (False, True):
    keras.utils.set_random_seed(3)
    model = AlbertPretrainer(AlbertBackbone.from_albert_config(config, remat=remat))
    def loss_fn(trainable, non_trainable):
        out, _ = model.stateless_call(trainable, non_trainable, {k: features[k] for k in names}, training=True)
        return pretraining_loss(out, features)
    loss, grads = jax.jit(jax.value_and_grad(loss_fn))(
        [v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables])
    results.append((float(loss), [np.asarray(g) for g in grads]))
(loss, grads), (remat_loss, remat_grads) = results
np.testing.assert_allclose(remat_loss, loss, rtol=1e-6)
for g, r in zip(grads, remat_grads):
    np.testing.assert_allclose(r, g, rtol=1e-5, atol=1e-7)
print("OK", loss)
"""


@pytest.mark.slow
def test_remat_gives_the_same_gradients_under_jax(tmp_path):
    import os
    import subprocess
    import sys

    config = tiny(num_hidden_groups=2)
    np.savez(tmp_path / "features.npz", **pretraining_batch(config))
    env = dict(os.environ, KERAS_BACKEND="jax")
    result = subprocess.run(
        [sys.executable, "-c", JAX_REMAT, json.dumps(config.to_dict()), str(tmp_path / "features.npz")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("OK")


def test_backbone_keeps_its_mixed_precision_policy():
    # Functional models drop `dtype`: the task heads took float32 from a bf16 backbone,
    # and a saved bf16 backbone came back float32.
    backbone = AlbertBackbone.from_albert_config(tiny(), dtype="mixed_bfloat16")
    assert backbone.dtype_policy.name == "mixed_bfloat16"
    assert AlbertBackbone.from_config(backbone.get_config()).dtype_policy.name == "mixed_bfloat16"
    classifier = AlbertClassifier(backbone, num_classes=2)
    assert classifier.get_layer("classifier").compute_dtype == "bfloat16"
    assert AlbertBackbone.from_albert_config(tiny()).dtype_policy.name == "float32"
