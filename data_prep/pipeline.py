"""The Beam pipeline that writes SOP + n-gram-masked pretraining TFRecords (`run`).

The CLI is `python -m data_prep.create_pretraining_data`; the output format is
`albert_tf.shard_set`'s.

Whole-word masking follows the vocabulary: SentencePiece words start at `▁`
pieces (the original's `_is_start_piece_sp`), WordPiece words continue with
`##` pieces (BERT's rule); `metadata.json` records `vocab_type`.

Pipeline: files → documents (`documents.py`) → buckets → tokenize once, then
`dupe_factor` passes of pairs (`instances.py`) and masks (`masking.py`) →
serialized Examples keyed by a hash → `num_shards` shards, each sorted by that
hash (a deterministic shuffle; with `max_instances_per_row` > 1 packed into rows, `packing.py`) →
`part-SSSSS-of-NNNNN.tfrecord` + `metadata.json`.

Determinism: every random choice for a document comes from
`random.Random("<seed>/<document hash>/<dupe>")` and shards are sorted, so the
same inputs, seed and flags give byte-identical shards whatever the runner or
the number of workers. Memory: no global list; a bucket holds one document
(SOP) or `--negative_pool_documents` documents (when B may come from another
document), and the shuffle into shards is the runner's (disk-backed on
Dataflow/Flink/Spark; in memory on the DirectRunner, ~1.2 KB per instance at
length 128).

Nothing half-written ever looks complete: shards are written under
`<output_dir>/.staging-<id>/` (`albert_tf.publish.STAGING_PREFIX`), moved into place when all succeeded, and
`metadata.json` is written last.
"""

import argparse
import asyncio
import contextlib
import dataclasses
import errno
import hashlib
import importlib.util
import json
import logging
import math
import os
import random
import sys
import uuid
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from albert_tf import preemption
from albert_tf.locking import OutputDirLock
from albert_tf.options import option
from albert_tf.publish import STAGING_PREFIX, remove_stale_staging
from albert_tf.shard_set import METADATA_FILE, HashingWriter, is_shard_name, metadata_record, shard_name
from albert_tf.tokenization import (
    TOKENIZER_FILE,
    Tokenizer,
    kinds,
    tokenizer_from_bytes,
    tokenizer_json,
    vocabulary_flags,
)
from data_prep import documents as documents_lib
from data_prep.beam import DirectOptions, FileSystems, PipelineOptions, create_runner
from data_prep.beam import apache_beam as beam
from data_prep.errors import DataPrepError
from data_prep.instances import ONE_SENTENCE_CHUNK_MODES, Instance, InstanceBuilder, InstanceOptions
from data_prep.masking import MaskingOptions, NgramMasker
from data_prep.packing import MIN_INSTANCE_TOKENS, max_instances_in_row, pack_rows, prediction_slots
from data_prep.records import compact_length, pack_instance, serialize_instance, serialize_row, unpack_instance
from data_prep.tfrecord import write_record

NOT_RECORDED = ("tokenizer", "dask_wait_seconds")  # the vocabulary is recorded as its flag's file


@dataclasses.dataclass(frozen=True)
class CorpusSettings:
    """The flags every data job has (ALBERT's `Settings`, PL-BERT's `data_prep.plbert.PlbertSettings`)."""

    input_file: str = option(help="Comma-separated text files or globs.")
    output_dir: str = option(help="Where the shards and metadata.json go.")
    input_format: str = option("bert", "Layout of the input.", choices=documents_lib.FORMATS)
    max_seq_length: int = option(512, "Tokens per sequence.")
    random_seed: int = option(12345, "Seed of every random choice.")
    num_shards: int = option(10, "Output TFRecord files.")
    # > 1: packed rows (data_prep.packing); 1: the original's layout
    max_instances_per_row: int = option(
        1,
        "Pack up to this many whole instances into each max_seq_length row (1: one a row, the original's "
        "layout; pretraining keeps packed instances apart).",
    )
    overwrite: bool = option(False, "Replace a dataset already in output_dir.")
    # How the job runs, not what it writes: not in metadata.json.
    dask_wait_seconds: float = option(
        60.0,
        "With --runner DaskRunner and a scheduler's address or file: how long to wait for the scheduler to "
        "answer and for its first worker before giving up.",
    )


