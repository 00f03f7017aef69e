"""Checks a written SavedModel against the Keras model it came from (ids and text signatures)."""

import numpy as np
import tensorflow as tf

from albert_tf.export.common import compare_outputs, random_inputs
from albert_tf.export.signatures import MLM_POSITIONS
from albert_tf.tokenization.packing import encode_with_masks, pack_segments

VERIFY_TEXTS = ("The quick brown fox jumps over the lazy dog.", "Café déjà vu, 1,000 times", "", "a " * 300)


def reference_text_inputs(python_tokenizer, texts_a, texts_b, max_seq_length: int, has_mlm: bool):
    """What the text signatures must feed the model, computed in Python (padded to the batch's longest)."""

    def encode(text):
        text = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
        return encode_with_masks(python_tokenizer, text) if has_mlm else python_tokenizer.encode(text)

    rows = [
        pack_segments(
            encode(a),
            None if texts_b is None else encode(texts_b[i]),
            max_seq_length,
            python_tokenizer.cls_id,
            python_tokenizer.sep_id,
        )
        for i, a in enumerate(texts_a)
    ]
    width = max(len(ids) for ids, _ in rows)
    inputs = {
        "input_ids": np.zeros((len(rows), width), "int32"),
        "input_mask": np.zeros((len(rows), width), "int32"),
        "segment_ids": np.zeros((len(rows), width), "int32"),
    }
    for i, (ids, segments) in enumerate(rows):
        inputs["input_ids"][i, : len(ids)] = ids
        inputs["input_mask"][i, : len(ids)] = 1
        inputs["segment_ids"][i, : len(ids)] = segments
    if has_mlm:
        positions = [np.flatnonzero(row == python_tokenizer.mask_id) for row in inputs["input_ids"]]
        inputs[MLM_POSITIONS] = np.zeros((len(rows), max(len(p) for p in positions)), "int32")
        for i, p in enumerate(positions):
            inputs[MLM_POSITIONS][i, : len(p)] = p
    return inputs


def verify_saved_model(model, path: str, tokenizer, max_seq_length: int, atol: float = 1e-5):
    loaded = tf.saved_model.load(path)
    inputs = random_inputs(model, 2, min(16, max_seq_length))
    got = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in inputs.items()})
    compare_outputs(model(inputs, training=False), got, atol, f"{path} serving_default")
    if "serve_text_pair" not in loaded.signatures:
        return
    has_mlm = MLM_POSITIONS in model.input
    texts_a = [t + (" [MASK] here" if has_mlm else "") for t in VERIFY_TEXTS]
    texts_b = list(reversed(VERIFY_TEXTS))
    for texts_b_or_none, signature in ((None, "serve_text"), (texts_b, "serve_text_pair")):
        expected = reference_text_inputs(tokenizer, texts_a, texts_b_or_none, max_seq_length, has_mlm)
        request = {"text_a": tf.constant(texts_a)}
        if texts_b_or_none is not None:
            request["text_b"] = tf.constant(texts_b_or_none)
        got = loaded.signatures[signature](**request)
        compare_outputs(expected, got, 0, f"{path} {signature} tokenisation")
        compare_outputs(model(expected, training=False), got, atol, f"{path} {signature}")
