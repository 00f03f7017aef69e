"""The one shared check for every layer and model: config round trip,
save/load, variable sequence length and dtype policies."""

import keras
import numpy as np

DTYPE_POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")


def _assert_same(a, b, atol=0.0):
    a, b = keras.tree.flatten(a), keras.tree.flatten(b)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(x), keras.ops.convert_to_numpy(y), atol=atol, rtol=0)


def _dtype(x):
    return keras.backend.standardize_dtype(x.dtype)


def run_layer_test(layer_cls, init_kwargs, make_inputs, output_shape, rebuild_kwargs=None, sequence_lengths=(5, 9)):
    """Checks a layer.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor keyword arguments (config values).
        make_inputs: `seq_len -> (args tuple)` for `layer(*args)`.
        output_shape: `seq_len -> expected output shape`.
        rebuild_kwargs: non-config constructor arguments (layer references)
            needed again by `from_config`.
    """
    rebuild_kwargs = rebuild_kwargs or {}
    layer = layer_cls(**init_kwargs, **rebuild_kwargs)
    # Variable sequence length: one layer, several lengths.
    outputs = {}
    for seq_len in sequence_lengths:
        args = make_inputs(seq_len)
        out = layer(*args)
        assert tuple(out.shape) == tuple(output_shape(seq_len))
        outputs[seq_len] = (args, out)
    # Config round trip: a rebuilt layer has the same config.
    config = layer.get_config()
    for key in init_kwargs:
        assert config[key] == init_kwargs[key], key
    clone = layer_cls.from_config({**config, **rebuild_kwargs})
    assert clone.get_config() == config
    # Save/load of the weights through the serialized layer: same outputs.
    restored = (
        keras.saving.deserialize_keras_object(
            keras.saving.serialize_keras_object(layer), custom_objects={layer_cls.__name__: layer_cls}
        )
        if not rebuild_kwargs
        else clone
    )
    args, expected = outputs[sequence_lengths[0]]
    restored(*args)
    restored.set_weights(layer.get_weights())
    _assert_same(restored(*args), expected)
    # Dtype policies: variables stay float32; every ALBERT layer ends in a
    # LayerNorm (or a float32 logit cast), so its output is float32.
    for policy in DTYPE_POLICIES:
        mixed = layer_cls(**init_kwargs, **rebuild_kwargs, dtype=policy)
        out = mixed(*make_inputs(sequence_lengths[0]))
        assert _dtype(out) == "float32", policy
        assert np.all(np.isfinite(keras.ops.convert_to_numpy(out)))
        assert all(_dtype(w) == "float32" for w in mixed.weights)


def run_model_test(model_factory, make_inputs, tmp_path, float32_outputs, check_outputs=None, sequence_lengths=(6, 11)):
    """Checks a model built by `model_factory(dtype=...)`.

    Config round trip, `.keras` save/load with identical outputs, several
    sequence lengths, and each dtype policy (float32 weights; the outputs in
    `float32_outputs`, which end in LayerNorm or a logit cast, are float32;
    all outputs within reach of the float32 model).
    """
    model = model_factory(dtype=None)
    for seq_len in sequence_lengths:
        out = model(make_inputs(seq_len))
        if check_outputs:
            check_outputs(out, seq_len)
    # Config round trip.
    config = model.get_config()
    clone = model.__class__.from_config(config)
    assert clone.get_config() == config
    # .keras save/load gives identical outputs.
    inputs = make_inputs(sequence_lengths[0])
    expected = model(inputs)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    _assert_same(loaded(inputs), expected)
    # Dtype policies.
    reference = {k: keras.ops.convert_to_numpy(v) for k, v in expected.items() if not isinstance(v, list)}
    for policy in DTYPE_POLICIES:
        mixed = model_factory(dtype=policy)
        mixed.set_weights(model.get_weights())
        out = mixed(inputs)
        assert all(_dtype(w) == "float32" for w in mixed.weights)
        for key in float32_outputs:
            assert _dtype(out[key]) == "float32", (policy, key)
        for key, ref in reference.items():
            got = keras.ops.convert_to_numpy(keras.ops.cast(out[key], "float32"))
            scale = float(np.abs(ref).max()) or 1.0
            # 16-bit compute keeps ~3 significant digits; float32 is exact.
            tol = 1e-6 if policy == "float32" else 0.1
            assert np.max(np.abs(got - ref)) <= tol * scale, (policy, key)
