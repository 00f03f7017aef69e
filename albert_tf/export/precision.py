"""Serving precision: the same weights, rebuilt to compute in bfloat16 where the CPU has bf16 units.

`with_precision(model, "bfloat16")` rebuilds the model from its config under Keras'
`mixed_bfloat16` policy and copies the float32 weights in (they stay float32 variables):
the matmuls run in bf16, LayerNorm, softmax and the output logits in float32, as our
layers keep them. On CPUs with AVX512_BF16 (or AMX) TensorFlow's oneDNN kernels run
the bf16 matmuls about twice as fast as float32; on others they are emulated and
slower. TFLite has no bf16 kernels, so only the SavedModel takes this option.

Example:

>>> from albert_tf import AlbertBackbone
>>> backbone = AlbertBackbone.from_albert_config("configs/albert_tiny.json")
>>> bf16 = with_precision(backbone, "bfloat16")
>>> bf16.embedding_projection.compute_dtype, bf16.embedding_projection.kernel.dtype
('bfloat16', 'float32')
"""

from albert_tf.export.common import ExportError

PRECISIONS = {"float32": "float32", "bfloat16": "mixed_bfloat16"}
# The served outputs of a bf16 model, checked against its own Keras model (the same graph,
# kernels may round differently): bf16 keeps 8 significant bits.
VERIFY_ATOL = {"float32": 1e-5, "bfloat16": 5e-2}


def with_precision(model, precision: str):
    """`model` itself for float32; for bfloat16 a copy with the same weights under `mixed_bfloat16`."""
    if precision not in PRECISIONS:
        raise ExportError(f"--precision {precision}: expected one of {', '.join(PRECISIONS)}")
    if precision == "float32":
        return model
    config = model.get_config()
    # The backbone's `dtype` sets the policy of every layer; task heads follow the backbone's.
    from albert_tf.models.backbone import AlbertBackbone

    backbone_config = config if isinstance(model, AlbertBackbone) else config.get("backbone", {}).get("config")
    if backbone_config is None:
        raise ExportError(f"--precision {precision}: {type(model).__name__} has no backbone config to rebuild")
    backbone_config["dtype"] = PRECISIONS[precision]
    rebuilt = type(model).from_config(config)
    weights = model.get_weights()
    if len(weights) != len(rebuilt.weights):
        raise ExportError(
            f"--precision {precision}: the rebuilt {type(model).__name__} has {len(rebuilt.weights)} weights, "
            f"the model {len(weights)}"
        )
    rebuilt.set_weights(weights)
    return rebuilt
