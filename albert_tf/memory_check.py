"""Refuse, before training starts, a batch that cannot fit in this machine's memory.

Found out otherwise by the kernel's OOM killer a minute or more later. The
estimate is a lower bound, so it never refuses a batch that fits:

- weights, gradients and Adam's two slots: 16 bytes per parameter;
- activations per sequence and layer: 34·s·h + 5·a·s² bytes (Korthikanti et al.'s
  count at 2 bytes per value; ours are float32, so the real number is higher:
  `bench/memory.py` measures 117 MB per sequence for albert_base b8 × 128, where
  this gives 52 MB, and 2.6 GB for xxlarge at 512, where it gives 1.9 GB);
  with `remat` one layer's worth plus the layer inputs.

Checked on CPU-only machines (against MemAvailable and the cgroup's limit);
with a GPU or TPU visible, nothing is checked (its allocator reports itself).

Example:

>>> from albert_tf.config import AlbertConfig
>>> config = AlbertConfig.from_json_file("configs/albert_base_v2.json")
>>> round(activation_bytes_per_sequence(config, 128, remat=False) / 2**20)
50
"""

from typing import Optional

from albert_tf.errors import AlbertError


class MemoryLimitError(AlbertError, MemoryError):
    """A batch whose lower-bound memory estimate exceeds what this machine has; the message names the flag."""


def activation_bytes_per_sequence(config, seq: int, remat: bool) -> int:
    per_layer = 34 * seq * config.hidden_size + 5 * config.num_attention_heads * seq * seq
    if remat:  # each application keeps its input; one is recomputed at a time
        return 2 * seq * config.hidden_size * config.num_hidden_layers + per_layer
    return per_layer * config.num_hidden_layers


def available_bytes() -> Optional[int]:
    """MemAvailable, or the cgroup's remaining limit when lower; None when unknown."""
    values = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    values.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            current = int(f.read().strip())
        if limit != "max":
            values.append(int(limit) - current)
    except (OSError, ValueError):
        pass
    return min(values) if values else None


def _accelerator_visible() -> bool:
    import tensorflow as tf

    return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))


def check_batch_fits(
    config, num_parameters: int, micro_batch: int, seq: int, remat: bool, flag: str = "--train_batch_size"
) -> None:
    """Raises `MemoryLimitError` when even the lower bound for one step exceeds the available memory."""
    if _accelerator_visible():
        return
    available = available_bytes()
    if available is None:
        return
    fixed = 16 * num_parameters
    per_sequence = activation_bytes_per_sequence(config, seq, remat)
    needed = fixed + micro_batch * per_sequence
    if needed > available:
        fits = max(0, (available - fixed) // per_sequence)
        raise MemoryLimitError(
            f"{flag}: {micro_batch} sequences of {seq} per step need at least {_size(needed)} "
            f"({_size(per_sequence)} each, plus {_size(fixed)} of weights, gradients and Adam slots), "
            f"but {_size(available)} is available; at most ~{fits} fit: lower it, or add "
            "--grad_accum_steps (or --remat)"
        )


def _size(count: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count / 2**10:.1f} KiB"
