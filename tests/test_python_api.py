"""The Python API: the tokenizer's batch call, and one call from a model directory to answers."""

import numpy as np
import pytest

from albert_tf.inputs.packing import pack_segments
from albert_tf.tokenization import SentencePieceTokenizer, TokenizerError


def _sst2_sentences(real_data, count):
    lines = (real_data / "glue" / "SST-2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1 : count + 1]
    return [line.split("\t")[0] for line in lines]


def test_tokenizer_call_pads_rows_equal_to_encode(real_data, wikitext_spm):
    tokenizer = SentencePieceTokenizer(wikitext_spm)
    texts = _sst2_sentences(real_data, 12)
    seconds = list(reversed(texts))
    batch = tokenizer(texts, max_length=24)
    lengths = [min(len(tokenizer.encode(t)) + 2, 24) for t in texts]
    assert batch["input_ids"].shape == (12, max(lengths)) and batch["input_ids"].dtype == np.int32
    for row, text in enumerate(texts):
        ids = [tokenizer.cls_id] + tokenizer.encode(text)[:22] + [tokenizer.sep_id]
        assert batch["input_ids"][row].tolist() == ids + [0] * (batch["input_ids"].shape[1] - len(ids))
        assert batch["input_mask"][row].sum() == len(ids) and not batch["segment_ids"][row].any()

    pairs = tokenizer(texts, seconds, max_length=32, padding="max_length")
    assert {k: v.shape for k, v in pairs.items()} == {k: (12, 32) for k in ("input_ids", "input_mask", "segment_ids")}
    for row, (a, b) in enumerate(zip(texts, seconds)):
        # The original's truncation: the longer segment loses its last piece first.
        ids, segments = pack_segments(tokenizer.encode(a), tokenizer.encode(b), 32, tokenizer.cls_id, tokenizer.sep_id)
        assert pairs["input_ids"][row, : len(ids)].tolist() == ids and not pairs["input_ids"][row, len(ids) :].any()
        assert pairs["segment_ids"][row, : len(ids)].tolist() == segments
        assert pairs["input_mask"][row].sum() == len(ids)
    assert tokenizer(texts[0])["input_ids"].tolist() == batch["input_ids"][:1, : lengths[0]].tolist()

    with pytest.raises(TokenizerError, match="padding='left'"):
        tokenizer(texts, padding="left")
    with pytest.raises(TokenizerError, match="12 texts but 11 second texts"):
        tokenizer(texts, seconds[:11])
