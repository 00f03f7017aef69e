"""The Python tokenizer, its tf-text twin, and SentencePiece training."""

import pytest
import sentencepiece as spm

from albert_tf.tokenization import SentencePieceTokenizer, TokenizerError, encode_pieces, preprocess_text
from data_prep.documents import read_documents
from data_prep.train_sentencepiece import train_sentencepiece


def test_preprocess_text_matches_the_original_steps():
    assert preprocess_text("  Hello\t\u00a0 WORLD\n") == "hello world"
    assert preprocess_text("Café naïve Ångström", lower=False) == "Cafe naive Angstrom"
    assert preprocess_text("ﬁ ²") == "fi 2"  # NFKD compatibility forms
    # No XLNet/HF quote replacement: it would change ids.
    assert preprocess_text("``quoted''") == "``quoted''"


@pytest.mark.realdata
def test_albert_ids_and_vocab(wikitext_spm):
    tok = SentencePieceTokenizer(wikitext_spm)
    pieces = tok.pieces()
    assert pieces[:5] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert pieces[5:13] == ["(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac"]
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
    assert tok.vocab_size == 4000
    # Control symbols are never produced from text.
    assert tok.cls_id not in tok.encode("[CLS] a [SEP] b [MASK]")


@pytest.mark.realdata
def test_python_tokenizer_matches_sentencepiece_except_digit_commas(wikitext_spm, real_data):
    tok = SentencePieceTokenizer(wikitext_spm)
    raw = spm.SentencePieceProcessor(model_file=wikitext_spm)
    sentences = [s for doc in read_documents(str(real_data / "wikitext2" / "test.txt"), "wikitext") for s in doc]
    resplit = 0
    for sentence in sentences:
        text = preprocess_text(sentence)
        direct = raw.encode(text, out_type=str)
        ours = tok.tokenize(sentence)
        needs_split = [p for p in direct if len(p) > 1 and p[-1] == "," and p[-2].isdigit()]
        if not needs_split:
            assert ours == direct, sentence
        else:
            resplit += 1
            assert ours != direct
            assert "".join(ours).replace("\u2581", "") == "".join(direct).replace("\u2581", "")
    assert len(sentences) > 7000


@pytest.mark.realdata
def test_digit_comma_resplit_as_the_original(wikitext_spm):
    tok = SentencePieceTokenizer(wikitext_spm)
    pieces = encode_pieces(tok.sp_model, "paid 3,000, then 12,")
    # Each `<digits>,` piece is re-encoded without ▁ and the comma split off.
    assert pieces[-1] == "," and "," in pieces[:-1]
    for piece in pieces:
        assert not (len(piece) > 1 and piece.endswith(",") and piece[-2].isdigit())


@pytest.mark.realdata
def test_tf_text_twin_gives_identical_ids_on_wikitext(wikitext_spm, real_data):
    import tensorflow as tf

    from albert_tf.tokenization.tf_sentencepiece import TFSentencePieceTokenizer

    tok = SentencePieceTokenizer(wikitext_spm)
    twin = TFSentencePieceTokenizer(tok.model_proto)
    raw_lines = (real_data / "wikitext2" / "test.txt").read_text(encoding="utf-8").splitlines()
    texts = [line for line in raw_lines if line.strip()]
    # Edge cases: accents, odd spaces, digit-commas with and without ▁, empty.
    texts += ["Café  ÉTÉ\u00a0naïve\u2003x", "a3, 4,000,000, (12,)", "", "   ", "İstanbul ΟΔΟΣ"]
    expected = [tok.encode(t) for t in texts]
    got = twin(tf.constant(texts)).to_list()
    mismatches = [(t, e, g) for t, e, g in zip(texts, expected, got) if e != g]
    assert mismatches == []
    assert sum(len(e) for e in expected) > 200_000


