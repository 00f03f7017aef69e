"""Writes SOP + n-gram-masked pretraining TFRecords with an Apache Beam pipeline.

    python -m data_prep.create_pretraining_data --input_file 'corpus/*.txt' \
        --output_dir data/pretrain --spm_model_file vocab/30k-clean.model \
        --max_seq_length 512 --dupe_factor 40 [--direct_num_workers 2] [--runner ...]
    # WordPiece vocabularies (Chinese models, an existing BERT vocab): --vocab_file vocab.txt instead

Whole-word masking follows the vocabulary: SentencePiece words start at `▁`
pieces (the original's `_is_start_piece_sp`), WordPiece words continue with
`##` pieces (BERT's rule); `metadata.json` records `vocab_type`.

Pipeline: files → documents (`documents.py`) → buckets → tokenize once, then
`dupe_factor` passes of pairs (`instances.py`) and masks (`masking.py`) →
serialized Examples keyed by a hash → `num_shards` shards, each sorted by that
hash (a deterministic shuffle) → `part-SSSSS-of-NNNNN.tfrecord` + `metadata.json`.

Determinism: every random choice for a document comes from
`random.Random("<seed>/<document hash>/<dupe>")` and shards are sorted, so the
same inputs, seed and flags give byte-identical shards whatever the runner or
the number of workers. Memory: no global list; a bucket holds one document
(SOP) or `--negative_pool_documents` documents (when B may come from another
document), and the shuffle into shards is the runner's (disk-backed on
Dataflow/Flink/Spark; in memory on the DirectRunner, ~1.2 KB per instance at
length 128).

Nothing half-written ever looks complete: shards are written under
`<output_dir>/.tmp-<id>/`, moved into place when all succeeded, and
`metadata.json` is written last.
"""

import dataclasses
import array
import hashlib
import json
import logging
import math
import os
import random
import struct
import sys
import uuid
from typing import Dict, List, Optional, Sequence

import apache_beam as beam

from albert_tf.tokenization import TokenizerError, load_tokenizer, read_bytes, tokenizer_from_bytes
from data_prep import documents as documents_lib
from data_prep.instances import ONE_SENTENCE_CHUNK_MODES, Instance, InstanceBuilder, InstanceOptions
from data_prep.masking import MaskingOptions, NgramMasker
from data_prep.tfrecord import encode_example, write_record

METADATA_FILE = "metadata.json"
FORMAT_VERSION = 1
_SHARD_PREFIX = "part-"


