"""Does cuDNN's fused attention compute what the einsum path computes? bf16 on a GPU, one-a-row and packed rows.

One pretrainer (albert_base's widths, `--layers` deep, mixed bfloat16) runs the same batch with each
attention kernel; a float32 twin with the same weights gives the reference. For each layout it prints
the largest error against float32 of the MLM logits, the SOP logits and the gradients (relative to the
float32 gradient's norm), once for cuDNN and once for the bf16 einsum path, and exits 1 when cuDNN's
error is more than `--slack` times the einsum path's (bf16 rounding is the yardstick: the two kernels
round in other places, so neither matches float32 exactly).

    python bench/gpu_attention_check.py [--batch 4] [--seq 512] [--layers 2]
    python bench/gpu_attention_check.py --smoke   # CPU: "xla" stands in for "cudnn" (checks the script)
"""

import argparse
import json
import os
import sys

from _common import REPO  # noqa: F401  (puts the checkout first on sys.path)
from gpu_jax import BASE, PACKED_INSTANCES, ROW_FILL, albert_config, row_fill, synthetic_rows

NAMES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "cls_positions")


def build(cfg, layers, policy, packed):
    from albert_tf import AlbertBackbone, AlbertPretrainer

    backbone = AlbertBackbone.from_albert_config(albert_config(cfg, layers), dtype=policy)
    return AlbertPretrainer(backbone, packed_rows=packed)


def outputs_and_grads(model, kernel, data):
    import jax
    import numpy as np

    from albert_tf.layers.attention import AlbertAttention
    from albert_tf.pretraining.objective import pretraining_loss

    for layer in model._flatten_layers():
        if isinstance(layer, AlbertAttention):
            layer.attention_kernel = kernel
    inputs = {k: data[k] for k in NAMES if k in data}
    non_trainable = [v.value for v in model.non_trainable_variables]

    def loss(trainable):
        out, _ = model.stateless_call(trainable, non_trainable, inputs, training=True)
        return pretraining_loss(out, data), out

    trainable = [v.value for v in model.trainable_variables]
    # Compiled once: its text says which attention kernel ran (forward and backward), and it runs.
    compiled = jax.jit(jax.value_and_grad(loss, has_aux=True)).lower(trainable).compile()
    ran = "cudnn" if "__cudnn$fmha" in compiled.as_text() else kernel
    (_, out), grads = compiled(trainable)
    as_numpy = lambda x: np.asarray(x, "float32")  # noqa: E731
    return {k: as_numpy(v) for k, v in out.items()}, [as_numpy(g) for g in grads], ran


def errors(got, reference):
    import numpy as np

    (out, grads, _), (ref_out, ref_grads, _) = got, reference
    found = {k: float(np.max(np.abs(out[k] - ref_out[k]))) for k in ("mlm_logits", "sop_logits")}
    num = np.sqrt(sum(float(np.sum((a - b) ** 2)) for a, b in zip(grads, ref_grads)))
    den = np.sqrt(sum(float(np.sum(b**2)) for b in ref_grads))
    found["grad_relative"] = float(num / den)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--slack", type=float, default=2.0, help="cuDNN's error may be this many times the einsum's")
    parser.add_argument("--smoke", action="store_true", help="tiny shapes on CPU, 'xla' for 'cudnn'")
    args = parser.parse_args()
    os.environ["KERAS_BACKEND"] = "jax"
    import jax
    import keras
    import numpy as np

    cfg = dict(BASE)
    fused = "cudnn"
    if args.smoke:
        cfg.update(vocab=300, hidden=32, heads=4, intermediate=64, max_pos=64)
        args.batch, args.seq, args.layers, fused = 2, 32, 1, "xla"
    report, failed = {"device": str(jax.devices()[0]), "shape": f"{args.batch}x{args.seq}"}, []
    for case in ROW_FILL:
        packed = case == "ours_packed"
        instances = PACKED_INSTANCES if packed else 1
        data = synthetic_rows(np, args.batch, args.seq, cfg["vocab"], row_fill(case, args.seq), instances)
        keras.utils.set_random_seed(0)
        model = build(cfg, args.layers, "mixed_bfloat16", packed)
        reference_model = build(cfg, args.layers, "float32", packed)
        reference_model.set_weights(model.get_weights())
        reference = outputs_and_grads(reference_model, "einsum", data)
        einsum = outputs_and_grads(model, "einsum", data)
        cudnn = outputs_and_grads(model, fused, data)
        result = {
            "fused_kernel_ran": cudnn[2],
            "fused_vs_float32": errors(cudnn, reference),
            "einsum_bf16_vs_float32": errors(einsum, reference),
        }
        limit = {k: args.slack * v + 1e-6 for k, v in result["einsum_bf16_vs_float32"].items()}
        worse = [k for k, v in result["fused_vs_float32"].items() if v > limit[k]]
        if worse or cudnn[2] != fused:
            failed.append(f"{case}: {worse or 'the fused kernel did not run'}")
        report["one_a_row" if not packed else f"packed_{instances}"] = result
    print(json.dumps(report, indent=2))
    if failed:
        print(f"error: {'; '.join(failed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
