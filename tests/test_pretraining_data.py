"""The Beam pretraining-data pipeline on real text: statistics, layout, determinism, bad input."""

import collections
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from albert_tf.publish import STAGING_PREFIX
from albert_tf.tokenization import SentencePieceTokenizer, TokenizerError
from data_prep.documents import encode_sentence, read_documents
from data_prep.pipeline import DataPrepError, Settings, run

from command_helpers import run_command
from paths import REPO
from pretraining_helpers import read_dataset

pytestmark = pytest.mark.realdata
SEQ = 128


def make_settings(tmp_path, spm_model, input_file, **overrides):
    values = dict(
        input_file=str(input_file),
        output_dir=str(tmp_path / "out"),
        tokenizer=SentencePieceTokenizer(spm_model),
        max_seq_length=SEQ,
        dupe_factor=2,
        num_shards=3,
    )
    values.update(overrides)
    return Settings(**values)


@pytest.fixture(scope="module")
def wikitext_dataset(tmp_path_factory, wikitext_spm, real_data):
    out = tmp_path_factory.mktemp("wikitext_data")
    settings = make_settings(out, wikitext_spm, real_data / "wikitext2" / "valid.txt", input_format="wikitext")
    run(settings)
    metadata, data = read_dataset(out / "out")
    return settings, metadata, data


def test_wikitext_unk_is_the_unknown_id(wikitext_dataset, wikitext_spm, real_data):
    """WikiText's `<unk>` marker is one unknown id in the data, and no piece of the vocabulary learnt from it."""
    _, _, data = wikitext_dataset
    tok = SentencePieceTokenizer(wikitext_spm)
    ids = originals(data)
    unknown = (ids == tok.unk_id).sum()
    markers = (real_data / "wikitext2" / "valid.txt").read_text(encoding="utf-8").count("<unk>")
    assert markers > 1000 and unknown > markers  # every marker, in about 2 instances each (dupe factor 2)
    # Had the marker been text, its pieces (`<`, `unk`, `>`) would follow each other where it stood.
    as_text = tok.encode("a <unk> b")[1:-1]
    assert len(as_text) > 1
    rows = [",".join(map(str, row)) for row in ids.tolist()]
    assert not [row for row in rows if ",".join(map(str, as_text)) in row]


def originals(data):
    """input_ids with the masked tokens put back."""
    ids = data["input_ids"].copy()
    weights = data["masked_lm_weights"] > 0
    ids[np.nonzero(weights)[0], data["masked_lm_positions"][weights]] = data["masked_lm_ids"][weights]
    return ids


def test_layout_and_specials(wikitext_dataset, wikitext_spm):
    _, metadata, data = wikitext_dataset
    tok = SentencePieceTokenizer(wikitext_spm)
    assert metadata["num_instances"] == len(data["input_ids"]) > 4000
    assert metadata["vocab_size"] == 4000 and metadata["vocab_sha256"] == tok.model_sha256
    assert metadata["vocab_type"] == "sentencepiece"
    assert sum(metadata["shards"].values()) == metadata["num_instances"]
    ids, mask, segments = originals(data), data["input_mask"], data["segment_ids"]
    lengths = mask.sum(1)
    for row in range(len(ids)):
        n = lengths[row]
        assert mask[row, :n].all() and not mask[row, n:].any()
        assert ids[row, 0] == tok.cls_id and ids[row, n - 1] == tok.sep_id
        assert (ids[row, n:] == 0).all() and (segments[row, n:] == 0).all()
        seps = np.flatnonzero(ids[row, :n] == tok.sep_id)
        assert len(seps) == 2 and seps[0] >= 2 and seps[1] - seps[0] >= 2  # both segments non-empty
        assert (segments[row, : seps[0] + 1] == 0).all() and (segments[row, seps[0] + 1 : n] == 1).all()
        assert data["token_boundary"][row, 0] == 1 and data["token_boundary"][row, seps].all()
    weights = data["masked_lm_weights"] > 0
    positions = np.where(weights, data["masked_lm_positions"], 0)
    masked_originals = np.take_along_axis(ids, positions, 1)[weights]
    assert not np.isin(masked_originals, [tok.cls_id, tok.sep_id, tok.pad_id]).any()
    assert (np.take_along_axis(mask, positions, 1)[weights] == 1).all()  # never padding
    assert (data["masked_lm_positions"][~weights] == 0).all() and (data["masked_lm_ids"][~weights] == 0).all()


