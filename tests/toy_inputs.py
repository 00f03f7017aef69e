"""Tiny models, requests and texts that several test files feed to the refusal checks (bad requests, long texts)."""

import json

import numpy as np

from paths import CONFIGS

SEQ = 8
VOCAB = 8000  # configs/albert_tiny.json
# The text of the `fox_spm` fixture (conftest.py): an 80-piece SentencePiece model.
TOY_LINES = [f"the quick brown fox number {i} jumps over the lazy dog. it runs away fast." for i in range(200)]


def tiny_pretrainer():
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.pretrainer import AlbertPretrainer

    return AlbertPretrainer(AlbertBackbone.from_albert_config(str(CONFIGS / "albert_tiny.json")))


def good_request(batch):
    rng = np.random.default_rng(0)
    return {
        "input_ids": rng.integers(5, VOCAB, (batch, SEQ)).astype("int32"),
        "input_mask": np.ones((batch, SEQ), "int32"),
        "segment_ids": (np.arange(SEQ) >= SEQ // 2).astype("int32") * np.ones((batch, SEQ), "int32"),
        "masked_lm_positions": np.tile(np.array([1, 3], "int32"), (batch, 1)),
    }


def toy_backbone():
    """The tiny backbone with `fox_spm`'s 80-piece vocabulary."""
    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertBackbone

    config = json.loads((CONFIGS / "albert_tiny.json").read_text())
    config["vocab_size"] = 80
    return AlbertBackbone.from_albert_config(AlbertConfig.from_dict(config))
