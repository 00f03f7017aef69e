"""Model FLOPs utilization (MFU): a pretraining step's FLOPs from the config and batch, over the devices' peak.

The step's FLOPs are the model's (PaLM's MFU): forward and backward, 3 × the forward pass's
matmuls, whatever `--remat` recomputes. Per sequence of s tokens and layer application:
the attention projections 8·s·h², the feed-forward 4·s·h·i, the attention scores and context
4·s²·h; once, the embedding projection 2·s·e·h; per masked prediction, the MLM head 2·h·e +
2·e·V. The peaks are the dense (not sparse) tensor-core numbers of the vendor's data sheets, bf16
and fp16 for mixed precision and TF32 for float32 (XLA's default float32 matmuls on these GPUs).

Example:

>>> from albert_tf.config import AlbertConfig
>>> config = AlbertConfig.from_json_file("configs/albert_base_v2.json")
>>> round(train_step_flops(config, batch=4096, seq=512, predictions=20) / 1e15, 1)  # PFLOPs per step
1.2
>>> peak_flops_of("NVIDIA H100 80GB HBM3", "bfloat16") / 1e12, peak_flops_of("cpu", "float32")
(989.4, None)
"""

import re
from typing import Optional

# (words of the device's name, lowercase) → (16-bit peak, float32 peak) in FLOP/s; the first match wins.
PEAKS = (
    (("h100", "pcie"), (756e12, 378e12)),
    (("h100",), (989.4e12, 494.7e12)),
    (("h200",), (989.4e12, 494.7e12)),
    (("a100",), (312e12, 156e12)),
    (("l4",), (121e12, 60e12)),
    (("v100",), (125e12, 15.7e12)),
    (("t4",), (65e12, 8.1e12)),
    (("tpu", "v4"), (275e12, 275e12)),
    (("tpu", "v5", "lite"), (197e12, 197e12)),
    (("tpu", "v5e"), (197e12, 197e12)),
    (("tpu", "v5p"), (459e12, 459e12)),
    (("tpu", "v6", "lite"), (918e12, 918e12)),
    (("tpu", "v6e"), (918e12, 918e12)),
)


def encoder_forward_flops(config, seq: int) -> int:
    """The encoder's forward FLOPs on one sequence of `seq` tokens (its layers and the embedding projection)."""
    h, e, i = config.hidden_size, config.embedding_size, config.intermediate_size
    layer = 8 * seq * h * h + 4 * seq * h * i + 4 * seq * seq * h
    return config.num_hidden_layers * layer + 2 * seq * e * h


def train_step_flops(config, batch: int, seq: int, predictions: int) -> int:
    """The model FLOPs of one ALBERT optimizer step over `batch` sequences of `seq` tokens with `predictions`
    masked positions each (the MLM head runs on those only; the pooler and SOP head once)."""
    h, e, v = config.hidden_size, config.embedding_size, config.vocab_size
    heads = predictions * (2 * h * e + 2 * e * v) + 2 * h * h
    return 3 * (encoder_forward_flops(config, seq) + heads) * batch


def peak_flops_of(device_name: str, mixed_precision: str) -> Optional[float]:
    """One device's peak FLOP/s for `--mixed_precision` (bfloat16/float16/float32); None when not in `PEAKS`."""
    words = set(re.split(r"[^a-z0-9]+", device_name.lower()))
    for needed, (half, single) in PEAKS:
        if set(needed) <= words:
            return single if mixed_precision == "float32" else half
    return None
