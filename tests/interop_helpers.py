"""Tiny models with distinct random weights, a toy vocabulary, and inputs for the interop tests."""

import json
import os

import numpy as np

from albert_tf import AlbertBackbone, AlbertConfig, AlbertPretrainer
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.models.span_qa import AlbertSpanQA
from albert_tf.models.token_classifier import AlbertTokenClassifier

from paths import CONFIGS

VOCAB = 80
KINDS = ("backbone", "pretrainer", "classifier", "span_qa", "multiple_choice", "token_classifier")


def train_toy_spm(directory):
    """An 80-piece ALBERT SentencePiece model (pad 0, unk 1, [CLS] 2, [SEP] 3, [MASK] 4)."""
    from data_prep.train_sentencepiece import train_sentencepiece

    lines = [
        f"the quick brown fox jumps over the lazy dog {i} times, paris is the capital of france" for i in range(300)
    ]
    return train_sentencepiece(lines, str(directory / "toy"), vocab_size=VOCAB)


def tiny_config(**overrides):
    """albert_tiny with the toy vocabulary, 2 groups × 2 inner blocks over 4 layers."""
    with open(CONFIGS / "albert_tiny.json") as f:
        values = json.load(f)
    values.update({"vocab_size": VOCAB, "num_hidden_groups": 2, "inner_group_num": 2, **overrides})
    return AlbertConfig.from_dict(values)


def randomize(model, seed=0):
    """Distinct random values in every tensor, so a mixed-up mapping shows."""
    rng = np.random.default_rng(seed)
    model.set_weights(
        [rng.normal(0.0, 0.2, w.shape).astype(np.float32) + 0.001 * i for i, w in enumerate(model.get_weights())]
    )
    return model


def build(kind, config=None, seed=0):
    backbone = AlbertBackbone.from_albert_config(config or tiny_config())
    model = {
        "backbone": lambda: backbone,
        "pretrainer": lambda: AlbertPretrainer(backbone),
        "classifier": lambda: AlbertClassifier(backbone, num_classes=3, dropout=0.2),
        "span_qa": lambda: AlbertSpanQA(backbone),
        "multiple_choice": lambda: AlbertMultipleChoice(backbone, num_choices=4, dropout=0.1),
        "token_classifier": lambda: AlbertTokenClassifier(backbone, num_classes=5),
    }[kind]()
    return randomize(model, seed)


def inputs(batch=2, length=12, seed=1):
    """Ids, a padded second row, two segments and masked positions."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, VOCAB, (batch, length)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, length - 3 :] = 0
    segments = np.zeros_like(ids)
    segments[:, length // 2 :] = 1
    positions = np.array([[1, 3], [2, 5]], np.int32)[:batch]
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments, "masked_lm_positions": positions}


def assert_same_weights(a, b, skip=()):
    """Bitwise-equal weights, matched by path (optionally skipping paths containing a string)."""
    ours = {w.path: w.numpy() for w in a.weights}
    theirs = {w.path: w.numpy() for w in b.weights}
    assert sorted(ours) == sorted(theirs)
    for path, value in ours.items():
        if any(s in path for s in skip):
            continue
        np.testing.assert_array_equal(theirs[path], value, err_msg=path)


def save_ours(model, directory, spm):
    """Our model directory (`model.keras` for task models) with `spm.model`, as convert_checkpoint writes."""
    from albert_tf import formats
    from albert_tf.tokenization import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(spm)
    os.makedirs(directory, exist_ok=True)
    formats.save(model, str(directory), tokenizer=tokenizer)
    return str(directory)