def test_masking_statistics(wikitext_dataset):
    _, metadata, data = wikitext_dataset
    lengths = data["input_mask"].sum(1)
    predictions = (data["masked_lm_weights"] > 0).sum(1)
    expected = np.minimum(20, np.maximum(1, np.round(lengths * 0.15)))
    assert (predictions <= expected).all()
    assert (predictions == expected).mean() > 0.95  # spans rarely leave the budget unfilled
    assert abs(predictions.sum() / lengths.sum() - 0.15) < 0.01
    # 80/10/10
    weights = data["masked_lm_weights"] > 0
    shown = np.take_along_axis(data["input_ids"], data["masked_lm_positions"], 1)[weights]
    labels = data["masked_lm_ids"][weights]
    assert abs((shown == 4).mean() - 0.8) < 0.01
    assert abs((shown == labels).mean() - 0.1) < 0.01
    # n-gram draws p(n) ∝ 1/n: 6/11, 3/11, 2/11
    drawn = metadata["counts"]["ngram_drawn"]
    total = sum(drawn.values())
    for n, p in (("1", 6 / 11), ("2", 3 / 11), ("3", 2 / 11)):
        assert abs(drawn[n] / total - p) < 0.01, (n, drawn)
    # In the data: masked runs measured in words (token_boundary) are mostly one word, some 2-3+.
    boundary = data["token_boundary"]
    run_words = collections.Counter()
    for row in range(len(lengths)):
        masked = set(data["masked_lm_positions"][row][weights[row]])
        current = 0
        for i in range(lengths[row] + 1):
            if i in masked:
                current += int(boundary[row, i]) or (current == 0)
            elif current:
                run_words[current] += 1
                current = 0
    share = {n: run_words[n] / sum(run_words.values()) for n in (1, 2, 3)}
    assert 0.45 < share[1] < 0.62 and 0.2 < share[2] < 0.32 and share[1] > share[2] > share[3]


def test_sop_labels_and_swapped_pairs_are_consecutive_text(wikitext_dataset, wikitext_spm, real_data):
    _, metadata, data = wikitext_dataset
    labels = data["next_sentence_labels"][:, 0]
    assert abs(labels.mean() - 0.5) < 0.03
    # Index every 6-gram of the tokenized corpus: (document, offset).
    tok = SentencePieceTokenizer(wikitext_spm)
    index = {}
    for d, doc in enumerate(read_documents(str(real_data / "wikitext2" / "valid.txt"), "wikitext")):
        stream = [t for sentence in doc for t in encode_sentence(tok, sentence, "wikitext")]  # as data_prep encodes
        for i in range(len(stream) - 5):
            index.setdefault(tuple(stream[i : i + 6]), []).append((d, i))
    ids, checked, gaps = originals(data), collections.Counter(), {0: [], 1: []}
    for row in range(len(ids)):
        n = data["input_mask"][row].sum()
        sep = int(np.flatnonzero(ids[row, :n] == 3)[0])
        first, second = ids[row, 1:sep], ids[row, sep + 1 : n - 1]
        if len(first) < 6 or len(second) < 6:
            continue
        # Where each segment starts and ends in the corpus (6-grams that occur once only).
        found = [index.get(tuple(x), []) for x in (first[:6], first[-6:], second[:6], second[-6:])]
        if any(len(f) != 1 for f in found):
            continue  # a repeated phrase or a masked-out edge: ambiguous
        (a_doc, a_start), (_, a_end), (b_doc, b_start), (_, b_end) = [f[0] for f in found]
        assert a_doc == b_doc, "segments from different documents in SOP data"
        if labels[row] == 1:  # B+A: the second segment is the text right before the first
            gaps[1].append(a_start - (b_end + 6))
        else:
            gaps[0].append(b_start - (a_end + 6))
        checked[int(labels[row])] += 1
    # Segments never overlap; they are adjacent unless truncation trimmed the junction
    # (a chunk overshoots its target by up to a sentence, trimmed at a random end).
    for label in (0, 1):
        gap = np.array(gaps[label])
        assert gap.min() >= 0 and np.median(gap) < SEQ / 4 and (gap == 0).mean() > 0.08, (
            label,
            np.percentile(gap, [25, 50, 90]),
        )
    assert checked[0] > 1000 and checked[1] > 1000, checked


