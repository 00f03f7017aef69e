"""WordPiece vocabularies: the original's rules, the tf-text twin, the vocab builder, bad vocab files."""

import pytest

pytestmark = pytest.mark.realdata


def _toy(tmp_path, tokens):
    path = tmp_path / "vocab.txt"
    path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    return str(path)


def test_python_tokenizer_follows_bert_rules(tmp_path):
    from albert_tf.tokenization import WordPieceTokenizer

    vocab = _toy(tmp_path, ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "runn", "##ing",
                            ",", "!", "cafe", "Café", "中", "国", "a", "##a"])
    uncased = WordPieceTokenizer(vocab)
    # Accents stripped and lowercased; punctuation and CJK characters split; greedy longest match.
    assert uncased.tokenize(" UNaffable\trunning,Café!中国 ") == \
        ["un", "##aff", "##able", "runn", "##ing", ",", "cafe", "!", "中", "国"]
    # A word with an unmatchable piece is one [UNK]; control characters vanish, U+3000 is a space.
    assert uncased.tokenize("unxable un\u200baff\x07able\u3000aa") == ["[UNK]", "un", "##aff", "##able", "a", "##a"]
    assert uncased.tokenize("a" * 200) == ["a"] + ["##a"] * 199 and uncased.tokenize("a" * 201) == ["[UNK]"]
    cased = WordPieceTokenizer(vocab, do_lower_case=False)
    assert cased.tokenize("Café cafe UN") == ["Café", "cafe", "[UNK]"]
    assert (uncased.pad_id, uncased.unk_id, uncased.cls_id, uncased.sep_id, uncased.mask_id) == (0, 1, 2, 3, 4)


def test_special_ids_come_from_the_vocab(tmp_path):
    from albert_tf.tokenization import WordPieceTokenizer

    # Google's Chinese vocab.txt layout: [PAD]=0, [unused*], then [UNK]=100 ... [MASK]=103.
    tokens = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]", "中"]
    tok = WordPieceTokenizer(_toy(tmp_path, tokens))
    assert (tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id, tok.encode("中x")) == (100, 101, 102, 103, [104, 100])


def test_bad_vocab_files_and_flags_are_clear_errors(tmp_path):
    from albert_tf.tokenization import TokenizerError, WordPieceTokenizer, load_tokenizer

    with pytest.raises(TokenizerError, match=r"vocab.txt: not a WordPiece vocab.txt for ALBERT: missing \[MASK\]"):
        WordPieceTokenizer(_toy(tmp_path, ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"]))
    (tmp_path / "binary.txt").write_bytes(b"[PAD]\n\xff\xfe\n")
    with pytest.raises(TokenizerError, match="binary.txt: not a UTF-8 vocab.txt"):
        WordPieceTokenizer(str(tmp_path / "binary.txt"))
    with pytest.raises(TokenizerError, match="exactly one of --spm_model_file .* and --vocab_file .*got neither"):
        load_tokenizer()
    with pytest.raises(TokenizerError, match="got both"):
        load_tokenizer("spm.model", "vocab.txt")


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_tf_twin_gives_identical_ids(wordpiece_vocab, wordpiece_corpus, do_lower_case):
    import tensorflow as tf

    from albert_tf.tf_tokenization import TFWordPieceTokenizer, tf_tokenizer_for
    from albert_tf.tokenization import WordPieceTokenizer

    python = WordPieceTokenizer(wordpiece_vocab, do_lower_case=do_lower_case)
    graph = tf_tokenizer_for(python)
    assert isinstance(graph, TFWordPieceTokenizer)
    for name, lines in wordpiece_corpus.items():
        lines = lines[:1500] + ["", "  \t ", "x" * 250 + " ok", "a\u00a0b\u2028c\x00d\ufffde"]
        got = graph(tf.constant(lines)).to_list()
        expected = [python.encode(line) for line in lines]
        mismatches = [(line, g, e) for line, g, e in zip(lines, got, expected) if g != e]
        assert not mismatches, (name, mismatches[:3])
        known = sum(len(e) - e.count(python.unk_id) for e in expected) / max(1, sum(len(e) for e in expected))
        assert known > 0.95, (name, known)  # the vocab covers the text it was learned from


def test_vocab_builder_cli(real_data, tmp_path):
    import subprocess
    import sys

    from albert_tf.tokenization import WordPieceTokenizer
    from tests.conftest import REPO

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join((real_data / "wikitext2" / "test.txt").read_text(encoding="utf-8")
                                .splitlines()[:800]), encoding="utf-8")
    out = tmp_path / "vocab" / "vocab.txt"
    result = subprocess.run([sys.executable, "-m", "data_prep.build_wordpiece_vocab", f"--input={corpus}",
                             "--input_format=wikitext", f"--output_file={out}", "--vocab_size=1000"],
                            cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    tokens = out.read_text(encoding="utf-8").splitlines()
    assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and len(set(tokens)) == len(tokens)
    assert any(t.startswith("##") for t in tokens) and 500 < len(tokens) < 2000
    tok = WordPieceTokenizer(str(out))
    ids = tok.encode("The game was released in Japan in 2010 .")
    assert tok.unk_id not in ids and len(ids) >= 9
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    result = subprocess.run([sys.executable, "-m", "data_prep.build_wordpiece_vocab", f"--input={empty}",
                             f"--output_file={tmp_path / 'v2.txt'}"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode != 0 and "no text" in result.stderr and not (tmp_path / "v2.txt").exists()
