"""PL-BERT phoneme data (`create_pretraining_data --objective plbert`): WikiText-2 → espeak-ng → rows."""

import json

import numpy as np
import pytest
from plbert_helpers import make_plbert_data, wikitext_corpus

from albert_tf.shard_set import PLBERT, WORD_VOCAB_FILE, PretrainingData
from albert_tf.tokenization.plbert_symbols import NUM_SYMBOLS, SEPARATOR_ID, SYMBOL_IDS, SYMBOLS, symbol_ids

HELLO_IDS = [50, 83, 54, 156, 57, 135]  # h ə l ˈ o ʊ in StyleTTS 2's table
SEP_WORD = 2  # word_vocab.txt: [PAD], [UNK], [SEP], then words


def test_the_symbol_table_is_styletts2s_and_hello_phonemizes_to_its_ids():
    from data_prep.phonemes import WordPhonemizer, words

    assert len(SYMBOLS) == NUM_SYMBOLS == 178 and SYMBOLS[0] == "$" and SYMBOLS[SEPARATOR_ID] == " "
    assert SYMBOL_IDS["'"] == 176  # listed twice; the later id wins, as StyleTTS 2's dict
    said = WordPhonemizer("en-us").phonemes(words("Hello, a cat."))
    assert said == ["həlˈoʊ", ",", "ɐ", "kˈæt", "."]
    assert symbol_ids(said[0]) == (HELLO_IDS, [])


def command(*argv):
    return make_plbert_data(*argv)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, real_data):
    """The first 300 lines of WikiText-2 test: each paragraph a document (blank-line separated)."""
    return wikitext_corpus(real_data, tmp_path_factory.mktemp("plbert_corpus") / "wiki.txt", 300)


FLAGS = ("--objective", "plbert", "--word_vocab_size", 1000, "--max_seq_length", 128, "--num_shards", 2)


@pytest.fixture(scope="module")
def made(tmp_path_factory, corpus):
    """The corpus made twice one window a row, and once packed 4 windows a row."""
    root = tmp_path_factory.mktemp("plbert")
    outputs = {}
    for name, extra in (("a", []), ("b", []), ("packed", ["--max_instances_per_row", 4])):
        result = command(*FLAGS, "--input_file", corpus, "--output_dir", root / name, *extra)
        assert result.returncode == 0, result.stderr[-3000:]
        outputs[name] = (root / name, result.stdout)
    return outputs


def rows(directory):
    """Every row of a data directory as {feature: int array}, shards in order."""
    import tensorflow as tf

    from albert_tf.inputs.shard_reader import data_feature_description, resolve_input

    source = resolve_input(str(directory))
    spec = data_feature_description(source.data)
    found = []
    for batch in tf.data.TFRecordDataset(source.files).batch(4096):
        parsed = {k: v.numpy() for k, v in tf.io.parse_example(batch, spec).items()}
        found += [{k: v[i] for k, v in parsed.items()} for i in range(len(batch))]
    return found


def windows(row):
    """The windows of a row (split by input_mask), each with its word positions counted from 1 again."""
    found = []
    for number in range(1, int(row["input_mask"].max()) + 1):
        at = row["input_mask"] == number
        positions = row["word_positions"][at]
        first = positions[positions > 0].min() - 1
        renumbered = np.where(positions > 0, positions - first, 0)
        found.append((tuple(row["input_ids"][at]), tuple(row["word_ids"][at]), tuple(renumbered)))
    return found


@pytest.mark.realdata
def test_wikitext_rows_hold_phoneme_ids_words_and_their_positions(made):
    directory, stdout = made["a"]
    data = PretrainingData.load(str(directory))
    assert data.objective == PLBERT and data.metadata["symbols"] == 178 and data.metadata["language"] == "en-us"
    vocabulary = (directory / WORD_VOCAB_FILE).read_text(encoding="utf-8").splitlines()
    assert vocabulary[:4] == ["[PAD]", "[UNK]", "[SEP]", "the"] and len(vocabulary) == data.word_vocab_size == 1000
    counts = data.metadata["counts"]
    assert "unknown symbols dropped" in stdout and f"{counts['words']} words" in stdout
    assert counts["unknown_symbol_counts"]["("] > 0 and counts["empty_words"] > 0  # "(" is no symbol of the table
    the = vocabulary.index("the")
    all_rows = rows(directory)
    assert len(all_rows) == data.metadata["num_instances"] > 20
    for row in all_rows:
        real = row["input_mask"] > 0
        length = int(real.sum())
        assert real[:length].all() and not row["input_ids"][length:].any() and not row["word_ids"][length:].any()
        ids, word_ids, positions = row["input_ids"][:length], row["word_ids"][:length], row["word_positions"][:length]
        assert ((ids >= 1) & (ids < 178)).all() and ((word_ids >= 1) & (word_ids < 1000)).all()
        separators = positions == 0
        assert (word_ids[separators] == SEP_WORD).all() and (ids[separators] == SEPARATOR_ID).all()
        assert (word_ids[~separators] != SEP_WORD).all() and separators[-1]
        # words are numbered 1, 2, ... in order, each one run of positions closed by its separator
        starts = np.flatnonzero(~separators & np.r_[True, separators[:-1]])
        assert list(positions[starts]) == list(range(1, len(starts) + 1))
        for start, end in zip(starts, np.flatnonzero(separators)):
            assert (positions[start:end] == positions[start]).all() and len(set(word_ids[start:end])) == 1
            if word_ids[start] == the:  # "the", read alone by espeak-ng
                assert list(ids[start:end]) == symbol_ids("ðə")[0]


