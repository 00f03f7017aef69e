"""The activations an ALBERT config can name, as the original computes them."""

import keras


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
    """Returns the function for a config's `hidden_act`.

    Example:

    >>> float(get_activation("relu")(keras.ops.array(-1.0)))
    0.0
    """
    if name not in _ACTIVATIONS:
        raise ValueError(
            f"unknown hidden_act {name!r}; expected one of {sorted(_ACTIVATIONS)}"
        )
    return _ACTIVATIONS[name]