@dataclasses.dataclass(frozen=True)
class Settings(CorpusSettings):
    """Every flag that shapes the output (recorded in metadata.json)."""

    # The vocabulary (any registered kind; its own `do_lower_case`), resolved by the command's flags.
    tokenizer: Optional[Tokenizer] = None
    max_predictions_per_seq: int = option(20, "Masked tokens cap.")
    masked_lm_prob: float = option(0.15, "Fraction of tokens to mask.")
    ngram: int = option(3, "Longest masked span, in words.")
    favor_shorter_ngram: bool = option(True, "p(n) ∝ 1/n (else reversed).")
    do_whole_word_mask: bool = option(True, "Mask whole words.")
    random_next_sentence: bool = option(False, "NSP (B from a random document) instead of SOP, for the ablation.")
    one_sentence_chunks: str = option(
        "split",
        "split: cut the sentence at a word start (SOP stays SOP); random_document: the "
        "original's random-document negative.",
        choices=ONE_SENTENCE_CHUNK_MODES,
    )
    short_target_per_document: bool = option(False, "Draw the short target length once per document, as the original.")
    short_seq_prob: float = option(0.1, "Probability of a shorter target.")
    dupe_factor: int = option(40, "Passes over the corpus (new masks each).")
    negative_pool_documents: int = option(256, "Documents a random B may come from (NSP / random_document only).")

    def instance_options(self) -> InstanceOptions:
        return InstanceOptions(
            self.max_seq_length,
            self.short_seq_prob,
            self.random_next_sentence,
            self.one_sentence_chunks,
            self.short_target_per_document,
        )

    def prediction_slots(self) -> int:
        """Masked-position slots a row (`max_predictions_per_seq` unless rows are packed)."""
        return prediction_slots(
            self.max_seq_length, self.max_predictions_per_seq, self.max_instances_per_row, self.masked_lm_prob
        )

    def masking_options(self) -> MaskingOptions:
        return MaskingOptions(
            self.masked_lm_prob,
            self.max_predictions_per_seq,
            self.ngram,
            self.favor_shorter_ngram,
            self.do_whole_word_mask,
        )

    def record(self) -> dict:
        """The settings as metadata.json records them: the vocabulary as each kind's flag (its file or None)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in NOT_RECORDED}
        for kind in kinds():
            values[kind.flag] = self.tokenizer.model_file if self.tokenizer.kind == kind.name else None
        return {**values, "do_lower_case": self.tokenizer.do_lower_case}

    def validate(self):
        checks = [
            (self.max_seq_length >= 5, "max_seq_length must be at least 5"),
            (self.max_predictions_per_seq >= 1, "max_predictions_per_seq must be at least 1"),
            (0.0 <= self.masked_lm_prob <= 1.0, "masked_lm_prob must be in [0, 1]"),
            (0.0 <= self.short_seq_prob <= 1.0, "short_seq_prob must be in [0, 1]"),
            (self.ngram >= 1, "ngram must be at least 1"),
            (self.dupe_factor >= 1, "dupe_factor must be at least 1"),
            (self.random_seed >= 0, f"--random_seed {self.random_seed}: must be 0 or more"),
            (self.num_shards >= 1, "num_shards must be at least 1"),
            (self.negative_pool_documents >= 2, "negative_pool_documents must be at least 2"),
            (self.max_instances_per_row >= 1, "max_instances_per_row must be at least 1"),
            (self.dask_wait_seconds > 0, "dask_wait_seconds must be above 0"),
            (  # before any work: a row's slots are allocated per instance
                self.max_instances_per_row <= max_instances_in_row(self.max_seq_length),
                f"max_instances_per_row {self.max_instances_per_row}: a row of max_seq_length "
                f"{self.max_seq_length} tokens holds at most {max_instances_in_row(self.max_seq_length)} "
                f"instances (each at least [CLS] a [SEP] b [SEP], {MIN_INSTANCE_TOKENS} tokens)",
            ),
            (self.input_format in documents_lib.FORMATS, f"input_format must be one of {documents_lib.FORMATS}"),
            (
                self.one_sentence_chunks in ONE_SENTENCE_CHUNK_MODES,
                f"one_sentence_chunks must be one of {ONE_SENTENCE_CHUNK_MODES}",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise DataPrepError(message)


def text_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


def merge_counts(counts: Sequence[dict]) -> dict:
    """Sums nested count dicts (numbers add, dicts merge recursively, strings are kept)."""
    total: dict = {}
    for count in counts:
        for key, value in count.items():
            if isinstance(value, dict):
                total[key] = merge_counts([total.get(key, {}), value])
            elif isinstance(value, str):  # a shard's checksum: each shard is written once
                total[key] = value
            else:
                total[key] = total.get(key, 0) + value
    return total


class ReadDocuments(beam.DoFn):
    def __init__(self, input_format: str):
        self.input_format = input_format

    def process(self, path):
        stats = documents_lib.ReadStats(path)
        for sentences in documents_lib.read_documents(path, self.input_format, stats):
            yield MAIN, (text_hash("\n".join(sentences)), sentences)
        if stats.replaced_bytes:
            logging.warning("%s: %d invalid UTF-8 sequences replaced with U+FFFD", path, stats.replaced_bytes)
        if stats.cut_sentences:
            logging.warning(
                "%s: %d sentences over %d characters cut (%d characters dropped)",
                path,
                stats.cut_sentences,
                documents_lib.MAX_SENTENCE_CHARS,
                stats.cut_chars,
            )
        if not stats.documents:
            logging.warning("%s: no text in this file", path)
        yield (
            STATS,
            {
                "files": 1,
                "empty_files": int(not stats.documents),
                "replaced_utf8": {path: stats.replaced_bytes} if stats.replaced_bytes else {},
                "cut_sentences": {path: stats.cut_sentences} if stats.cut_sentences else {},
                "cut_chars": {path: stats.cut_chars} if stats.cut_chars else {},
                "raw_documents": stats.documents,
                "raw_sentences": stats.sentences,
            },
        )


class _MakeInstances(beam.DoFn):
    """A bucket of documents → (shard, (sort key, serialized Example))."""

    def __init__(self, settings: Settings):
        # Workers rebuild the tokenizer from its bytes: a live one need not pickle.
        self.settings = dataclasses.replace(settings, tokenizer=None)
        self.vocab_type = settings.tokenizer.kind
        self.vocab_bytes = settings.tokenizer.model_proto
        self.do_lower_case = settings.tokenizer.do_lower_case

    def setup(self):
        s = self.settings
        self.tokenizer = tokenizer_from_bytes(self.vocab_type, self.vocab_bytes, do_lower_case=self.do_lower_case)
        masker = NgramMasker(self.tokenizer.pieces(), s.masking_options(), vocab_type=self.vocab_type)
        self.builder = InstanceBuilder(masker, s.instance_options())

    def process(self, bucket):
        s = self.settings
        _, keyed_documents = bucket
        keyed_documents = sorted(keyed_documents)  # the runner's order is not ours to rely on
        keys, pool = [], []
        stats = {"documents": 0, "sentences": 0, "tokens": 0}
        for key, sentences in keyed_documents:
            encoded = (documents_lib.encode_sentence(self.tokenizer, x, s.input_format) for x in sentences)
            tokenized = [ids for ids in encoded if ids]
            if tokenized:
                keys.append(key)
                pool.append(tokenized)
                stats["documents"] += 1
                stats["sentences"] += len(tokenized)
                stats["tokens"] += sum(len(x) for x in tokenized)
        counts = {
            "instances": 0,
            "sop_label_1": 0,
            "short_target": 0,
            "masked_tokens": 0,
            "non_special_tokens": 0,
            "ngram_drawn": {},
            "span_words": {},
        }
        for index, key in enumerate(keys):
            for dupe in range(s.dupe_factor):
                rng = random.Random(f"{s.random_seed}/{key}/{dupe}")
                for number, instance in enumerate(self.builder.build(pool[index], pool, index, rng)):
                    _count_instance(counts, instance)
                    sort_key = text_hash(f"{s.random_seed}/{key}/{dupe}/{number}")
                    yield MAIN, (sort_key % s.num_shards, (sort_key, pack_instance(instance)))
        yield STATS, merge_counts([stats, counts])


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


class _WriteShard(beam.DoFn):
    def __init__(self, directory: str, settings: Settings):
        self.directory = directory
        self.settings = settings

    def process(self, shard_records):
        from apache_beam.io.filesystems import FileSystems  # in the worker: DoFns travel pickled

        s = self.settings
        shard, records = shard_records
        records = sorted(records)
        name = shard_name(shard, s.num_shards)
        with FileSystems.create(FileSystems.join(self.directory, name)) as stream:
            hashed = HashingWriter(stream)
            if s.max_instances_per_row == 1:
                rows = len(records)
                for _, compact in records:
                    write_record(
                        hashed,
                        serialize_instance(unpack_instance(compact), s.max_seq_length, s.max_predictions_per_seq),
                    )
            else:
                lengths = [compact_length(compact) for _, compact in records]
                packed = pack_rows(lengths, s.max_seq_length, s.max_instances_per_row)
                rows = len(packed)
                for members in packed:
                    row = [unpack_instance(records[i][1]) for i in members]
                    write_record(
                        hashed,
                        serialize_row(row, s.max_seq_length, s.prediction_slots(), s.max_instances_per_row),
                    )
        yield {"shards": {name: rows}, "shard_files": {name: hashed.manifest_entry()}}


# A DoFn with two outputs yields (MAIN or STATS, value) pairs that `_select` splits, rather than
# Beam side outputs (TaggedOutput): Beam's DaskRunner drops side outputs' tags and mixes them into the
# main output.
MAIN, STATS = 0, 1


def select(pcoll, kind: int, label: str):
    """The values of `pcoll`'s (kind, value) pairs of one kind."""
    return pcoll | label >> beam.FlatMap(lambda item: [item[1]] if item[0] == kind else [])


