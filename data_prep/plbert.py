"""The Beam pipeline that writes PL-BERT phoneme rows (`run`): `create_pretraining_data --objective plbert`.

PL-BERT (Li et al., 2023) is an ALBERT pretrained on phonemes: the text encoder of StyleTTS 2 and
Kokoro. Its rows (`albert_tf.shard_set.plbert_feature_spec`) hold StyleTTS 2's phoneme ids
(`albert_tf.tokenization.plbert_symbols`), each word's followed by the separator " ", and for every
position the word-vocabulary id of its word (the word-prediction target) and which word of the row it
is (whole-word masking, done at train time, picks words by it).

Pipeline: files → documents (`documents.py`) → words → phonemes (`phonemes.py`, espeak-ng, cached per
worker; or `--phonemized` input) → symbol ids (unknown symbols dropped and counted, words left empty
dropped and counted) → the word vocabulary (the most frequent `word_vocab_size` - 3 words after
`[PAD]`, `[UNK]` and `[SEP]`, ties by code points; `word_vocab.txt`) → each document cut into
consecutive windows of at most `max_seq_length` positions at word boundaries (PL-BERT takes one
random window of a long document each epoch; here every window is written, deterministically) →
windows keyed by a hash → `num_shards` shards sorted by it, packed into rows with
`max_instances_per_row` > 1 (`packing.pack_rows`) → shards + `word_vocab.txt` + `metadata.json`.

Words are lowercased for the vocabulary, as PL-BERT's word targets are; with `--phonemized` the
words are the phoneme strings themselves (there is no text). Same inputs and flags give byte-identical
shards whatever the runner or its workers. Staging and publishing are `data_prep.pipeline`'s.
"""

import array
import collections
import dataclasses
import functools
import hashlib
import struct
from typing import Dict, List, Optional

from albert_tf.options import option
from albert_tf.shard_set import (
    WORD_VOCAB_FILE,
    HashingWriter,
    plbert_metadata_record,
    shard_name,
)
from albert_tf.tokenization.plbert_symbols import NUM_SYMBOLS, SEPARATOR_ID, symbol_ids
from data_prep import documents as documents_lib
from data_prep import phonemes as phonemes_lib
from data_prep.beam import FileSystems
from data_prep.beam import apache_beam as beam
from data_prep.errors import DataPrepError
from data_prep.packing import pack_rows
from data_prep.pipeline import (
    DASK_RUNNER,
    MAIN,
    STATS,
    CorpusSettings,
    ReadDocuments,
    check_runner_supports,
    input_paths_of,
    merge_counts,
    pipeline_options,
    publish,
    read_json_file,
    run_beam,
    run_locked,
    select,
    staging,
    text_hash,
    wait_for_dask,
    write_json_file,
)
from data_prep.tfrecord import encode_example, write_record

# The word vocabulary's first ids: padding, a word outside the vocabulary, the separator after each word
# (PL-BERT gives the separator a word id of its own, its `word_separator` token).
RESERVED_WORDS = ("[PAD]", "[UNK]", "[SEP]")
PAD_WORD, UNK_WORD, SEP_WORD = range(len(RESERVED_WORDS))
NOT_RECORDED = ("dask_wait_seconds",)