class DataPrepError(ValueError):
    """Bad input or output for the pipeline; the message says what and where."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """Every flag that shapes the output (recorded in metadata.json)."""

    input_file: str
    output_dir: str
    spm_model_file: Optional[str] = None
    vocab_file: Optional[str] = None  # a WordPiece vocab.txt instead of the spm model
    input_format: str = "bert"
    do_lower_case: bool = True
    max_seq_length: int = 512
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    ngram: int = 3
    favor_shorter_ngram: bool = True
    do_whole_word_mask: bool = True
    random_next_sentence: bool = False
    one_sentence_chunks: str = "split"
    short_target_per_document: bool = False
    short_seq_prob: float = 0.1
    dupe_factor: int = 40
    random_seed: int = 12345
    num_shards: int = 10
    negative_pool_documents: int = 256
    overwrite: bool = False

    def instance_options(self) -> InstanceOptions:
        return InstanceOptions(self.max_seq_length, self.short_seq_prob, self.random_next_sentence,
                               self.one_sentence_chunks, self.short_target_per_document)

    def masking_options(self) -> MaskingOptions:
        return MaskingOptions(self.masked_lm_prob, self.max_predictions_per_seq, self.ngram,
                              self.favor_shorter_ngram, self.do_whole_word_mask)

    def validate(self):
        checks = [
            (self.max_seq_length >= 5, "max_seq_length must be at least 5"),
            (self.max_predictions_per_seq >= 1, "max_predictions_per_seq must be at least 1"),
            (0.0 <= self.masked_lm_prob <= 1.0, "masked_lm_prob must be in [0, 1]"),
            (0.0 <= self.short_seq_prob <= 1.0, "short_seq_prob must be in [0, 1]"),
            (self.ngram >= 1, "ngram must be at least 1"),
            (self.dupe_factor >= 1, "dupe_factor must be at least 1"),
            (self.num_shards >= 1, "num_shards must be at least 1"),
            (self.negative_pool_documents >= 2, "negative_pool_documents must be at least 2"),
            (self.input_format in documents_lib.FORMATS, f"input_format must be one of {documents_lib.FORMATS}"),
            (self.one_sentence_chunks in ONE_SENTENCE_CHUNK_MODES,
             f"one_sentence_chunks must be one of {ONE_SENTENCE_CHUNK_MODES}"),
        ]
        for ok, message in checks:
            if not ok:
                raise DataPrepError(message)


def feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> Dict[str, dict]:
    """The original feature names, dtypes and lengths (spec §4)."""
    seq = {"dtype": "int64", "length": max_seq_length}
    pred = {"dtype": "int64", "length": max_predictions_per_seq}
    return {
        "input_ids": seq, "input_mask": seq, "segment_ids": seq, "token_boundary": seq,
        "masked_lm_positions": pred, "masked_lm_ids": pred,
        "masked_lm_weights": {"dtype": "float", "length": max_predictions_per_seq},
        "next_sentence_labels": {"dtype": "int64", "length": 1},
    }


def serialize_instance(instance: Instance, max_seq_length: int, max_predictions_per_seq: int) -> bytes:
    """One instance as a tf.train.Example, zero-padded like the original."""
    length = len(instance.input_ids)
    seq_pad = [0] * (max_seq_length - length)
    n = len(instance.masked_lm_positions)
    pred_pad = [0] * (max_predictions_per_seq - n)
    return encode_example([
        ("input_ids", "int64", instance.input_ids + seq_pad),
        ("input_mask", "int64", [1] * length + seq_pad),
        ("segment_ids", "int64", instance.segment_ids + seq_pad),
        ("token_boundary", "int64", instance.token_boundary + seq_pad),
        ("masked_lm_positions", "int64", instance.masked_lm_positions + pred_pad),
        ("masked_lm_ids", "int64", instance.masked_lm_ids + pred_pad),
        ("masked_lm_weights", "float", [1.0] * n + [0.0] * (max_predictions_per_seq - n)),
        ("next_sentence_labels", "int64", [1 if instance.is_random_next else 0]),
    ])


def pack_instance(instance: Instance) -> bytes:
    """A compact form for the shuffle (~3x smaller than the Example): ids as uint16 when they fit."""
    ids = instance.input_ids + instance.masked_lm_ids
    typecode = "H" if max(ids) < 65536 else "I"
    sep = instance.segment_ids.index(1) - 1
    header = struct.pack("<cHHBB", typecode.encode(), len(instance.input_ids), sep,
                         int(instance.is_random_next), len(instance.masked_lm_positions))
    return b"".join([header, array.array(typecode, ids).tobytes(),
                     array.array("H", instance.masked_lm_positions).tobytes(),
                     bytes(instance.token_boundary)])


def unpack_instance(packed: bytes) -> Instance:
    typecode, length, sep, is_random_next, n = struct.unpack_from("<cHHBB", packed)
    typecode = typecode.decode()
    offset = struct.calcsize("<cHHBB")
    ids = array.array(typecode)
    ids.frombytes(packed[offset:offset + ids.itemsize * (length + n)])
    offset += ids.itemsize * (length + n)
    positions = array.array("H")
    positions.frombytes(packed[offset:offset + 2 * n])
    boundary = list(packed[offset + 2 * n:])
    ids = ids.tolist()
    return Instance(ids[:length], [0] * (sep + 1) + [1] * (length - sep - 1), boundary,
                    positions.tolist(), ids[length:], bool(is_random_next), False, [], [])


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


def merge_counts(counts: Sequence[dict]) -> dict:
    """Sums nested count dicts (numbers add, dicts merge recursively)."""
    total: dict = {}
    for count in counts:
        for key, value in count.items():
            if isinstance(value, dict):
                total[key] = merge_counts([total.get(key, {}), value])
            else:
                total[key] = total.get(key, 0) + value
    return total


class _ReadDocuments(beam.DoFn):
    def __init__(self, input_format: str):
        self.input_format = input_format

    def process(self, path):
        stats = documents_lib.ReadStats(path)
        for sentences in documents_lib.read_documents(path, self.input_format, stats):
            yield _hash("\n".join(sentences)), sentences
        if stats.replaced_bytes:
            logging.warning("%s: %d invalid UTF-8 sequences replaced with U+FFFD", path, stats.replaced_bytes)
        if stats.cut_sentences:
            logging.warning("%s: %d sentences over %d characters cut (%d characters dropped)", path,
                            stats.cut_sentences, documents_lib.MAX_SENTENCE_CHARS, stats.cut_chars)
        if not stats.documents:
            logging.warning("%s: no text in this file", path)
        yield beam.pvalue.TaggedOutput("stats", {
            "files": 1, "empty_files": int(not stats.documents),
            "replaced_utf8": {path: stats.replaced_bytes} if stats.replaced_bytes else {},
            "cut_sentences": {path: stats.cut_sentences} if stats.cut_sentences else {},
            "cut_chars": {path: stats.cut_chars} if stats.cut_chars else {},
            "raw_documents": stats.documents, "raw_sentences": stats.sentences})


class _MakeInstances(beam.DoFn):
    """A bucket of documents → (shard, (sort key, serialized Example))."""

    def __init__(self, settings: Settings, vocab_type: str, vocab_bytes: bytes):
        self.settings = settings
        self.vocab_type = vocab_type
        self.vocab_bytes = vocab_bytes

    def setup(self):
        s = self.settings
        self.tokenizer = tokenizer_from_bytes(self.vocab_type, self.vocab_bytes, do_lower_case=s.do_lower_case)
        masker = NgramMasker(self.tokenizer.pieces(), s.masking_options(), vocab_type=self.vocab_type)
        self.builder = InstanceBuilder(masker, s.instance_options())

    def process(self, bucket):
        s = self.settings
        _, keyed_documents = bucket
        keyed_documents = sorted(keyed_documents)  # the runner's order is not ours to rely on
        keys, pool = [], []
        stats = {"documents": 0, "sentences": 0, "tokens": 0}
        for key, sentences in keyed_documents:
            tokenized = [ids for ids in (self.tokenizer.encode(x) for x in sentences) if ids]
            if tokenized:
                keys.append(key)
                pool.append(tokenized)
                stats["documents"] += 1
                stats["sentences"] += len(tokenized)
                stats["tokens"] += sum(len(x) for x in tokenized)
        counts = {"instances": 0, "sop_label_1": 0, "short_target": 0, "masked_tokens": 0,
                  "non_special_tokens": 0, "ngram_drawn": {}, "span_words": {}}
        for index, key in enumerate(keys):
            for dupe in range(s.dupe_factor):
                rng = random.Random(f"{s.random_seed}/{key}/{dupe}")
                for number, instance in enumerate(self.builder.build(pool[index], pool, index, rng)):
                    _count_instance(counts, instance)
                    sort_key = _hash(f"{s.random_seed}/{key}/{dupe}/{number}")
                    yield sort_key % s.num_shards, (sort_key, pack_instance(instance))
        yield beam.pvalue.TaggedOutput("stats", merge_counts([stats, counts]))


def _count_instance(counts: dict, instance: Instance):
    counts["instances"] += 1
    counts["sop_label_1"] += int(instance.is_random_next)
    counts["short_target"] += int(instance.short_target)
    counts["masked_tokens"] += len(instance.masked_lm_positions)
    counts["non_special_tokens"] += len(instance.input_ids) - 3
    for n in instance.drawn_ngrams:
        counts["ngram_drawn"][str(n)] = counts["ngram_drawn"].get(str(n), 0) + 1
    for n in instance.span_words:
        counts["span_words"][str(n)] = counts["span_words"].get(str(n), 0) + 1


def shard_name(shard: int, num_shards: int) -> str:
    return f"{_SHARD_PREFIX}{shard:05d}-of-{num_shards:05d}.tfrecord"


class _WriteShard(beam.DoFn):
    def __init__(self, directory: str, settings: Settings):
        self.directory = directory
        self.settings = settings

    def process(self, shard_records):
        from apache_beam.io.filesystems import FileSystems

        s = self.settings
        shard, records = shard_records
        records = sorted(records)
        path = FileSystems.join(self.directory, shard_name(shard, s.num_shards))
        with FileSystems.create(path) as stream:
            for _, packed in records:
                write_record(stream, serialize_instance(unpack_instance(packed), s.max_seq_length,
                                                        s.max_predictions_per_seq))
        yield {"shards": {shard_name(shard, s.num_shards): len(records)}}


def _bucket_key(document_hash: int, num_documents: int, pool_documents: int) -> int:
    num_buckets = max(1, math.ceil(num_documents / pool_documents))
    return document_hash % num_buckets


def build_pipeline(pipeline: beam.Pipeline, settings: Settings, input_paths: List[str],
                   tokenizer, temp_dir: str) -> None:
    """Adds the whole job to `pipeline`; shards and `_counts.json` land in `temp_dir`."""
    read = (pipeline
            | "InputFiles" >> beam.Create(input_paths)
            | "ReadDocuments" >> beam.ParDo(_ReadDocuments(settings.input_format)).with_outputs(
                "stats", main="documents"))
    documents = read.documents
    if settings.instance_options().needs_other_documents:
        num_documents = beam.pvalue.AsSingleton(documents | "CountDocuments" >> beam.combiners.Count.Globally())
        keyed = documents | "ToPools" >> beam.Map(
            lambda kv, n: (_bucket_key(kv[0], n, settings.negative_pool_documents), kv), num_documents)
    else:
        keyed = documents | "OnePerBucket" >> beam.Map(lambda kv: (kv[0], kv))
    made = (keyed
            | "GroupBuckets" >> beam.GroupByKey()
            | "MakeInstances" >> beam.ParDo(_MakeInstances(settings, tokenizer.kind, tokenizer.model_proto)).with_outputs(
                "stats", main="records"))
    written = (made.records
               | "GroupShards" >> beam.GroupByKey()
               | "WriteShards" >> beam.ParDo(_WriteShard(temp_dir, settings)))
    from apache_beam.io.filesystems import FileSystems

    counts_path = FileSystems.join(temp_dir, "_counts.json")
    _ = ((read.stats, made.stats, written)
         | "AllCounts" >> beam.Flatten()
         | "MergeCounts" >> beam.CombineGlobally(merge_counts)
         | "WriteCounts" >> beam.Map(_write_json, counts_path))


def _write_json(value, path):
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.create(path) as stream:
        stream.write(json.dumps(value, indent=2, sort_keys=True).encode("utf-8"))


def _read_json(path):
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.open(path) as stream:
        return json.loads(stream.read().decode("utf-8"))


def _existing_outputs(output_dir: str) -> List[str]:
    from apache_beam.io.filesystems import FileSystems

    pattern = FileSystems.join(output_dir, "*")
    found = FileSystems.match([pattern])[0].metadata_list
    return sorted(m.path for m in found if os.path.basename(m.path).startswith(_SHARD_PREFIX)
                  or os.path.basename(m.path) == METADATA_FILE)


def run(settings: Settings, pipeline_args: Optional[List[str]] = None) -> dict:
    """Runs the job and returns the metadata it wrote.

    Raises:
        DataPrepError: bad flags, inputs matching nothing, an spm model without
            ALBERT's symbols, an output dir that already holds a dataset
            (without `overwrite`), or inputs that give no instances. Nothing in
            `output_dir` is touched in any of these cases.
    """
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions

    settings.validate()
    try:
        input_paths = documents_lib.expand_input_patterns(settings.input_file)
        tokenizer = load_tokenizer(settings.spm_model_file, settings.vocab_file, settings.do_lower_case)
    except (OSError, ValueError, TokenizerError) as error:
        raise DataPrepError(str(error)) from None
    existing = _existing_outputs(settings.output_dir) if FileSystems.exists(settings.output_dir) else []
    if existing and not settings.overwrite:
        raise DataPrepError(f"{settings.output_dir} already holds a dataset ({os.path.basename(existing[0])}, "
                            f"...); pass --overwrite to replace it")
    temp_dir = FileSystems.join(settings.output_dir, f".tmp-{uuid.uuid4().hex}")
    FileSystems.mkdirs(temp_dir)
    try:
        options = _pipeline_options(pipeline_args or [])
        with beam.Pipeline(options=PipelineOptions(options)) as pipeline:
            build_pipeline(pipeline, settings, input_paths, tokenizer, temp_dir)
        counts = _read_json(FileSystems.join(temp_dir, "_counts.json"))
        if not counts.get("instances"):
            raise DataPrepError(f"no training instances: the inputs ({settings.input_file}) hold no text "
                                f"that tokenizes to at least two tokens")
        shards = counts.pop("shards")
        for shard in range(settings.num_shards):  # a shard that drew no instance is still written
            name = shard_name(shard, settings.num_shards)
            if name not in shards:
                FileSystems.create(FileSystems.join(temp_dir, name)).close()
                shards[name] = 0
        metadata = {
            "format_version": FORMAT_VERSION,
            "num_instances": counts["instances"],
            "shards": dict(sorted(shards.items())),
            "features": feature_spec(settings.max_seq_length, settings.max_predictions_per_seq),
            "max_seq_length": settings.max_seq_length,
            "max_predictions_per_seq": settings.max_predictions_per_seq,
            "vocab_size": tokenizer.vocab_size,
            "vocab_type": tokenizer.kind,
            "vocab_sha256": tokenizer.model_sha256,
            "task": "nsp" if settings.random_next_sentence else "sop",
            "settings": dataclasses.asdict(settings),
            "input_files": input_paths,
            "counts": counts,
        }
        _publish(settings, temp_dir, existing, metadata)
        return metadata
    finally:
        if FileSystems.exists(temp_dir):
            FileSystems.delete([temp_dir])


def _publish(settings: Settings, temp_dir: str, existing: List[str], metadata: dict):
    """Moves the finished shards into place; metadata.json goes last."""
    from apache_beam.io.filesystems import FileSystems

    metadata_path = FileSystems.join(settings.output_dir, METADATA_FILE)
    if existing:
        # Invalidate the old dataset first so a crash mid-swap never leaves old metadata on new shards.
        if metadata_path in existing:
            FileSystems.delete([metadata_path])
        FileSystems.delete([p for p in existing if p != metadata_path])
    names = list(metadata["shards"])
    FileSystems.rename([FileSystems.join(temp_dir, n) for n in names],
                       [FileSystems.join(settings.output_dir, n) for n in names])
    staged = FileSystems.join(temp_dir, METADATA_FILE)
    _write_json(metadata, staged)
    FileSystems.rename([staged], [metadata_path])


def _pipeline_options(args: List[str]) -> List[str]:
    """Beam options; locally the FnApiRunner, several workers meaning several processes.

    Without `--runner` we name Beam's local FnApiRunner: the DirectRunner would
    first try Prism, which downloads a binary at run time.
    """
    args = list(args)
    if not any(a.startswith("--runner") for a in args):
        args.append("--runner=FnApiRunner")
    local = any(a.split("=", 1)[-1] in ("FnApiRunner", "DirectRunner") for a in args if a.startswith("--runner"))
    workers = [a.split("=", 1)[-1] for a in args if a.startswith("--direct_num_workers=")]
    if local and workers and workers[-1] != "1" and not any(a.startswith("--direct_running_mode") for a in args):
        args.append("--direct_running_mode=multi_processing")  # threads would share one GIL
    # Worker processes import data_prep and albert_tf from this checkout.
    repo_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if repo_root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([repo_root] + [p for p in paths if p])
    return args


def define_flags():
    from absl import flags

    defaults = Settings("", "")
    flags.DEFINE_string("input_file", None, "Comma-separated text files or globs.", required=True)
    flags.DEFINE_string("output_dir", None, "Where the shards and metadata.json go.", required=True)
    flags.DEFINE_string("spm_model_file", None, "SentencePiece model (data_prep.train_sentencepiece).")
    flags.DEFINE_string("vocab_file", None, "WordPiece vocab.txt instead (data_prep.build_wordpiece_vocab).")
    flags.DEFINE_enum("input_format", defaults.input_format, documents_lib.FORMATS, "Layout of the input.")
    flags.DEFINE_bool("do_lower_case", defaults.do_lower_case, "Lowercase (uncased models).")
    flags.DEFINE_integer("max_seq_length", defaults.max_seq_length, "Tokens per sequence.")
    flags.DEFINE_integer("max_predictions_per_seq", defaults.max_predictions_per_seq, "Masked tokens cap.")
    flags.DEFINE_float("masked_lm_prob", defaults.masked_lm_prob, "Fraction of tokens to mask.")
    flags.DEFINE_integer("ngram", defaults.ngram, "Longest masked span, in words.")
    flags.DEFINE_bool("favor_shorter_ngram", defaults.favor_shorter_ngram, "p(n) ∝ 1/n (else reversed).")
    flags.DEFINE_bool("do_whole_word_mask", defaults.do_whole_word_mask, "Mask whole words.")
    flags.DEFINE_bool("random_next_sentence", defaults.random_next_sentence,
                      "NSP (B from a random document) instead of SOP, for the ablation.")
    flags.DEFINE_enum("one_sentence_chunks", defaults.one_sentence_chunks, ONE_SENTENCE_CHUNK_MODES,
                      "split: cut the sentence at a word start (SOP stays SOP); random_document: the "
                      "original's random-document negative.")
    flags.DEFINE_bool("short_target_per_document", defaults.short_target_per_document,
                      "Draw the short target length once per document, as the original.")
    flags.DEFINE_float("short_seq_prob", defaults.short_seq_prob, "Probability of a shorter target.")
    flags.DEFINE_integer("dupe_factor", defaults.dupe_factor, "Passes over the corpus (new masks each).")
    flags.DEFINE_integer("random_seed", defaults.random_seed, "Seed of every random choice.")
    flags.DEFINE_integer("num_shards", defaults.num_shards, "Output TFRecord files.")
    flags.DEFINE_integer("negative_pool_documents", defaults.negative_pool_documents,
                         "Documents a random B may come from (NSP / random_document only).")
    flags.DEFINE_bool("overwrite", defaults.overwrite, "Replace a dataset already in output_dir.")


def main(argv):
    from absl import flags

    FLAGS = flags.FLAGS
    settings = Settings(**{f.name: FLAGS[f.name].value for f in dataclasses.fields(Settings)})
    try:
        metadata = run(settings, argv[1:])
    except (DataPrepError, documents_lib.InputFormatError) as error:
        sys.exit(f"error: {error}")
    counts = metadata["counts"]
    print(f"wrote {metadata['num_instances']} instances in {len(metadata['shards'])} shards to "
          f"{settings.output_dir} ({counts['documents']} documents, {counts['tokens']} tokens, "
          f"{counts['masked_tokens'] / max(1, counts['non_special_tokens']):.1%} masked, "
          f"{counts['sop_label_1'] / counts['instances']:.1%} label 1)")


if __name__ == "__main__":
    from absl import app, flags

    define_flags()
    app.run(main, flags_parser=lambda argv: flags.FLAGS(argv, known_only=True))