def _bucket_key(document_hash: int, num_documents: int, pool_documents: int) -> int:
    num_buckets = max(1, math.ceil(num_documents / pool_documents))
    return document_hash % num_buckets


def build_pipeline(
    pipeline: beam.Pipeline, settings: Settings, input_paths: List[str], tokenizer, temp_dir: str
) -> None:
    """Adds the whole job to `pipeline`; shards and `_counts.json` land in `temp_dir`."""
    read = (
        pipeline
        | "InputFiles" >> beam.Create(input_paths)
        | "ReadDocuments" >> beam.ParDo(ReadDocuments(settings.input_format))
    )
    documents = select(read, MAIN, "Documents")
    if settings.instance_options().needs_other_documents:
        num_documents = beam.pvalue.AsSingleton(documents | "CountDocuments" >> beam.combiners.Count.Globally())
        keyed = documents | "ToPools" >> beam.Map(
            lambda kv, n: (_bucket_key(kv[0], n, settings.negative_pool_documents), kv), num_documents
        )
    else:
        keyed = documents | "OnePerBucket" >> beam.Map(lambda kv: (kv[0], kv))
    made = keyed | "GroupBuckets" >> beam.GroupByKey() | "MakeInstances" >> beam.ParDo(_MakeInstances(settings))
    written = (
        select(made, MAIN, "Records")
        | "GroupShards" >> beam.GroupByKey()
        | "WriteShards" >> beam.ParDo(_WriteShard(temp_dir, settings))
    )

    counts_path = FileSystems.join(temp_dir, "_counts.json")
    _ = (
        (select(read, STATS, "ReadStats"), select(made, STATS, "InstanceStats"), written)
        | "AllCounts" >> beam.Flatten()
        | "MergeCounts" >> beam.CombineGlobally(merge_counts)
        | "WriteCounts" >> beam.Map(write_json_file, counts_path)
    )


