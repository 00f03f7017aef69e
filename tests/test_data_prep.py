"""data_prep building blocks: readers, masking, pairs, Example encoding, bad input."""

import json
import os
import random

import numpy as np
import pytest

from albert_tf.tokenization import SentencePieceTokenizer, is_start_piece
from data_prep import documents
from data_prep.instances import InstanceBuilder, InstanceOptions, truncate_seq_pair
from data_prep.masking import MaskingOptions, NgramMasker
from data_prep.tfrecord import encode_example, write_record

PIECES = [
    "<pad>",
    "<unk>",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "(",
    ".",
    "\u2581the",
    "\u2581ca",
    "t",
    "\u2581sat",
    "s",
    "\u25813",
    "'",
    "\uc548\ub155",
    "<unk2>",
    "=",
]


def test_readers(tmp_path):
    bert = tmp_path / "bert.txt"
    bert.write_text("A one.\nA two.\n\n\n  \nB one.\n")
    assert list(documents.read_documents(str(bert), "bert")) == [["A one.", "A two."], ["B one."]]

    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text(json.dumps({"text": "First one. Second one!\nThird?"}) + "\n\n" + json.dumps({"text": ""}) + "\n")
    assert list(documents.read_documents(str(jsonl), "jsonl")) == [["First one.", "Second one!", "Third?"]]

    wiki = tmp_path / "wiki.txt"
    wiki.write_text(
        " \n = Title A = \n \n Text @-@ here . More 1 @,@ 000 . \n = = Sub = = \n Again . \n = Title B = \n Other . \n"
    )
    assert list(documents.read_documents(str(wiki), "wikitext")) == [
        ["Text-here .", "More 1,000 .", "Again ."],
        ["Other ."],
    ]


def test_reader_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "ok"}) + "\n{broken\n")
    with pytest.raises(documents.InputFormatError, match=r"bad\.jsonl:2: not JSON"):
        list(documents.read_documents(str(bad), "jsonl"))
    bad.write_text(json.dumps({"body": "no text"}) + "\n")
    with pytest.raises(documents.InputFormatError, match=r"bad\.jsonl:1: .*'text'"):
        list(documents.read_documents(str(bad), "jsonl"))
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        documents.expand_input_patterns(str(tmp_path / "nothing-here*"))