@pytest.mark.realdata
def test_tf_text_twin_gives_identical_ids_on_korean(korean_spm, korean_reviews):
    import tensorflow as tf

    from albert_tf.tokenization.tf_sentencepiece import TFSentencePieceTokenizer

    tok = SentencePieceTokenizer(korean_spm)
    twin = TFSentencePieceTokenizer(tok.model_proto)
    texts = [review for movie in korean_reviews for review in movie]
    expected = [tok.encode(t) for t in texts]
    assert twin(tf.constant(texts)).to_list() == expected
    # NFKD decomposes Hangul syllables into jamo on both sides; few unknowns remain.
    unknown = sum(ids.count(tok.unk_id) for ids in expected) / sum(len(ids) for ids in expected)
    assert unknown < 0.01


def test_model_without_albert_symbols_is_refused(tmp_path):
    prefix = str(tmp_path / "plain")
    lines = [f"plain sentence number {i} about nothing" for i in range(200)]
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=prefix, vocab_size=40, minloglevel=2)
    with pytest.raises(
        TokenizerError,
        match=r"plain\.model.*missing control symbols \[CLS\], \[SEP\], "
        r"\[MASK\].*pad id is -1",
    ):
        SentencePieceTokenizer(prefix + ".model")
    with pytest.raises(TokenizerError, match="not a SentencePiece model"):
        SentencePieceTokenizer(model_proto=b"not a model")


def test_training_refuses_empty_text(tmp_path):
    with pytest.raises(ValueError, match="no text"):
        train_sentencepiece([], str(tmp_path / "empty"), vocab_size=50)


def test_train_sentencepiece_cli_uncased_and_cased(tmp_path, monkeypatch):
    from command_helpers import run_command
    from paths import REPO

    monkeypatch.chdir(REPO)

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"The Quick Brown Fox {i} Jumps.\nOver The Dog.\n" for i in range(200)))
    for cased in (False, True):
        prefix = tmp_path / f"m{int(cased)}"
        result = run_command(
            "data_prep.train_sentencepiece",
            [f"--input={corpus}", f"--model_prefix={prefix}", "--vocab_size=60"] + (["--cased"] if cased else []),
        )
        assert result.returncode == 0, result.stderr
        pieces = SentencePieceTokenizer(f"{prefix}.model", do_lower_case=not cased).pieces()
        assert any(any(c.isupper() for c in p) for p in pieces[13:]) == cased  # after the specials
    missing = run_command(
        "data_prep.train_sentencepiece", [f"--input={tmp_path}/nothing*.txt", f"--model_prefix={tmp_path}/x"]
    )
    assert missing.returncode != 0
    assert "nothing*.txt" in missing.stderr and "Traceback" not in missing.stderr


# ---- resource cliffs: a text without spaces over the segmenting limit (hardening probes) ----
def test_text_without_spaces_over_the_limit_is_refused_and_with_spaces_is_bounded(fox_spm):
    from albert_tf.tokenization import MAX_SEGMENTED_CHARS, SentencePieceTokenizer, TokenizerError

    from toy_inputs import TOY_LINES

    tokenizer = SentencePieceTokenizer(fox_spm)
    no_spaces = "thequickbrownfox" * (MAX_SEGMENTED_CHARS // 16 + 1)
    with pytest.raises(TokenizerError, match="^a text of 1,000,0.. characters to segment at once, over the limit"):
        tokenizer.encode(no_spaces, max_ids=16)
    with pytest.raises(TokenizerError, match="over the limit of 1,000,000"):
        tokenizer.encode(no_spaces)
    # With spaces only the first max_ids words are segmented: no limit reached, the ids of the start.
    long_text = " ".join(TOY_LINES * 200)
    assert len(long_text) > 2 * MAX_SEGMENTED_CHARS
    assert tokenizer.encode(long_text, max_ids=16) == tokenizer.encode(" ".join(TOY_LINES[:3]))[:16]
    assert tokenizer.encode(no_spaces[:1000], max_ids=16) == tokenizer.encode(no_spaces[:1000])[:16]
