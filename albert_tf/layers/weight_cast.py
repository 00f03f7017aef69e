"""Cast a shared weight to the compute dtype once per forward pass, not once per application.

Under mixed precision (`mixed_bfloat16`) every read of a float32 kernel inside a
bf16 layer is a cast. ALBERT applies its shared block L times, so a forward pass
casts the same kernels L times: for albert_base at batch 1 x 128, 12 casts of
7.1M weights cost about 9 ms of a 67 ms forward (bench/journal/2026-11-24-evening-reruns.md). Inside
`SharedWeightCasts` the first application's cast is kept and the later ones use it:
the same values, so the outputs are unchanged.

Only for inference: in training the gradient chain (`weight_chain`) feeds each
application its own link, and the backbone enters this scope only when not
training. Outside the scope `compute_weight` is a plain cast.

Example:

>>> import keras
>>> from keras import ops
>>> weight = keras.Variable(ops.ones((2, 2)))
>>> with SharedWeightCasts():
...     first, second = compute_weight(weight, "bfloat16"), compute_weight(weight, "bfloat16")
>>> first is second
True
"""

import threading

from keras import ops

# Per thread: MirroredStrategy runs replicas' forward passes in threads.
_active = threading.local()


class SharedWeightCasts:
    """Within the scope, `compute_weight` casts each variable once per dtype and reuses the result."""

    def __enter__(self):
        self.outer = getattr(_active, "casts", None)
        self.casts = {}  # (id(variable), dtype) -> (variable, tensor); the variable keeps its id unique
        _active.casts = self
        return self

    def __exit__(self, *exc_info):
        _active.casts = self.outer


def compute_weight(variable, dtype):
    """`variable` as a `dtype` tensor: cast once within a `SharedWeightCasts` scope, else every call."""
    scope = getattr(_active, "casts", None)
    if scope is None:
        return ops.cast(variable, dtype)
    key = (id(variable), dtype)
    if key not in scope.casts:
        scope.casts[key] = (variable, ops.cast(variable, dtype))
    return scope.casts[key][1]


def dense_on_rows(rows, dense, dtype):
    """`dense` applied to 2-D `rows` [M, K] in `dtype`, its weights read through `compute_weight`.

    Its kernel is flattened to [K, ·] (an attention kernel [H, N, D] or [N, D, H] too), so
    TF runs one MatMul fused with the bias add (oneDNN) and TFLite one FULLY_CONNECTED.
    """
    kernel = ops.reshape(compute_weight(dense.kernel, dtype), (rows.shape[-1], -1))
    return ops.matmul(ops.cast(rows, dtype), kernel) + ops.reshape(compute_weight(dense.bias, dtype), (-1,))