def write_json_file(value, path):
    with FileSystems.create(path) as stream:
        stream.write(json.dumps(value, indent=2, sort_keys=True).encode("utf-8"))


def read_json_file(path):
    with FileSystems.open(path) as stream:
        return json.loads(stream.read().decode("utf-8"))


def existing_outputs(output_dir: str) -> List[str]:
    pattern = FileSystems.join(output_dir, "*")
    found = FileSystems.match([pattern])[0].metadata_list
    return sorted(m.path for m in found if is_shard_name(m.path) or os.path.basename(m.path) == METADATA_FILE)


def run(settings: Settings, pipeline_args: Optional[List[str]] = None) -> dict:
    """Runs the job and returns the metadata it wrote.

    Raises:
        DataPrepError: bad flags, no tokenizer, inputs matching nothing, an output dir that already holds a dataset
            (without `overwrite`), or inputs that give no instances. Nothing in
            `output_dir` is touched in any of these cases.
    """
    settings.validate()
    check_runner_supports(pipeline_options(pipeline_args or []), settings.instance_options().needs_other_documents)
    if settings.tokenizer is None:
        raise DataPrepError(f"no vocabulary: give {vocabulary_flags()}")
    input_paths = input_paths_of(settings.input_file)
    tokenizer = settings.tokenizer
    wait_for_dask(pipeline_options(pipeline_args or []), settings.dask_wait_seconds)
    return run_locked(settings.output_dir, lambda: _write_dataset(settings, pipeline_args, input_paths, tokenizer))