@dataclasses.dataclass(frozen=True)
class PlbertSettings(CorpusSettings):
    """Every flag that shapes PL-BERT data (recorded in metadata.json)."""

    language: str = option(
        "en-us", "PL-BERT data: the espeak-ng language the text is phonemized in (en-us, en-gb, fr-fr, de, ...)."
    )
    word_vocab_size: int = option(
        30000,
        "PL-BERT data: words of the word vocabulary learnt from the corpus ([PAD], [UNK], [SEP] and the "
        "most frequent words, lowercased), written as word_vocab.txt beside the shards.",
    )
    phonemized: bool = option(
        False,
        "PL-BERT data: the input is already phonemes, each whitespace-separated token one word's phonemes "
        "(for languages espeak-ng lacks). There is no word text then: the word vocabulary is learnt from "
        "the phoneme strings themselves.",
    )

    def record(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in NOT_RECORDED}

    def validate(self):
        checks = [
            (
                self.word_vocab_size >= len(RESERVED_WORDS),
                f"--word_vocab_size {self.word_vocab_size}: must be at least {len(RESERVED_WORDS)} "
                f"({', '.join(RESERVED_WORDS)} come first)",
            ),
            (self.max_seq_length >= 2, f"--max_seq_length {self.max_seq_length}: must be at least 2"),
            (self.num_shards >= 1, "num_shards must be at least 1"),
            (self.random_seed >= 0, f"--random_seed {self.random_seed}: must be 0 or more"),
            (self.dask_wait_seconds > 0, "dask_wait_seconds must be above 0"),
            (
                1 <= self.max_instances_per_row <= self.max_seq_length // 2,
                f"max_instances_per_row {self.max_instances_per_row}: must be between 1 and "
                f"{self.max_seq_length // 2} (a window is at least one phoneme and its separator)",
            ),
            (self.input_format in documents_lib.FORMATS, f"input_format must be one of {documents_lib.FORMATS}"),
        ]
        for ok, message in checks:
            if not ok:
                raise DataPrepError(message)


class _Phonemize(beam.DoFn):
    """A document → (its key, [(vocabulary word, phoneme ids), ...]); words left empty are dropped."""

    def __init__(self, settings: PlbertSettings):
        self.settings = settings

    def setup(self):
        s = self.settings
        self.phonemizer = None if s.phonemized else phonemes_lib.WordPhonemizer(s.language)

    def process(self, keyed):
        key, sentences = keyed
        text = " ".join(documents_lib.vocabulary_text(x, self.settings.input_format) for x in sentences)
        if self.phonemizer is None:
            tokens = text.split()
            words, spoken = tokens, tokens
        else:
            tokens = phonemes_lib.words(text)
            words, spoken = [t.lower() for t in tokens], self.phonemizer.phonemes(tokens)
        entries, unknown, empty = [], collections.Counter(), 0
        for word, phonemes in zip(words, spoken):
            ids, dropped = symbol_ids(phonemes)
            unknown.update(dropped)
            if ids:
                entries.append((word, ids))
            else:
                empty += 1
        if entries:
            yield MAIN, (key, entries)
        yield (
            STATS,
            {
                "documents": int(bool(entries)),
                "words": len(entries),
                "phonemes": sum(len(ids) for _, ids in entries),
                "empty_words": empty,
                "unknown_symbols": sum(unknown.values()),
                "unknown_symbol_counts": dict(unknown),
            },
        )


@functools.total_ordering
class _Descending:
    """A string that sorts backwards: `Top.Of` keeps the largest keys, and ties go to the smaller word."""

    def __init__(self, text: str):
        self.text = text

    def __eq__(self, other):
        return self.text == other.text

    def __lt__(self, other):
        return self.text > other.text


def _frequency_key(word_count):
    word, count = word_count
    return count, _Descending(word)


def _vocabulary_lines(top: List[tuple]) -> List[str]:
    return list(RESERVED_WORDS) + [word for word, _ in top if word not in RESERVED_WORDS]


def _write_vocabulary(words: List[str], path: str) -> None:
    with FileSystems.create(path) as stream:
        stream.write("".join(f"{word}\n" for word in words).encode("utf-8"))


def pack_window(input_ids: List[int], word_ids: List[int], positions: List[int]) -> bytes:
    """A window in a compact form for the shuffle: its length, phoneme ids as bytes, word ids and positions."""
    return b"".join(
        [
            struct.pack("<I", len(input_ids)),
            bytes(input_ids),
            array.array("I", word_ids).tobytes(),
            array.array("I", positions).tobytes(),
        ]
    )


