"""The shared-weight gradient chain: sum a shared weight's gradient one application at a time.

ALBERT applies one layer L times. When every application reads the variable
afresh, TensorFlow's tape sums the L weight-sized gradient partials with
`AddN` (early-aggregated 4 at a time for big weights), and Grappler's
arithmetic optimizer merges those sums back into one L-input `AddN`, which
keeps every partial alive until the last one is computed: for
albert_xxlarge_v2 that is gigabytes of the training step's peak.

Here each application reads a link of a chain instead: application k uses
`use_k`, the chain carries the weight to application k + 1, and the
backward pass adds application k's partial into a running sum as soon as it
exists, so about two weight-sized tensors live per weight (as torch's
`.grad` accumulation). Forward values are the variable's exactly.

The running sum is carried negated and accumulated with `subtract`:
Grappler merges chains of `Add`/`AddN` into one `AddN` (which would undo
the chain) but leaves `Sub` alone; negation and `a - (-b)` are exact, so
the gradient is the plain sum of the partials (in another order).

Use: the backbone enters `SharedWeightChain` around a training forward pass,
and each shared layer's `call` is decorated with `chain_shared_weights`.
Outside a chain the decorator does nothing.
"""

import contextlib
import functools
import threading

import keras
from keras import ops

# Per thread: MirroredStrategy runs replicas' forward passes in threads.
_active = threading.local()


@ops.custom_gradient
def _first_link(weight):
    def grad(use, negated_rest):
        # The variable's gradient: this partial plus the rest (carried negated).
        # `None`: an unused output (a forward pass that stopped early).
        if negated_rest is None:
            return use
        if use is None:
            return ops.negative(negated_rest)
        return ops.subtract(use, negated_rest)

    return (weight, weight), grad


@ops.custom_gradient
def _middle_link(carrier):
    def grad(use, negated_rest):
        if negated_rest is None:
            return ops.negative(use)
        if use is None:
            return negated_rest
        return ops.subtract(negated_rest, use)

    return (carrier, carrier), grad


@ops.custom_gradient
def _last_link(carrier):
    def grad(use):
        return ops.negative(use)

    return carrier, grad


class _UncastRead(keras.layers.Layer):
    """Reads variables outside mixed precision's autocast (`autocast=False`): they keep their dtype.

    The values go into the caller's list `values`, not out of `call`: `__call__` would cast them.
    """

    def __init__(self, variables, values):
        super().__init__(autocast=False)
        # A function, not attributes: Keras would track them as the layer's state.
        self.read = lambda: values.extend(ops.copy(v) for v in variables)

    def call(self, anchor):
        self.read()
        return anchor


class SharedWeightChain:
    """Chains the variables of layers applied several times in one forward pass.

    Args:
        applications: `(layer, count)` pairs: how many times the forward
            pass applies each layer. Layers applied once are not chained.
    """

    def __init__(self, applications):
        self.applications = {id(layer): count for layer, count in applications if count > 1}
        self.applied = {}  # id(layer) -> applications so far
        self.carriers = {}  # id(variable) -> the chain tensor for the next application

    def __enter__(self):
        self.outer = getattr(_active, "chain", None)
        _active.chain = self
        return self

    def __exit__(self, *exc_info):
        _active.chain = self.outer

    def links(self, layer):
        """`(variable, tensor)` pairs for this application of `layer`, or `None` when not chained."""
        count = self.applications.get(id(layer))
        index = self.applied.get(id(layer), 0)
        if count is None or index >= count:
            return None  # not shared, or applied more often than announced: plain reads
        self.applied[id(layer)] = index + 1
        variables = layer.trainable_variables
        if index == 0:
            # Inside a mixed-precision layer a plain read would be cast to 16 bits.
            values = []
            _UncastRead(variables, values)(ops.zeros(()))
        pairs = []
        for position, variable in enumerate(variables):
            key = id(variable)
            if index == 0:
                use, self.carriers[key] = _first_link(values[position])
            elif index < count - 1:
                use, self.carriers[key] = _middle_link(self.carriers[key])
            else:
                use = _last_link(self.carriers.pop(key))
            pairs.append((variable, use))
        return pairs


def chain_shared_weights(call):
    """Decorates a layer's `call`: inside a `SharedWeightChain`, its weights are read from the chain."""

    @functools.wraps(call)
    def chained_call(layer, *args, **kwargs):
        chain = getattr(_active, "chain", None)
        links = None if chain is None else chain.links(layer)
        if not links:
            return call(layer, *args, **kwargs)
        if getattr(layer, "remat", False):
            # The recomputation reads the weights again in the backward pass, after this call
            # returned: `recompute_in_backward` takes them as inputs (`remat_links`).
            _active.remat_links = links
            try:
                return call(layer, *args, **kwargs)
            finally:
                _active.remat_links = None
        with keras.StatelessScope(links, initialize_variables=False) as scope:
            outputs = call(layer, *args, **kwargs)
        # The scope held back the other state updates (dropout seed generators): apply them.
        chained = {id(variable) for variable, _ in links}
        for variable in layer.non_trainable_variables:
            value = scope.get_current_value(variable)
            if id(variable) not in chained and value is not None:
                variable.assign(value)
        return outputs

    return chained_call


def remat_links():
    """For the remat layer application being called in a chain: its variables and their chain tensors.

    Taken once (empty lists outside a chain); read them with `reading`.
    """
    links = getattr(_active, "remat_links", None) or []
    _active.remat_links = None
    return [variable for variable, _ in links], [tensor for _, tensor in links]


def reading(variables, tensors):
    """A scope in which `variables` read as `tensors` (no scope when there are none)."""
    if not variables:
        return contextlib.nullcontext()
    return keras.StatelessScope(list(zip(variables, tensors)), initialize_variables=False)