def input_paths_of(patterns: str) -> List[str]:
    """The sorted files of `--input_file`'s patterns; `DataPrepError` naming a pattern that matches none."""
    try:
        return documents_lib.expand_input_patterns(patterns)
    except (OSError, ValueError) as error:
        raise DataPrepError(str(error)) from None


def run_locked(output_dir: str, write: Callable[[], dict]) -> dict:
    """`write()` under `output_dir`'s lock, after removing stale staging; a worker's disk error is one line."""
    with OutputDirLock(output_dir):
        removed = remove_stale_staging(output_dir)
        if removed:
            logging.warning(
                "%s: removed %d staging directories of earlier runs that did not finish", output_dir, removed
            )
        try:
            return write()
        except DataPrepError:
            raise
        except Exception as error:  # noqa: BLE001  (Beam wraps a worker's OSError in a RuntimeError)
            if cause_in(error, preemption.Terminated) is not None:
                # SIGTERM landed inside a Beam stage, which re-raised it wrapped: unwind as the CLI expects.
                raise preemption.Terminated() from None
            cause = cause_in(error, OSError)
            if cause is None:
                raise
            why = "no space left on device" if cause.errno == errno.ENOSPC else (cause.strerror or str(cause))
            raise DataPrepError(
                f"{output_dir}: {why} while writing the dataset; nothing was published "
                "(any earlier dataset there is intact)"
            ) from None


@contextlib.contextmanager
def worker_tracebacks_unlogged():
    """Beam logs a failing bundle's traceback at ERROR before re-raising, and Dask's client logs its lost
    connection's; the CLI says what happened in one line.

    Logged as before when the root logger shows INFO (`-v 1`).
    """
    # distributed configures its modules' loggers one by one: each is quietened, not just the parent.
    dask_names = [name for name in logging.Logger.manager.loggerDict if name.split(".")[0] == "distributed"]
    loggers = [logging.getLogger(name) for name in ["apache_beam.runners.common", *dask_names]]
    levels = [logger.level for logger in loggers]
    if logging.getLogger().getEffectiveLevel() > logging.INFO:
        for logger in loggers:
            logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def cause_in(error: BaseException, kind: type) -> Optional[BaseException]:
    """The `kind` error `error` is, or was raised from (Beam re-raises a worker's as a RuntimeError)."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, kind):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


@contextlib.contextmanager
def staging(output_dir: str, overwrite: bool):
    """Yields (a new staging directory inside `output_dir`, the dataset files already there); removes the
    staging directory on the way out. Refuses a dataset already there without `overwrite`."""
    existing = existing_outputs(output_dir) if FileSystems.exists(output_dir) else []
    if existing and not overwrite:
        raise DataPrepError(
            f"{output_dir} already holds a dataset ({os.path.basename(existing[0])}, "
            f"...); pass --overwrite to replace it"
        )
    temp_dir = FileSystems.join(output_dir, f"{STAGING_PREFIX}{uuid.uuid4().hex}")
    try:  # from its creation: a signal landing just after it must not leave an empty staging directory
        FileSystems.mkdirs(temp_dir)
        yield temp_dir, existing
    finally:
        if FileSystems.exists(temp_dir):
            FileSystems.delete([temp_dir])


def run_beam(pipeline_args, build: Callable[[beam.Pipeline], None], output_dir: str) -> None:
    """Builds the pipeline (`build(pipeline)`) with data_prep's Beam options and runs it to the end."""
    options = pipeline_options(pipeline_args or [])
    with worker_tracebacks_unlogged():
        pipeline = beam.Pipeline(options=PipelineOptions(options))
        build(pipeline)
        result = pipeline.run()
        result.wait_until_finish()
    preemption.check_terminated()  # a SIGTERM during the pipeline whose raise was swallowed: publish nothing
    check_every_task_finished(result, output_dir)


