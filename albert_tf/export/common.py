"""What every export format shares: the error, the model's test inputs, output comparison."""

from typing import Dict

import numpy as np

from albert_tf.errors import AlbertError
from albert_tf.request_checks import MLM_POSITIONS
from albert_tf.tokenization import check_vocab_size

# `--quantize`: TFLite weights float32, float16 or int8, or int8 weights and activations (full_int8).
QUANTIZATIONS = ("none", "float16", "dynamic_int8", "full_int8")


def model_config(model):
    """The `AlbertConfig` of any model of ours (the formats, and with them Keras, load on first use)."""
    from albert_tf.formats.table import backbone_of

    return backbone_of(model).albert_config


class ExportError(AlbertError, RuntimeError):
    """An export that cannot be made or does not match its model; nothing was written."""


def check_tokenizer_fits(model, tokenizer) -> None:
    """The export's tokenizer (None: an ids-only export) must have the model's vocabulary size."""
    if tokenizer is not None:
        check_vocab_size(model_config(model).vocab_size, tokenizer, "export")


def random_inputs(model, batch: int, seq: int, predictions: int = 3, seed: int = 0) -> Dict[str, np.ndarray]:
    """Inputs of the model's structure: random ids, a padded tail in row 0."""
    rng = np.random.default_rng(seed)
    vocab = model_config(model).vocab_size
    result = {}
    for name, tensor in model.input.items():
        shape = [batch] + [d for d in tensor.shape[1:-1]] + [predictions if name == MLM_POSITIONS else seq]
        if name == "input_ids":
            result[name] = rng.integers(5, vocab, shape).astype("int32")
        elif name == "input_mask":
            mask = np.ones(shape, "int32")
            mask[0, ..., seq // 2 :] = 0
            result[name] = mask
        elif name == "segment_ids":
            result[name] = (np.arange(seq) >= seq // 3).astype("int32") * np.ones(shape, "int32")
        elif name == MLM_POSITIONS:
            result[name] = rng.integers(1, seq // 2, shape).astype("int32")
        else:
            raise ExportError(f"the model has an input {name!r} export does not know how to fill")
    return result


def compare_outputs(expected: Dict, got: Dict, atol: float, what: str):
    for name, value in expected.items():
        value = np.asarray(value)
        other = np.asarray(got[name])
        if value.shape != other.shape or not np.allclose(value, other, atol=atol, rtol=0):
            diff = np.abs(value - other).max() if value.shape == other.shape else f"shape {other.shape}"
            raise ExportError(f"{what}: output {name!r} differs from the Keras model ({diff})")