def window_length(packed: bytes) -> int:
    return struct.unpack_from("<I", packed)[0]


def unpack_window(packed: bytes):
    length = window_length(packed)
    ids = list(packed[4 : 4 + length])
    numbers = array.array("I")
    numbers.frombytes(packed[4 + length :])
    return ids, numbers[:length].tolist(), numbers[length:].tolist()


def windows(entries: List[tuple], max_seq_length: int):
    """Consecutive windows of `(word id, phoneme ids)` entries, each at most `max_seq_length` positions
    (a word's phonemes and its separator), cut at word boundaries; a word too long for a window alone
    is cut to fit. Yields (input_ids, word_ids, word_positions) with positions counted from 1 in the window.

    >>> [w[0] for w in windows([(5, [1, 2]), (6, [3]), (7, [4, 4, 4, 4])], 5)]
    [[1, 2, 16, 3, 16], [4, 4, 4, 4, 16]]
    >>> list(windows([(5, [1] * 9)], 4))  # a word longer than a window: cut
    [([1, 1, 1, 16], [5, 5, 5, 2], [1, 1, 1, 0])]
    """
    ids: List[int] = []
    word_ids: List[int] = []
    positions: List[int] = []
    for word_id, phonemes in entries:
        phonemes = phonemes[: max_seq_length - 1]
        if ids and len(ids) + len(phonemes) + 1 > max_seq_length:
            yield ids, word_ids, positions
            ids, word_ids, positions = [], [], []
        number = (max(positions) if positions else 0) + 1
        ids += phonemes + [SEPARATOR_ID]
        word_ids += [word_id] * len(phonemes) + [SEP_WORD]
        positions += [number] * len(phonemes) + [0]
    if ids:
        yield ids, word_ids, positions


class _MakeWindows(beam.DoFn):
    """A phonemized document → (shard, (sort key, packed window)) for each of its windows."""

    def __init__(self, settings: PlbertSettings):
        self.settings = settings
        self.vocabulary: Optional[List[str]] = None
        self.word_ids: Dict[str, int] = {}

    def process(self, keyed, vocabulary):
        s = self.settings
        if vocabulary is not self.vocabulary:  # the side input, turned into a dict once per worker
            reserved = len(RESERVED_WORDS)  # a corpus word spelt "[PAD]" is no reserved id: [UNK]
            self.vocabulary = vocabulary
            self.word_ids = {word: i for i, word in enumerate(vocabulary[reserved:], start=reserved)}
        key, entries = keyed
        entries = [(self.word_ids.get(word, UNK_WORD), ids) for word, ids in entries]
        cut = sum(1 for _, ids in entries if len(ids) > s.max_seq_length - 1)
        count = 0
        for count, window in enumerate(windows(entries, s.max_seq_length), start=1):
            sort_key = text_hash(f"{s.random_seed}/{key}/{count}")
            yield MAIN, (sort_key % s.num_shards, (sort_key, pack_window(*window)))
        unknown_words = sum(1 for word_id, _ in entries if word_id == UNK_WORD)
        yield STATS, {"instances": count, "cut_words": cut, "unknown_words": unknown_words}


def serialize_row(windows_of_row: List[tuple], max_seq_length: int) -> bytes:
    """Windows as one Example: concatenated, `input_mask` numbering each window from 1, word positions
    continuing across windows (each word of the row its own number), zero-padded to `max_seq_length`."""
    ids, mask, word_ids, positions = [], [], [], []
    for number, (window_ids, window_words, window_positions) in enumerate(windows_of_row, start=1):
        offset = max(positions) if positions else 0
        ids += window_ids
        mask += [number] * len(window_ids)
        word_ids += window_words
        positions += [p + offset if p else 0 for p in window_positions]
    pad = [0] * (max_seq_length - len(ids))
    return encode_example(
        [
            ("input_ids", "int64", ids + pad),
            ("input_mask", "int64", mask + pad),
            ("word_ids", "int64", word_ids + pad),
            ("word_positions", "int64", positions + pad),
        ]
    )


