"""Writes SOP + n-gram-masked pretraining TFRecords (the Beam job of `data_prep.pipeline`).

    python -m data_prep.create_pretraining_data --input_file 'corpus/*.txt' \
        --output_dir data/pretrain --spm_model_file vocab/30k-clean.model \
        --max_seq_length 512 --dupe_factor 40 [--direct_num_workers 2] [--runner ...]
    # WordPiece vocabularies (Chinese models, an existing BERT vocab): --vocab_file vocab.txt instead

Flags that are not ours (`--runner`, `--direct_num_workers`, Dataflow's
`--project`, ...) go to Beam. The pipeline, its determinism and its output
are described in `data_prep.pipeline`.
"""

from absl import flags

from albert_tf.cli.app import run_cli
from albert_tf.cli.flags import define_vocabulary_flags, given_tokenizer, settings_from_flags
from albert_tf.cli.run_record import write_settings
from albert_tf.locking import OutputDirLock
from data_prep import documents as documents_lib
from data_prep.instances import ONE_SENTENCE_CHUNK_MODES
from data_prep.pipeline import Settings, run, sentences_per_document_note


def define_flags():
    defaults = Settings("", "")
    flags.DEFINE_string("input_file", None, "Comma-separated text files or globs.", required=True)
    flags.DEFINE_string("output_dir", None, "Where the shards and metadata.json go.", required=True)
    define_vocabulary_flags(lower_case_flag=False)  # data_prep's default is its own: uncased
    flags.DEFINE_enum("input_format", defaults.input_format, documents_lib.FORMATS, "Layout of the input.")
    flags.DEFINE_bool("do_lower_case", True, "Lowercase (uncased models).")
    flags.DEFINE_integer("max_seq_length", defaults.max_seq_length, "Tokens per sequence.")
    flags.DEFINE_integer("max_predictions_per_seq", defaults.max_predictions_per_seq, "Masked tokens cap.")
    flags.DEFINE_float("masked_lm_prob", defaults.masked_lm_prob, "Fraction of tokens to mask.")
    flags.DEFINE_integer("ngram", defaults.ngram, "Longest masked span, in words.")
    flags.DEFINE_bool("favor_shorter_ngram", defaults.favor_shorter_ngram, "p(n) ∝ 1/n (else reversed).")
    flags.DEFINE_bool("do_whole_word_mask", defaults.do_whole_word_mask, "Mask whole words.")
    flags.DEFINE_bool(
        "random_next_sentence",
        defaults.random_next_sentence,
        "NSP (B from a random document) instead of SOP, for the ablation.",
    )
    flags.DEFINE_enum(
        "one_sentence_chunks",
        defaults.one_sentence_chunks,
        ONE_SENTENCE_CHUNK_MODES,
        "split: cut the sentence at a word start (SOP stays SOP); random_document: the "
        "original's random-document negative.",
    )
    flags.DEFINE_bool(
        "short_target_per_document",
        defaults.short_target_per_document,
        "Draw the short target length once per document, as the original.",
    )
    flags.DEFINE_float("short_seq_prob", defaults.short_seq_prob, "Probability of a shorter target.")
    flags.DEFINE_integer("dupe_factor", defaults.dupe_factor, "Passes over the corpus (new masks each).")
    flags.DEFINE_integer("random_seed", defaults.random_seed, "Seed of every random choice.")
    flags.DEFINE_integer("num_shards", defaults.num_shards, "Output TFRecord files.")
    flags.DEFINE_integer(
        "negative_pool_documents",
        defaults.negative_pool_documents,
        "Documents a random B may come from (NSP / random_document only).",
    )
    flags.DEFINE_integer(
        "max_instances_per_row",
        defaults.max_instances_per_row,
        "Pack up to this many whole instances into each max_seq_length row (1: one a row, the original's "
        "layout; pretraining keeps packed instances apart).",
    )
    flags.DEFINE_bool("overwrite", defaults.overwrite, "Replace a dataset already in output_dir.")


def main(argv):
    settings = settings_from_flags(Settings, tokenizer=given_tokenizer())
    # settings.json beside the dataset, written under the run's lock once the dataset is: a refused run
    # (bad flags, a dataset there without --overwrite) leaves the directory's record as it was.
    with OutputDirLock(settings.output_dir):
        metadata = run(settings, argv[1:])
        write_settings(settings.output_dir)
    counts = metadata["counts"]
    print(
        f"wrote {metadata['num_instances']} instances in {len(metadata['shards'])} shards to "
        f"{settings.output_dir} ({counts['documents']} documents, {counts['tokens']} tokens, "
        f"{counts['masked_tokens'] / max(1, counts['non_special_tokens']):.1%} masked, "
        f"{counts['sop_label_1'] / counts['instances']:.1%} label 1)"
        + packing_note(metadata)
        + sentences_per_document_note(counts, metadata["task"])
    )


def packing_note(metadata: dict) -> str:
    packing = metadata["counts"]["packing"]
    if metadata["max_instances_per_row"] == 1:
        return f"; rows {packing['fill']:.0%} text"
    return (
        f"; packed into {packing['rows']} rows of up to {metadata['max_instances_per_row']} instances, "
        f"{packing['fill']:.0%} text (one a row: {packing['fill_one_instance_a_row']:.0%})"
    )


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    run_cli(main, define_flags, known_flags_only=True)


if __name__ == "__main__":
    cli()
