"""Rematerialisation of a layer application: recompute it in the backward pass.

ALBERT applies one shared layer L times, so the activations kept for the
backward pass grow with L while the weights do not. With remat, a layer
application keeps only its inputs; its inner activations (attention logits
and probabilities, the FFN's intermediate) are recomputed when its gradient is
needed. `keras.remat` is `tf.recompute_grad` under TensorFlow and
`jax.checkpoint` under JAX.
"""

import keras

from albert_tf.layers import weight_chain


class _FixedSeed(keras.random.SeedGenerator):
    """A seed generator that always hands out one given seed (no variable)."""

    def __init__(self, seed):  # no super().__init__: it would create a variable
        self._seed = seed

    def next(self, ordered=True):
        return self._seed


def recompute_in_backward(function, dropout_layers, *tensors):
    """`function(*tensors)`, recomputed in the backward pass instead of stored.

    Dropout must draw the same masks when recomputed. Under TensorFlow the
    recomputation runs after the forward pass has moved the dropout seed
    generators on, so each active dropout layer's seed is drawn here, outside
    the recomputed function (the draw the layer would have made itself), and
    passed in; inside, the layer uses that seed, in the forward pass and in the
    recomputation alike. The masks are those of the plain model. JAX's
    checkpoint replays the traced function, seed state included, so nothing is
    needed there.

    Args:
        function: maps `tensors` to one tensor; must not create variables.
        dropout_layers: the `keras.layers.Dropout` layers `function` calls.
        *tensors: the inputs (the only activations kept for the backward).

    Returns:
        `function(*tensors)`.
    """
    layers = []
    if keras.backend.backend() == "tensorflow":
        layers = [layer for layer in dropout_layers if layer.rate > 0]
    # In a shared-weight chain the weights are inputs too: the recomputation reads the chain's tensors.
    variables, weights = weight_chain.remat_links()
    if not layers and not variables:
        return keras.remat(function)(*tensors)
    count, seed_count = len(tensors), len(layers)

    def replay(*args):
        inputs, seeds, chained = args[:count], args[count : count + seed_count], args[count + seed_count :]
        generators = [layer.seed_generator for layer in layers]
        try:
            for layer, seed in zip(layers, seeds):
                # Not `layer.seed_generator = ...`: Keras would track it.
                object.__setattr__(layer, "seed_generator", _FixedSeed(seed))
            with weight_chain.reading(variables, chained):
                return function(*inputs)
        finally:
            for layer, generator in zip(layers, generators):
                object.__setattr__(layer, "seed_generator", generator)

    seeds = [layer.seed_generator.next() for layer in layers]
    return keras.remat(replay)(*tensors, *seeds, *weights)