def test_invalid_utf8_is_replaced_and_counted(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("Caf\u00e9 ol\u00e9.\nFine line.\n".encode("latin-1"))
    stats = documents.ReadStats(str(path))
    docs = list(documents.read_documents(str(path), "bert", stats))
    assert docs == [["Caf\ufffd ol\ufffd.", "Fine line."]]
    assert stats.replaced_bytes == 2


def test_start_pieces_follow_the_original_rule():
    assert is_start_piece("\u2581the") and is_start_piece("<unk>") and is_start_piece("(")
    assert is_start_piece("3") and is_start_piece("\uc548\ub155")  # digits and non-Latin start words
    assert not is_start_piece("t") and not is_start_piece("ing")
    # `'` and `=` are not in the original's punctuation list, so they count as
    # "other" characters and make a start, as in the original.
    assert is_start_piece("'s") and is_start_piece("=")
    assert not is_start_piece("s.") and not is_start_piece("-ing")


def test_masking_never_touches_specials_and_respects_the_budget():
    masker = NgramMasker(PIECES, MaskingOptions(masked_lm_prob=0.15, max_predictions_per_seq=5))
    rng = random.Random(3)
    ids = [2] + [rng.choice(range(5, len(PIECES))) for _ in range(60)] + [3] + [7, 8, 9] * 10 + [3]
    for seed in range(200):
        result = masker.mask(ids, random.Random(seed))
        assert len(result.positions) <= 5
        assert result.positions == sorted(set(result.positions))
        assert all(ids[p] not in (2, 3) for p in result.positions)
        assert [ids[p] for p in result.positions] == result.labels
        changed = [i for i in range(len(ids)) if result.input_ids[i] != ids[i]]
        assert set(changed) <= set(result.positions)


def test_whole_words_are_masked_together():
    masker = NgramMasker(PIECES, MaskingOptions(masked_lm_prob=1.0, max_predictions_per_seq=100, ngram=1))
    ids = [2, 8, 9, 11, 10, 3]  # [CLS] ▁ca t s ▁sat [SEP]: "cats" is one unit of three pieces
    units, boundary = masker.word_units(ids)
    assert units == [[1, 2, 3], [4]] and boundary == [1, 1, 0, 0, 1, 1]
    for seed in range(50):
        positions = masker.mask(ids, random.Random(seed)).positions
        assert positions in ([1, 2, 3], [4], [1, 2, 3, 4])


def test_truncation_trims_the_longer_segment():
    a, b = list(range(10)), list(range(100, 103))
    truncate_seq_pair(a, b, 8, random.Random(0))
    assert len(a) == 5 and b == [100, 101, 102]
    assert a == list(range(a[0], a[0] + 5))  # trimmed at the ends only


def test_one_sentence_documents_give_sop_pairs_not_random_negatives():
    masker = NgramMasker(PIECES, MaskingOptions())
    builder = InstanceBuilder(masker, InstanceOptions(max_seq_length=32, short_seq_prob=0))
    sentence = [7, 8, 9, 10, 7, 11, 10, 12]
    labels = []
    for seed in range(100):
        instance = builder.build([sentence], [[sentence], [[16] * 5]], 0, random.Random(seed))[0]
        original = list(instance.input_ids)
        for position, label in zip(instance.masked_lm_positions, instance.masked_lm_ids):
            original[position] = label
        first_sep = original.index(3)
        a, b = original[1:first_sep], original[first_sep + 1 : -1]
        assert sorted(a + b) == sorted(sentence)  # never the other document
        assert (b + a == sentence) == instance.is_random_next
        labels.append(instance.is_random_next)
    assert 30 < sum(labels) < 70
    # A single token cannot make a pair; the original's mode still can (random document).
    assert builder.build([[7]], [[[7]]], 0, random.Random(0)) == []
    original_mode = InstanceBuilder(masker, InstanceOptions(32, 0, one_sentence_chunks="random_document"))
    instance = original_mode.build([sentence], [[sentence], [[16] * 5]], 0, random.Random(0))[0]
    assert instance.is_random_next and 16 in instance.input_ids + instance.masked_lm_ids


def test_example_encoding_parses_in_tensorflow(tmp_path):
    import tensorflow as tf

    features = [
        ("input_ids", "int64", [2, 5, 70000, 3, 0]),
        ("weights", "float", [1.0, 0.25]),
        ("negative", "int64", [-1]),
    ]
    path = tmp_path / "one.tfrecord"
    with open(path, "wb") as f:
        write_record(f, encode_example(features))
        write_record(f, encode_example(features))
    records = list(tf.data.TFRecordDataset(str(path)).as_numpy_iterator())
    assert len(records) == 2
    example = tf.train.Example.FromString(records[0])
    assert list(example.features.feature["input_ids"].int64_list.value) == [2, 5, 70000, 3, 0]
    assert list(example.features.feature["negative"].int64_list.value) == [-1]
    np.testing.assert_allclose(example.features.feature["weights"].float_list.value, [1.0, 0.25])


# ---- data_prep on a full disk: one line, the old dataset kept (hardening probes) ----
def test_data_prep_out_of_disk_is_one_line_and_keeps_the_old_dataset(fox_spm, tmp_path, monkeypatch):
    import errno
    import os

    from albert_tf.publish import STAGING_PREFIX
    from data_prep import pipeline

    from toy_inputs import TOY_LINES

    (tmp_path / "in.txt").write_text("\n\n".join(" ".join(TOY_LINES[i : i + 5]) for i in range(0, 200, 5)))
    settings = pipeline.Settings(
        input_file=str(tmp_path / "in.txt"),
        output_dir=str(tmp_path / "out"),
        tokenizer=SentencePieceTokenizer(fox_spm),
        max_seq_length=32,
        dupe_factor=1,
        num_shards=2,
        overwrite=True,
    )
    pipeline.run(settings)
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")}

    def full_disk(stream, record):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pipeline, "write_record", full_disk)
    with pytest.raises(pipeline.DataPrepError, match="out: no space left on device while writing the dataset"):
        pipeline.run(settings)
    after = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")}
    assert after == before and not [p for p in os.listdir(tmp_path / "out") if p.startswith(STAGING_PREFIX)]


# ---- the data step's edge: one line for every flag mistake, one error base (hardening V) ----
def toy_corpus(tmp_path):
    from toy_inputs import TOY_LINES

    path = tmp_path / "in.txt"
    path.write_text("\n\n".join(" ".join(TOY_LINES[i : i + 5]) for i in range(0, 200, 5)))
    return path


@pytest.mark.parametrize(
    "extra, said",
    [
        (["--dupe_factor", "abc"], "FATAL Flags parsing error: flag --dupe_factor=abc: invalid literal for int()"),
        (["--max_instance_per_row", "3"], "Unknown command line flag 'max_instance_per_row'. Did you mean: max_inst"),
        (["--direct_num_worker=2"], "Unknown command line flag 'direct_num_worker'. Did you mean: direct_num_workers"),
        (["--direct_num_workers", "abc"], "argument --direct_num_workers: invalid int value: 'abc'"),
        (["--direct_num_workers", "-2"], "error: --direct_num_workers -2: must be at least 0"),
        (["more.txt"], "unexpected argument 'more.txt'"),
        (None, "flag --input_file=None: Flag --input_file must have a value"),  # no flag at all
    ],
    ids=["typed", "unknown", "unknown_beam", "beam_typed", "negative_workers", "positional", "none"],
)
def test_create_pretraining_data_flag_mistakes_are_one_line_before_any_work(fox_spm, tmp_path, extra, said):
    from command_helpers import run_command

    given = [f"--input_file={toy_corpus(tmp_path)}", f"--output_dir={tmp_path / 'out'}", f"--spm_model_file={fox_spm}"]
    result = run_command("data_prep.create_pretraining_data", [] if extra is None else given + extra)
    assert result.returncode == 1 and said in result.stderr, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()