class _WriteShard(beam.DoFn):
    def __init__(self, directory: str, settings: PlbertSettings):
        self.directory = directory
        self.settings = settings

    def process(self, shard_records):
        from apache_beam.io.filesystems import FileSystems  # in the worker: DoFns travel pickled

        s = self.settings
        shard, records = shard_records
        records = sorted(records)
        lengths = [window_length(packed) for _, packed in records]
        rows = pack_rows(lengths, s.max_seq_length, s.max_instances_per_row)
        name = shard_name(shard, s.num_shards)
        with FileSystems.create(FileSystems.join(self.directory, name)) as stream:
            hashed = HashingWriter(stream)
            for members in rows:
                row = [unpack_window(records[i][1]) for i in members]
                write_record(hashed, serialize_row(row, s.max_seq_length))
        yield {
            "shards": {name: len(rows)},
            "shard_files": {name: hashed.manifest_entry()},
            "positions": sum(lengths),
        }


def build_pipeline(pipeline: beam.Pipeline, settings: PlbertSettings, input_paths: List[str], temp_dir: str) -> None:
    """Adds the whole job to `pipeline`; shards, `word_vocab.txt` and `_counts.json` land in `temp_dir`."""
    read = (
        pipeline
        | "InputFiles" >> beam.Create(input_paths)
        | "ReadDocuments" >> beam.ParDo(ReadDocuments(settings.input_format))
    )
    phonemized = select(read, MAIN, "Documents") | "Phonemize" >> beam.ParDo(_Phonemize(settings))
    documents = select(phonemized, MAIN, "PhonemizedDocuments")
    words = settings.word_vocab_size - len(RESERVED_WORDS)
    vocabulary = (
        documents
        | "Words" >> beam.FlatMap(lambda keyed: [word for word, _ in keyed[1]])
        | "CountWords" >> beam.combiners.Count.PerElement()
        # Reserved names are counted out here: a corpus word "[UNK]" must not take a second id.
        | "TopWords" >> beam.combiners.Top.Of(words + len(RESERVED_WORDS), key=_frequency_key)
        | "VocabularyLines" >> beam.Map(lambda top: _vocabulary_lines(top)[: settings.word_vocab_size])
    )
    _ = vocabulary | "WriteVocabulary" >> beam.Map(_write_vocabulary, FileSystems.join(temp_dir, WORD_VOCAB_FILE))
    made = documents | "MakeWindows" >> beam.ParDo(_MakeWindows(settings), beam.pvalue.AsSingleton(vocabulary))
    written = (
        select(made, MAIN, "Windows")
        | "GroupShards" >> beam.GroupByKey()
        | "WriteShards" >> beam.ParDo(_WriteShard(temp_dir, settings))
    )
    _ = (
        (
            select(read, STATS, "ReadStats"),
            select(phonemized, STATS, "PhonemeStats"),
            select(made, STATS, "WindowStats"),
            written,
        )
        | "AllCounts" >> beam.Flatten()
        | "MergeCounts" >> beam.CombineGlobally(merge_counts)
        | "WriteCounts" >> beam.Map(write_json_file, FileSystems.join(temp_dir, "_counts.json"))
    )


def run(settings: PlbertSettings, pipeline_args: Optional[List[str]] = None) -> dict:
    """Runs the job and returns the metadata it wrote.

    Raises:
        DataPrepError: bad flags, an espeak-ng language that does not exist, inputs matching nothing,
            an output dir that already holds a dataset (without `overwrite`), or inputs that give no
            phoneme. Nothing in `output_dir` is touched in any of these cases.
    """
    settings.validate()
    options = pipeline_options(pipeline_args or [])
    check_runner_supports(options)
    if f"--runner={DASK_RUNNER}" in options:
        raise DataPrepError(
            "--runner DaskRunner cannot make PL-BERT data yet: its word vocabulary is a side input, and Beam's "
            "DaskRunner computes side inputs wrong (see --random_next_sentence); use the DirectRunner "
            "(--direct_num_workers N), Flink, Spark or Dataflow"
        )
    if not settings.phonemized:
        phonemes_lib.check_language(settings.language)
    input_paths = input_paths_of(settings.input_file)
    wait_for_dask(pipeline_options(pipeline_args or []), settings.dask_wait_seconds)
    return run_locked(settings.output_dir, lambda: _write_dataset(settings, pipeline_args, input_paths))


