"""Fused attention where the backend and the hardware have it: cuDNN's, under JAX on an NVIDIA GPU.

`keras.ops.dot_product_attention` takes a mask, and cuDNN refuses a key mask's shape
([B, 1, 1, S]: "Bias must have same seq length as QKV", jax-ml/jax#28974), after which
Keras logs a traceback and silently runs XLA's attention. Our rows are right-padded, so
a key mask is one length per row: `jax.nn.dot_product_attention`'s
`key_value_seq_lengths`, which cuDNN takes. This is the layers' one backend-specific
call; everywhere else (TensorFlow, CPU, float32, attention dropout in training, TFLite)
the einsum path runs.

Example:

>>> kernel_for("float32", 64) is None  # the einsum path
True
"""

from typing import Optional

import keras
from keras import ops


def kernel_for(compute_dtype: str, head_size: int) -> Optional[str]:
    """`"cudnn"` where cuDNN's fused attention takes the call, else None (the einsum path).

    That is: JAX on an NVIDIA GPU of compute capability 8.0 or later (Ampere on; ROCm devices have
    no `compute_capability`), bfloat16/float16 (no float32 kernel), a head size that is a multiple
    of 8 and at most 128.
    """
    if keras.backend.backend() != "jax" or compute_dtype not in ("bfloat16", "float16"):
        return None
    if head_size % 8 or head_size > 128:
        return None
    import jax

    device = jax.devices()[0]
    capability = getattr(device, "compute_capability", None)
    if device.platform != "gpu" or capability is None or float(capability) < 8.0:
        return None
    return "cudnn"


def attend(query, key, value, input_mask, implementation: str, mask=None):
    """softmax(q kᵀ) v over each row's first Σ input_mask keys (q already scaled); [B, S, N, D].

    `implementation`: "cudnn" (fused, GPU) or "xla" (the same computation, any device; the tests' reference).
    `mask`: bool [B, 1, S, S] instead of key lengths (packed rows, `packed_rows.attention_allowed`); cuDNN
    takes it as a bias of that shape.
    """
    import jax

    if mask is not None:
        return jax.nn.dot_product_attention(query, key, value, scale=1.0, mask=mask, implementation=implementation)
    lengths = ops.cast(ops.sum(ops.cast(input_mask, "int32"), axis=1), "int32")
    return jax.nn.dot_product_attention(
        query, key, value, scale=1.0, key_value_seq_lengths=lengths, implementation=implementation
    )
