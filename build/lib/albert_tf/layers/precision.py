"""Dtype policies for numerically sensitive sublayers under mixed precision."""

import keras


def float32_policy(policy):
    """The policy for LayerNorm: float32 whenever the layer computes in 16 bits.

    Model Garden keeps LayerNorm in float32 under mixed precision; so do we, so
    that the residual stream and the normalisation statistics stay exact.
    """
    policy = keras.dtype_policies.get(policy)
    if policy.compute_dtype in ("float16", "bfloat16"):
        return keras.dtype_policies.get("float32")
    return policy


def layer_norm(epsilon, name, policy):
    """A LayerNormalization over the last axis, in float32 when mixed."""
    return keras.layers.LayerNormalization(epsilon=epsilon, name=name, dtype=float32_policy(policy))
