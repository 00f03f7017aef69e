"""LAMB, AdamW and the LR schedule against a NumPy transcription of the original rules."""

import keras
import numpy as np
import pytest

from albert_tf.optimization import AdamWeightDecay, AlbertSchedule, Lamb, create_optimizer

EXCLUDE = ("LayerNorm", "layer_norm", "bias")


def numpy_update(w, g, m, v, lr, decay, adapt, wd=0.01, b1=0.9, b2=0.999, eps=1e-6):
    """lamb_optimizer.py / optimization.py, one step."""
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    u = m / (np.sqrt(v) + eps)
    if decay:
        u = u + wd * w
    ratio = 1.0
    if adapt:
        w_norm, u_norm = np.linalg.norm(w), np.linalg.norm(u)
        ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
    return w - ratio * lr * u, m, v


class Toy(keras.layers.Layer):
    """Variables named like the model's: a kernel, a bias, a layer_norm gamma, a zero kernel."""

    def build(self, _):
        rng = np.random.default_rng(0)
        self.kernel = self.add_weight(
            name="kernel", shape=(3, 4), initializer=keras.initializers.Constant(rng.normal(size=(3, 4)))
        )
        self.bias = self.add_weight(
            name="bias", shape=(4,), initializer=keras.initializers.Constant(rng.normal(size=4))
        )
        self.norm = keras.layers.LayerNormalization(name="layer_norm")
        self.norm.build((None, 4))
        self.zero = self.add_weight(name="zero_kernel", shape=(2, 2), initializer="zeros")


@pytest.mark.parametrize("optimizer_class,adapt", [(Lamb, True), (AdamWeightDecay, False)])
def test_updates_match_the_original_rule(optimizer_class, adapt):
    layer = Toy()
    layer.build(None)
    variables = [layer.kernel, layer.bias, layer.norm.gamma, layer.zero]
    optimizer = optimizer_class(learning_rate=0.05)
    rng = np.random.default_rng(1)
    state = {id(v): (np.array(v.numpy()), np.zeros(v.shape), np.zeros(v.shape)) for v in variables}
    for _ in range(3):  # several steps: slots carry over, no bias correction ever
        grads = [rng.normal(size=v.shape).astype("float32") for v in variables]
        optimizer.apply([keras.ops.convert_to_tensor(g) for g in grads], variables)
        for variable, g in zip(variables, grads):
            w, m, v = state[id(variable)]
            excluded = any(p in variable.path for p in EXCLUDE)
            state[id(variable)] = numpy_update(w, g, m, v, 0.05, decay=not excluded, adapt=adapt and not excluded)
    for variable in variables:
        np.testing.assert_allclose(
            variable.numpy(), state[id(variable)][0], rtol=2e-5, atol=1e-6, err_msg=variable.path
        )
    # The zero kernel: ‖w‖ = 0 at the first step, so the trust ratio is 1 there.
    assert np.abs(layer.zero.numpy()).sum() > 0


def test_exclusions_follow_variable_paths():
    layer = Toy()
    layer.build(None)
    optimizer = Lamb()
    variables = [layer.kernel, layer.bias, layer.norm.gamma, layer.norm.beta]
    flags = {v.path.split("/")[-1]: optimizer.decay_and_adaptation(v) for v in variables}
    assert flags == {"kernel": (True, True), "bias": (False, False), "gamma": (False, False), "beta": (False, False)}


def test_schedule_is_the_originals():
    schedule = AlbertSchedule(0.00176, num_train_steps=125000, num_warmup_steps=3125)
    values = {s: float(schedule(s)) for s in (0, 1, 3124, 3125, 62500, 125000, 200000)}
    assert values[0] == 0.0
    np.testing.assert_allclose(values[1], 0.00176 / 3125, rtol=1e-5)
    np.testing.assert_allclose(values[3124], 0.00176 * 3124 / 3125, rtol=1e-5)
    # Decay counts from step 0: at the end of warmup the LR jumps to lr0·(1 − W/T).
    np.testing.assert_allclose(values[3125], 0.00176 * (1 - 3125 / 125000), rtol=1e-5)
    np.testing.assert_allclose(values[62500], 0.00088, rtol=1e-5)
    assert values[125000] == 0.0 and values[200000] == 0.0
    squared = AlbertSchedule(1.0, 100, 0, poly_power=2.0)
    np.testing.assert_allclose(float(squared(50)), 0.25, rtol=1e-6)


def test_create_optimizer_and_config_round_trip():
    optimizer = create_optimizer("lamb", 0.00176, 125000, 3125)
    assert isinstance(optimizer, Lamb) and optimizer.weight_decay_rate == 0.01 and optimizer.epsilon == 1e-6
    restored = Lamb.from_config(optimizer.get_config())
    assert restored.exclude_from_layer_adaptation == list(EXCLUDE)
    assert float(restored.learning_rate) == float(optimizer.learning_rate)
    with pytest.raises(ValueError, match="adam"):
        create_optimizer("adam", 1e-3, 10, 1)