def test_short_sequences(wikitext_dataset):
    _, metadata, data = wikitext_dataset
    counts = metadata["counts"]
    assert abs(counts["short_target"] / counts["instances"] - 0.1) < 0.02
    short = (data["input_mask"].sum(1) < SEQ).mean()
    # Short targets near the maximum can still fill the sequence; documents' last chunks add some.
    assert 0.07 <= short < 0.2


@pytest.mark.slow
def test_same_bytes_whatever_the_number_of_workers(tmp_path, wikitext_spm, real_data):
    shakespeare = tmp_path / "shakespeare.txt"
    text = (real_data / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")
    shakespeare.write_text("\n".join(text.splitlines()[:6000]))
    outputs = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        # A subprocess per run: the bytes must not depend on the process (each its own hash seed) nor on
        # the number of Beam's worker processes; in the test process both runs would share one driver.
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "data_prep.create_pretraining_data",
                f"--input_file={shakespeare}",
                f"--output_dir={out}",
                f"--spm_model_file={wikitext_spm}",
                f"--max_seq_length={SEQ}",
                "--dupe_factor=2",
                "--num_shards=2",
                f"--direct_num_workers={workers}",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        outputs.append({p: (out / p).read_bytes() for p in sorted(os.listdir(out)) if p.startswith("part-")})
    assert list(outputs[0]) == ["part-00000-of-00002.tfrecord", "part-00001-of-00002.tfrecord"]
    assert outputs[0] == outputs[1]
    assert all(len(v) > 100_000 for v in outputs[0].values())


def test_korean_jsonl_and_nsp_mode(tmp_path, korean_spm, korean_reviews):
    corpus = tmp_path / "reviews.jsonl"
    corpus.write_text(
        "\n".join(json.dumps({"text": "\n".join(movie)}, ensure_ascii=False) for movie in korean_reviews),
        encoding="utf-8",
    )
    settings = make_settings(
        tmp_path,
        korean_spm,
        corpus,
        input_format="jsonl",
        max_seq_length=64,
        random_next_sentence=True,
        negative_pool_documents=8,
    )
    metadata = run(settings)
    assert metadata["task"] == "nsp"
    _, data = read_dataset(tmp_path / "out")
    # NSP as the original: p=0.5 random B, and always for one-sentence chunks (long reviews).
    assert 0.5 < data["next_sentence_labels"].mean() < 0.65
    assert abs((data["masked_lm_weights"] > 0).sum() / data["input_mask"].sum() - 0.15) < 0.015
    tok = SentencePieceTokenizer(korean_spm)
    assert (data["input_ids"] == tok.unk_id).mean() < 0.01


def test_bad_inputs_give_clear_errors_and_keep_existing_data(tmp_path, wikitext_spm, real_data):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(DataPrepError, match="no training instances"):
        run(make_settings(tmp_path, wikitext_spm, empty))
    assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []

    with pytest.raises(DataPrepError, match="matches no file"):
        run(make_settings(tmp_path, wikitext_spm, tmp_path / "missing*.txt"))

    # One-sentence documents, a sentence longer than the sequence, invalid UTF-8.
    odd = tmp_path / "odd.txt"
    long_sentence = " ".join(["word"] * 400) + "."
    odd.write_bytes(("Only one sentence here.\n\n" + long_sentence + "\n\nCaf").encode() + b"\xe9 cr\xe8me.\nSecond.\n")
    metadata = run(make_settings(tmp_path, wikitext_spm, odd, num_shards=1))
    assert metadata["counts"]["replaced_utf8"] == {str(odd): 2}
    _, data = read_dataset(tmp_path / "out")
    assert data["input_mask"].sum(1).max() == SEQ
    first = metadata["shards"]
    before = {p: (tmp_path / "out" / p).read_bytes() for p in first}

    # An output dir that holds a dataset is refused, and a failed overwrite keeps it intact.
    with pytest.raises(DataPrepError, match="already holds a dataset.*--overwrite"):
        run(make_settings(tmp_path, wikitext_spm, odd, num_shards=1))
    with pytest.raises(DataPrepError, match="no training instances"):
        run(make_settings(tmp_path, wikitext_spm, empty, num_shards=1, overwrite=True))
    assert {p: (tmp_path / "out" / p).read_bytes() for p in first} == before
    assert json.loads((tmp_path / "out" / "metadata.json").read_text())["shards"] == first
    assert not [p for p in os.listdir(tmp_path / "out") if p.startswith(STAGING_PREFIX)]

    # An spm model without ALBERT's symbols is refused before anything runs.
    import sentencepiece as spm

    plain = str(tmp_path / "plain")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["a plain model %d" % i for i in range(100)]),
        model_prefix=plain,
        vocab_size=30,
        minloglevel=2,
    )
    with pytest.raises(TokenizerError, match=r"plain\.model.*\[CLS\]"):
        SentencePieceTokenizer(plain + ".model")
    refused = run_command(
        "data_prep.create_pretraining_data",
        [f"--input_file={odd}", f"--output_dir={tmp_path / 'other'}", f"--spm_model_file={plain}.model"],
    )
    assert refused.returncode != 0 and "plain.model: not an ALBERT SentencePiece model" in refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "other").exists()