def _write_dataset(settings: PlbertSettings, pipeline_args, input_paths: List[str]) -> dict:
    with staging(settings.output_dir, settings.overwrite) as (temp_dir, existing):
        run_beam(
            pipeline_args,
            lambda pipeline: build_pipeline(pipeline, settings, input_paths, temp_dir),
            settings.output_dir,
        )
        counts = read_json_file(FileSystems.join(temp_dir, "_counts.json"))
        if not counts.get("instances"):
            raise DataPrepError(
                f"no PL-BERT rows: the inputs ({settings.input_file}) hold no word whose phonemes are "
                "symbols of the table"
            )
        shards = counts.pop("shards")
        shard_files = counts.pop("shard_files")
        for shard in range(settings.num_shards):  # a shard that drew no window is still written
            name = shard_name(shard, settings.num_shards)
            if name not in shards:
                FileSystems.create(FileSystems.join(temp_dir, name)).close()
                shards[name] = 0
                shard_files[name] = HashingWriter(None).manifest_entry()
        rows = sum(shards.values())
        counts["packing"] = {"rows": rows, "fill": round(counts.pop("positions") / (rows * settings.max_seq_length), 4)}
        counts["unknown_symbol_counts"] = dict(sorted(counts.get("unknown_symbol_counts", {}).items()))
        with FileSystems.open(FileSystems.join(temp_dir, WORD_VOCAB_FILE)) as stream:
            vocabulary = stream.read()
        metadata = plbert_metadata_record(
            num_instances=counts["instances"],
            shards=shards,
            shard_files=shard_files,
            max_seq_length=settings.max_seq_length,
            max_instances_per_row=settings.max_instances_per_row,
            word_vocab_size=len(vocabulary.decode("utf-8").splitlines()),
            word_vocab_sha256=hashlib.sha256(vocabulary).hexdigest(),
            symbols=NUM_SYMBOLS,
            language=settings.language,
            settings=settings.record(),
            input_files=input_paths,
            counts=counts,
        )
        publish(settings.output_dir, temp_dir, existing, metadata, {WORD_VOCAB_FILE: vocabulary})
        return metadata


def symbols_note(counts: dict, most: int = 5) -> str:
    """One line: unknown symbols dropped (the most frequent named) and words left empty.

    >>> symbols_note({"phonemes": 90, "unknown_symbols": 10, "unknown_symbol_counts": {"-": 7, "(": 3},
    ...               "empty_words": 4, "words": 50})
    "10 unknown symbols dropped (10.0% of 100; most frequent: '-' 7, '(' 3); 4 words left empty dropped (7.4%)"
    """
    unknown, empty = counts.get("unknown_symbols", 0), counts.get("empty_words", 0)
    seen = counts.get("phonemes", 0) + unknown
    frequent = sorted(counts.get("unknown_symbol_counts", {}).items(), key=lambda kv: (-kv[1], kv[0]))[:most]
    named = ", ".join(f"{symbol!r} {n:,}" for symbol, n in frequent)
    return (
        f"{unknown:,} unknown symbols dropped ({unknown / max(1, seen):.1%} of {seen:,}"
        + (f"; most frequent: {named}" if named else "")
        + f"); {empty:,} words left empty dropped ({empty / max(1, empty + counts.get('words', 0)):.1%})"
    )