def _write_dataset(settings: Settings, pipeline_args, input_paths: List[str], tokenizer) -> dict:
    with staging(settings.output_dir, settings.overwrite) as (temp_dir, existing):
        run_beam(
            pipeline_args,
            lambda pipeline: build_pipeline(pipeline, settings, input_paths, tokenizer, temp_dir),
            settings.output_dir,
        )
        counts = read_json_file(FileSystems.join(temp_dir, "_counts.json"))
        if not counts.get("instances"):
            raise DataPrepError(
                f"no training instances: the inputs ({settings.input_file}) hold no text "
                f"that tokenizes to at least two tokens"
            )
        if not counts.get("masked_tokens"):
            raise DataPrepError(
                f"no token of the {counts['instances']:,} instances was masked (--masked_lm_prob "
                f"{settings.masked_lm_prob}): the masked-LM loss would have no target; raise --masked_lm_prob"
            )
        shards = counts.pop("shards")
        shard_files = counts.pop("shard_files")
        for shard in range(settings.num_shards):  # a shard that drew no instance is still written
            name = shard_name(shard, settings.num_shards)
            if name not in shards:
                FileSystems.create(FileSystems.join(temp_dir, name)).close()
                shards[name] = 0
                shard_files[name] = HashingWriter(None).manifest_entry()
        counts["packing"] = row_fill(counts, sum(shards.values()), settings.max_seq_length)
        metadata = metadata_record(
            num_instances=counts["instances"],
            shards=shards,
            shard_files=shard_files,
            max_seq_length=settings.max_seq_length,
            max_predictions_per_seq=settings.max_predictions_per_seq,
            max_instances_per_row=settings.max_instances_per_row,
            max_predictions_per_row=settings.prediction_slots(),
            vocab_size=tokenizer.vocab_size,
            vocab_type=tokenizer.kind,
            vocab_sha256=tokenizer.model_sha256,
            task="nsp" if settings.random_next_sentence else "sop",
            settings=settings.record(),
            input_files=input_paths,
            counts=counts,
        )
        # The vocabulary travels with the data: pretraining on it needs no vocabulary flag and every
        # model it publishes carries its tokenizer.
        vocabulary = {tokenizer.asset_name: tokenizer.model_proto, TOKENIZER_FILE: tokenizer_json(tokenizer)}
        publish(settings.output_dir, temp_dir, existing, metadata, vocabulary)
        return metadata


def row_fill(counts: dict, rows: int, max_seq_length: int) -> dict:
    """Rows written, and the share of their tokens that is text, one instance a row and as written."""
    real = counts["non_special_tokens"] + 3 * counts["instances"]
    return {
        "rows": rows,
        "fill_one_instance_a_row": round(real / (counts["instances"] * max_seq_length), 4),
        "fill": round(real / (rows * max_seq_length), 4),
    }