def test_cli_reports_errors_without_traceback(tmp_path, wikitext_spm, monkeypatch):
    monkeypatch.chdir(REPO)
    result = run_command(
        "data_prep.create_pretraining_data",
        [f"--input_file={tmp_path}/none*.txt", f"--output_dir={tmp_path}/out", f"--spm_model_file={wikitext_spm}"],
    )
    assert result.returncode != 0
    assert "none*.txt" in result.stderr and "matches no file" in result.stderr
    assert "Traceback" not in result.stderr


def small_corpus(tmp_path, lines):
    path = tmp_path / "corpus.txt"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_a_corpus_that_masks_nothing_is_refused(tmp_path, wikitext_spm):
    from data_prep.pipeline import DataPrepError, run

    corpus = small_corpus(tmp_path, ["The cat sat on the mat. It was happy there.", "Dogs bark at night.", ""] * 20)
    settings = make_settings(tmp_path, wikitext_spm, corpus, input_format="bert", masked_lm_prob=0.0)
    with pytest.raises(DataPrepError, match=r"^no token of the [\d,]+ instances was masked \(--masked_lm_prob 0.0\)"):
        run(settings)
    assert not (tmp_path / "out" / "metadata.json").exists()


def test_documents_of_one_sentence_are_said_in_the_data_lines():
    from albert_tf.pretraining.health import DataFacts, data_lines
    from data_prep.pipeline import sentences_per_document_note

    counts = {"instances": 100, "sop_label_1": 50, "documents": 100, "sentences": 104}
    note = sentences_per_document_note(counts, "sop")
    assert note.startswith("; warning: documents average 1.04 sentences, so SOP pairs rarely come from two")
    assert sentences_per_document_note({**counts, "sentences": 400}, "sop") == ""
    assert sentences_per_document_note({"instances": 1}, "sop") == ""  # data made before the counts
    facts = DataFacts.from_metadata("d", {"task": "sop", "counts": counts})
    assert data_lines(facts, "sop")[-1].startswith("health: warning: the data's documents average 1.04 sentences")


def test_sigterm_inside_a_beam_stage_unwinds_as_terminated(tmp_path, wikitext_spm, monkeypatch):
    from albert_tf import preemption
    from data_prep import pipeline

    def terminated_in_a_stage(*args, **kwargs):
        try:
            raise preemption.Terminated()
        except preemption.Terminated as signal_in_worker:
            raise RuntimeError("Beam re-raises what a stage raised") from signal_in_worker

    monkeypatch.setattr(pipeline, "build_pipeline", terminated_in_a_stage)
    corpus = small_corpus(tmp_path, ["The cat sat on the mat. It was happy there."])
    with pytest.raises(preemption.Terminated):
        pipeline.run(make_settings(tmp_path, wikitext_spm, corpus))
    assert not (tmp_path / "out").exists()  # no staging, no lock: the run created the directory
