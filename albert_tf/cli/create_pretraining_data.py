"""Writes SOP + n-gram-masked pretraining TFRecords (the Beam job of `data_prep.pipeline`).

    python -m data_prep.create_pretraining_data --input_file 'corpus/*.txt' \
        --output_dir data/pretrain --spm_model_file vocab/30k-clean.model \
        --max_seq_length 512 --dupe_factor 40 [--direct_num_workers 2] [--runner ...]
    # WordPiece vocabularies (Chinese models, an existing BERT vocab): --vocab_file vocab.txt instead

Flags that are not ours (`--runner`, `--direct_num_workers`, Dataflow's
`--project`, ...) go to Beam; one Beam does not take either is refused, naming
the closest flag. The pipeline, its determinism and its output
are described in `data_prep.pipeline`.
"""

from absl import flags

from albert_tf.cli.app import run_cli
from albert_tf.cli.flags import define_option_flags, define_vocabulary_flags, given_tokenizer, settings_from_flags
from albert_tf.cli.run_record import write_settings
from albert_tf.locking import OutputDirLock
from data_prep.pipeline import Settings, beam_arguments, run, sentences_per_document_note


def define_flags():
    define_vocabulary_flags(lower_case_flag=False)  # data_prep's default is its own: uncased
    flags.DEFINE_bool("do_lower_case", True, "Lowercase (uncased models).")
    define_option_flags(Settings)
    flags.mark_flags_as_required(["input_file", "output_dir"])


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
    run_cli(main, define_flags, pass_through=beam_arguments)


if __name__ == "__main__":
    cli()