def check_every_task_finished(result, output_dir: str) -> None:
    """Beam's DaskRunner reports DONE when its scheduler is lost mid-job (the futures end cancelled)."""
    futures = getattr(result, "futures", None)  # a DaskRunnerResult's; other runners raise on failure
    if not futures:
        return
    unfinished = [future for future in futures if future.status != "finished"]
    if not unfinished:
        return
    client = result.client
    address = getattr(client.scheduler, "address", None) or "its scheduler"
    with worker_tracebacks_unlogged():  # the client's reconnect attempts, cancelled
        client.close(timeout=5)
    statuses = ", ".join(sorted({future.status for future in unfinished}))
    raise DataPrepError(
        f"{output_dir}: the Dask cluster ({address}) was lost before the job finished ({len(unfinished)} of "
        f"{len(futures)} tasks {statuses}); nothing was published (any earlier dataset there is intact)"
    )


def sentences_per_document_note(counts: dict, task: str) -> str:
    """A note when the documents average under 1.5 sentences: SOP/NSP pairs then rarely span two
    sentences of one document (e.g. `--input_format bert` on a file with one sentence a line)."""
    documents, sentences = counts.get("documents"), counts.get("sentences")
    if not documents or sentences is None or sentences / documents >= 1.5:
        return ""
    return (
        f"; warning: documents average {sentences / documents:.2f} sentences, so {task.upper()} pairs rarely "
        "come from two sentences of one document and the sentence task means little (is the input format right?)"
    )


def publish(output_dir: str, temp_dir: str, existing: List[str], metadata: dict, files: Dict[str, bytes]):
    """Moves the finished shards and `files` ({name: bytes}, the vocabulary) into place; metadata.json goes last."""
    metadata_path = FileSystems.join(output_dir, METADATA_FILE)
    # Written before the old dataset goes: a full disk then fails with the old one intact.
    staged = FileSystems.join(temp_dir, METADATA_FILE)
    write_json_file(metadata, staged)
    for name, data in files.items():
        with FileSystems.create(FileSystems.join(temp_dir, name)) as stream:
            stream.write(data)
    if existing:
        # Invalidate the old dataset first so a crash mid-swap never leaves old metadata on new shards.
        if metadata_path in existing:
            FileSystems.delete([metadata_path])
        FileSystems.delete([p for p in existing if p != metadata_path])
    names = list(metadata["shards"]) + list(files)
    FileSystems.rename([FileSystems.join(temp_dir, n) for n in names], [FileSystems.join(output_dir, n) for n in names])
    FileSystems.rename([staged], [metadata_path])


# Beam registers the DaskRunner under its module path only; `--runner DaskRunner` is mapped to it.
DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"


def _joined(args: List[str]) -> List[str]:
    """`--flag value` pairs as `--flag=value` (Beam accepts both; we read `--runner`)."""
    joined, index = [], 0
    while index < len(args):
        arg = args[index]
        if arg == "--runner" and index + 1 < len(args):
            arg, index = f"--runner={args[index + 1]}", index + 1
        joined.append(arg)
        index += 1
    return joined


def _load_runners(options: List[str]) -> None:
    """Imports the runners `options` name (which registers their options, e.g. the DaskRunner's)."""
    for runner in [a.split("=", 1)[1] for a in options if a.startswith("--runner=")]:
        try:
            create_runner(runner)
        except ValueError:
            raise DataPrepError(
                f"--runner {runner}: no such Beam runner (names are case-sensitive: DirectRunner, DaskRunner, "
                "FlinkRunner, SparkRunner, DataflowRunner, PortableRunner, or a runner class's full path)"
            ) from None


def beam_arguments(args: List[str]) -> Tuple[List[str], List[str]]:
    """The arguments of `args` that no Beam option takes, and the names of Beam's options (the runner's too).

    Beam itself drops an argument it does not know with a warning: a mistyped flag would change nothing.

    Raises:
        DataPrepError: an unknown runner, or a value an option cannot take (`--direct_num_workers abc`).
    """
    options = pipeline_options(args)
    _load_runners(options)
    parsers = []

    def keep_parser(parser):
        parser.exit_on_error = False  # a bad value raises here rather than exiting with argparse's usage
        parsers.append(parser)

    try:
        names = PipelineOptions(options).get_all_options(add_extra_args_fn=keep_parser)
        _, unknown = parsers[0].parse_known_args(options)
    except argparse.ArgumentError as error:
        raise DataPrepError(str(error)) from None
    return unknown, sorted(names)


