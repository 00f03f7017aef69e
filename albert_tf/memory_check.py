"""Refuse, before training starts, a batch that cannot fit in this machine's memory.

Found out otherwise by the kernel's OOM killer a minute or more later. The
estimate is a lower bound, so it never refuses a batch that fits:

- weights, gradients and Adam's two slots: 16 bytes per parameter (`parameter_count`, from the
  config alone, so an absurd config is refused before anything is built);
- pretraining's MLM logits over the whole vocabulary and their gradient: 8 bytes per
  sequence × max_predictions_per_seq × vocab_size;
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


# What the released configs reach (xxlarge): the field furthest beyond it is the one an absurd config names.
TYPICAL_SIZES = {"num_hidden_layers": 24, "hidden_size": 4096, "num_attention_heads": 64}


def parameter_terms(config) -> dict:
    """{config field: the parameters that grow with it} of a pretrainer (backbone and heads); a lower bound
    for `sharing` other than `all`, which adds layers of their own."""
    e, h, i = config.embedding_size, config.hidden_size, config.intermediate_size
    layers = config.num_hidden_groups * config.inner_group_num
    return {
        "vocab_size": config.vocab_size * (e + 1),  # embeddings and the MLM bias
        "max_position_embeddings": config.max_position_embeddings * e,
        "type_vocab_size": config.type_vocab_size * e,
        "embedding_size": 2 * e * h + h + 5 * e,  # projection in, MLM dense out; layer norms
        "hidden_size": layers * (4 * h * h + 9 * h) + h * h + 3 * h + 2,  # attention, layer norms, pooler, SOP
        "intermediate_size": layers * (2 * h * i + i),
    }


def parameter_count(config) -> int:
    """The pretrainer's parameters, counted from the config (11,813,810 for albert_base)."""
    return sum(parameter_terms(config).values())


def check_config_fits(config, source: str, seq: int, remat: bool) -> None:
    """Raises `MemoryLimitError` naming the config field when its weights, or one sequence's activations,
    cannot fit the available memory: before building a model that would take minutes and then be killed."""
    available = _available_without_accelerator()
    if available is None:
        return
    terms = parameter_terms(config)
    fixed = 16 * sum(terms.values())
    if fixed > available:
        field = max(terms, key=terms.get)
        raise MemoryLimitError(
            f"{source}: {field} {getattr(config, field):,} makes a model of at least {sum(terms.values()):,} "
            f"parameters, whose weights, gradients and Adam slots need {_size(fixed)}, but {_size(available)} "
            "is available"
        )
    one_sequence = activation_bytes_per_sequence(config, seq, remat)
    if fixed + one_sequence > available:
        field = max(TYPICAL_SIZES, key=lambda name: getattr(config, name) / TYPICAL_SIZES[name])
        raise MemoryLimitError(
            f"{source}: {field} {getattr(config, field):,}: one sequence of {seq} tokens needs at least "
            f"{_size(one_sequence)} of activations (plus {_size(fixed)} of weights, gradients and Adam slots), "
            f"but {_size(available)} is available"
        )


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


def _available_without_accelerator() -> Optional[int]:
    """The memory to check against: None (nothing checked) with a GPU or TPU, or when unknown."""
    return None if _accelerator_visible() else available_bytes()


def check_batch_fits(
    config,
    num_parameters: int,
    micro_batch: int,
    seq: int,
    remat: bool,
    flag: str = "--train_batch_size",
    max_predictions: int = 0,
) -> None:
    """Raises `MemoryLimitError` when even the lower bound for one step exceeds the available memory.

    `max_predictions`: pretraining's masked positions per sequence (their logits span the vocabulary).
    """
    available = _available_without_accelerator()
    if available is None:
        return
    fixed = 16 * num_parameters
    per_sequence = activation_bytes_per_sequence(config, seq, remat) + 8 * max_predictions * config.vocab_size
    needed = step_bytes(config, num_parameters, micro_batch, seq, remat, max_predictions)
    if needed > available:
        fits = max(0, (available - fixed) // per_sequence)
        raise MemoryLimitError(
            f"{flag}: {micro_batch} sequences of {seq} per step need at least {_size(needed)} "
            f"({_size(per_sequence)} each, plus {_size(fixed)} of weights, gradients and Adam slots), "
            f"but {_size(available)} is available; at most ~{fits} fit: lower it, or add "
            "--grad_accum_steps (or --remat)"
        )


def step_bytes(config, num_parameters: int, micro_batch: int, seq: int, remat: bool, max_predictions: int = 0) -> int:
    """A lower bound of one training step's memory: weights, gradients and Adam slots, and one micro-batch."""
    per_sequence = activation_bytes_per_sequence(config, seq, remat) + 8 * max_predictions * config.vocab_size
    return 16 * num_parameters + micro_batch * per_sequence


def _size(count: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count / 2**10:.1f} KiB"