def test_max_instances_per_row_is_bounded_by_what_a_row_holds(fox_spm, tmp_path):
    from albert_tf.errors import AlbertError
    from data_prep.pipeline import Settings

    def settings(per_row):
        return Settings(input_file="x", output_dir="y", max_seq_length=64, max_instances_per_row=per_row)

    settings(12).validate()  # twelve [CLS] a [SEP] b [SEP] of 5 tokens fit 64
    with pytest.raises(AlbertError, match=r"^max_instances_per_row 1000000000: a row of max_seq_length 64 tokens hold"):
        settings(10**9).validate()  # was a row of 10⁹ slots allocated, and a MemoryError
    with pytest.raises(AlbertError, match="holds at most 12 instances"):
        settings(13).validate()


def test_data_prep_errors_are_albert_errors():
    from albert_tf.errors import AlbertError
    from data_prep.instances import InstanceOptions
    from data_prep.packing import pack_rows
    from data_prep.records import serialize_row

    with pytest.raises(AlbertError, match="max_seq_length must be at least 5"):
        InstanceOptions(max_seq_length=4)
    with pytest.raises(AlbertError, match="an instance of 9 tokens does not fit a row of 8"):
        pack_rows([9], capacity=8, max_per_row=2)
    with pytest.raises(AlbertError, match="input_format must be one of"):
        list(documents.read_documents("x", "csv"))
    with pytest.raises(AlbertError, match="does not fit"):
        serialize_row([], max_seq_length=-1, prediction_slots=1, max_instances_per_row=1)


def test_the_vocabulary_commands_keep_one_error_boundary(tmp_path, monkeypatch):
    """A DataPrepError is one line (its traceback with -v 1); a bug's ValueError is a traceback, not 'error: …'."""
    from albert_tf.cli import train_sentencepiece as command

    from command_helpers import run_command

    empty = tmp_path / "empty.txt"
    empty.write_text("")
    argv = [f"--input={empty}", f"--output_file={tmp_path / 'vocab.txt'}"]
    said = run_command("data_prep.build_wordpiece_vocab", argv)
    assert said.returncode == 1 and said.stderr.strip().splitlines()[-1].startswith("error: no text to learn")
    assert "Traceback" in run_command("data_prep.build_wordpiece_vocab", argv + ["-v", "1"]).stderr

    def bug(*args, **kwargs):
        raise ValueError("a bug")

    monkeypatch.setattr(command, "train_sentencepiece", bug)
    crashed = run_command("data_prep.train_sentencepiece", [f"--input={empty}", f"--model_prefix={tmp_path / 'm'}"])
    assert "Traceback" in crashed.stderr and "error: a bug" not in crashed.stderr


def test_a_reader_that_leaves_does_not_fail_a_complete_run(tmp_path):
    """`... | head -1` (the reader gone before the last line): the run ends whole with exit status 0.

    A subprocess: the process's own stdout pipe is what is under test, buffered and not."""
    import subprocess
    import sys

    from paths import REPO

    corpus = toy_corpus(tmp_path)
    for unbuffered in ("", "1"):
        prefix = tmp_path / f"model{unbuffered}"
        process = subprocess.Popen(
            [sys.executable, "-m", "data_prep.train_sentencepiece", f"--input={corpus}", f"--model_prefix={prefix}"]
            + ["--vocab_size=60"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO,
            env={**os.environ, "PYTHONUNBUFFERED": unbuffered},
        )
        process.stdout.close()  # the reader leaves at once
        stderr = process.stderr.read().decode()
        assert process.wait(timeout=120) == 0, stderr
        assert stderr == "" and SentencePieceTokenizer(f"{prefix}.model").vocab_size == 60


def test_a_negative_random_seed_is_refused_naming_the_flag(tmp_path):
    """--random_seed -1 ran as a seed like any other (as if it meant "random"), without a word."""
    from data_prep.pipeline import DataPrepError, Settings, run

    with pytest.raises(DataPrepError, match=r"^--random_seed -1: must be 0 or more$"):
        run(Settings(input_file=str(tmp_path / "in.txt"), output_dir=str(tmp_path / "out"), random_seed=-1))
    assert not (tmp_path / "out").exists()