def check_runner_supports(options: List[str], needs_other_documents: bool = False) -> None:
    """Refuses what a runner is known to get wrong, or cannot start without, before any work.

    `needs_other_documents`: the job draws from other documents through a side input sized by a count.
    """
    unknown, _ = beam_arguments(options)
    if unknown:
        raise DataPrepError(f"{unknown[0]}: neither a flag of data_prep nor an option of Beam")
    workers = PipelineOptions(options).view_as(DirectOptions).direct_num_workers
    if workers < 0:
        raise DataPrepError(f"--direct_num_workers {workers}: must be at least 0 (0: one worker a CPU core)")
    dask = f"--runner={DASK_RUNNER}" in options
    if dask and importlib.util.find_spec("distributed") is None:
        raise DataPrepError("--runner DaskRunner needs dask and distributed: pip install 'dask[bag]' distributed")
    if dask and needs_other_documents:
        # Beam 2.77's DaskRunner recomputes a side input inside a task with the ParDos' output lists
        # already filled: the document count (the side input that sizes the document pools) comes out
        # doubled, so the pools, hence the bytes, differ from every other runner's.
        raise DataPrepError(
            "--runner DaskRunner cannot make data that draws B segments from other documents "
            "(--random_next_sentence, --one_sentence_chunks=random_document): Beam's DaskRunner computes "
            "the document count side input wrong; use the DirectRunner (--direct_num_workers N), Flink, "
            "Spark or Dataflow for it"
        )


def wait_for_dask(options: List[str], seconds: float) -> None:
    """Waits at most `seconds` for the Dask scheduler the options name to answer and have a worker.

    Beam's DaskRunner would wait for ever on an address that answers but is no scheduler (an HTTP
    server, a wrong port) or on a scheduler without workers. Nothing to wait for without an address
    or scheduler file: Beam then starts a local cluster.
    """
    if f"--runner={DASK_RUNNER}" not in options:
        return
    from apache_beam.runners.dask.dask_runner import DaskOptions  # imported with the runner
    from distributed import Client  # only on a Dask run

    dask = PipelineOptions(options).view_as(DaskOptions)
    address, scheduler_file = dask.address, dask.scheduler_file
    if not address and not scheduler_file:
        return
    where = f"--dask_client_address {address}" if address else f"--dask_scheduler_file {scheduler_file}"
    print(
        f"note: waiting up to {seconds:g} s (--dask_wait_seconds) for the Dask scheduler at {where} "
        "to answer and have a worker",
        file=sys.stderr,
        flush=True,
    )
    answered = []

    async def probe():
        client = Client(address, scheduler_file=scheduler_file, asynchronous=True, timeout=seconds)
        try:
            await client
            answered.append(True)
            await client.wait_for_workers(1)
        finally:  # also when cancelled at the deadline
            await client.close(timeout=min(seconds, 5))

    with worker_tracebacks_unlogged():  # distributed logs each failed attempt
        try:
            asyncio.run(asyncio.wait_for(probe(), seconds))
        except (OSError, ValueError, asyncio.TimeoutError) as error:  # (3.10: asyncio's is no OSError)
            if answered:
                raise DataPrepError(
                    f"{where}: the Dask scheduler answered but has no worker after {seconds:g} s; start one "
                    f"(dask worker {address or '--scheduler-file ' + scheduler_file}) or raise --dask_wait_seconds"
                ) from None
            if not isinstance(error, (TimeoutError, asyncio.TimeoutError)):
                raise DataPrepError(f"{where}: cannot reach a Dask scheduler there ({error})") from None
            raise DataPrepError(
                f"{where}: no Dask scheduler answered in {seconds:g} s; is the address right and the "
                "scheduler running? (--dask_wait_seconds to wait longer)"
            ) from None


def pipeline_options(args: List[str]) -> List[str]:
    """Beam options; locally the FnApiRunner, several workers meaning several processes.

    Without `--runner` we name Beam's local FnApiRunner: the DirectRunner would
    first try Prism, which downloads a binary at run time.
    """
    args = [f"--runner={DASK_RUNNER}" if a == "--runner=DaskRunner" else a for a in _joined(args)]
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
