"""The activations an ALBERT config can name, as the original computes them."""

import keras

from albert_tf.config import ACTIVATION_ALIASES, canonical_activation


def gelu_tanh(x):
    """GELU with the tanh approximation, as in Google's `modeling.gelu`."""
    return keras.activations.gelu(x, approximate=True)


def gelu_exact(x):
    """The exact (erf) GELU: HF transformers' `gelu` (its ALBERT v1 configs name it)."""
    return keras.activations.gelu(x, approximate=False)


_ACTIVATIONS = {
    "gelu": gelu_tanh,
    "gelu_exact": gelu_exact,
    "relu": keras.activations.relu,
    "tanh": keras.activations.tanh,
    "linear": keras.activations.linear,
}


def get_activation(name):
    """Returns the function for a config's `hidden_act` (any case; `gelu_new` is `gelu`).

    Example:

    >>> float(get_activation("relu")(keras.ops.array(-1.0)))
    0.0
    >>> get_activation("GELU_NEW") is get_activation("gelu") is gelu_tanh
    True
    """
    canonical = canonical_activation(name)
    if canonical is None:
        raise ValueError(
            f"unknown hidden_act {name!r}; expected one of "
            f"{sorted(_ACTIVATIONS) + sorted(ACTIVATION_ALIASES)} (any case)"
        )
    return _ACTIVATIONS[canonical]