@pytest.mark.realdata
def test_two_runs_write_identical_bytes(made):
    (a, _), (b, _) = made["a"], made["b"]
    for name in ["part-00000-of-00002.tfrecord", "part-00001-of-00002.tfrecord", WORD_VOCAB_FILE]:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    metadata = [json.loads((d / "metadata.json").read_text()) for d in (a, b)]
    assert metadata[0]["shard_files"] == metadata[1]["shard_files"]


@pytest.mark.realdata
def test_packed_rows_hold_the_same_windows_in_fewer_rows(made):
    one_a_row, packed = rows(made["a"][0]), rows(made["packed"][0])
    assert len(packed) < len(one_a_row)
    assert max(int(row["input_mask"].max()) for row in packed) > 1
    for row in packed:  # word positions keep counting across the windows of a row
        positions = row["word_positions"][row["word_positions"] > 0]
        assert (np.diff(positions) >= 0).all()
    assert sorted(w for row in packed for w in windows(row)) == sorted(w for row in one_a_row for w in windows(row))


@pytest.mark.realdata
def test_phonemized_input_learns_its_words_from_the_phoneme_strings(tmp_path, corpus):
    from data_prep.phonemes import WordPhonemizer, words

    phonemizer = WordPhonemizer("en-us")
    documents = corpus.read_text(encoding="utf-8").split("\n\n")[:20]
    lines = [" ".join("".join(p.split()) for p in phonemizer.phonemes(words(d))) for d in documents]
    (tmp_path / "phonemes.txt").write_text("\n\n".join(lines), encoding="utf-8")  # a document a paragraph
    phonemized = " ".join(lines).split()
    result = command(
        *FLAGS, "--phonemized", "--language", "ml", "--input_file", tmp_path / "phonemes.txt", "--output_dir", tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    vocabulary = (tmp_path / WORD_VOCAB_FILE).read_text(encoding="utf-8").splitlines()
    assert vocabulary[3] == "ðə"
    data = PretrainingData.load(str(tmp_path))
    assert data.metadata["counts"]["words"] == len([p for p in phonemized if symbol_ids(p)[0]])
    first = rows(tmp_path)
    the = [row["input_ids"][row["word_ids"] == 3] for row in first]
    assert all(set(ids) <= set(symbol_ids("ðə")[0]) for ids in the) and sum(map(len, the)) > 0


@pytest.mark.parametrize(
    "extra, said",
    [
        (["--language", "xx"], "error: --language xx: espeak-ng has no such language"),
        (["--word_vocab_size", 2], "error: --word_vocab_size 2: must be at least 3 ([PAD], [UNK], [SEP] come first)"),
        (["--dupe_factor", 2], "error: --dupe_factor: a flag of --objective albert, not of --objective plbert"),
        (["--input_file", "EMPTY"], "error: no PL-BERT rows: the inputs"),
    ],
    ids=["language", "word_vocab_size", "albert_flag", "empty"],
)
def test_bad_input_is_one_line(tmp_path, extra, said):
    (tmp_path / "empty.txt").write_text("\n\n(\n")
    (tmp_path / "text.txt").write_text("Hello world.\n")
    given = ["--objective", "plbert", "--input_file", tmp_path / "text.txt", "--output_dir", tmp_path / "out"]
    extra = [tmp_path / "empty.txt" if a == "EMPTY" else a for a in extra]
    result = command(*given, *extra)
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 1 and len(lines) == 1 and lines[0].startswith(said), result.stderr[-3000:]
    assert "Traceback" not in result.stderr and not (tmp_path / "out" / "metadata.json").exists()


@pytest.mark.realdata
def test_inspect_and_the_reader_describe_plbert_data(made):
    from albert_tf.cli.inspect import describe

    directory, _ = made["packed"]
    found = describe(str(directory))
    assert found["objective"] == PLBERT and found["word_vocab_size"] == 1000 and found["max_instances_per_row"] == 4
    assert found["counts"]["rows"] == sum(PretrainingData.load(str(directory)).metadata["shards"].values())
    albert = PretrainingData("d", {"format_version": 1, "shards": {}, "max_seq_length": 8})
    assert albert.objective == "albert" and albert.word_vocab_path is None
