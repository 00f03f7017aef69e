"""Writes SOP + n-gram-masked pretraining TFRecords, or PL-BERT phoneme rows (the Beam jobs of `data_prep`).

    python -m data_prep.create_pretraining_data --input_file 'corpus/*.txt' \
        --output_dir data/pretrain --spm_model_file vocab/30k-clean.model \
        --max_seq_length 512 --dupe_factor 40 [--direct_num_workers 2] [--runner ...]
    # WordPiece vocabularies (Chinese models, an existing BERT vocab): --vocab_file vocab.txt instead
    # PL-BERT (phonemes through espeak-ng; pip install 'albert_tf[tts]'), docs/plbert.md:
    python -m data_prep.create_pretraining_data --objective plbert --language en-us \
        --word_vocab_size 30000 --input_file 'corpus/*.txt' --output_dir data/plbert

Flags that are not ours (`--runner`, `--direct_num_workers`, Dataflow's
`--project`, ...) go to Beam; one Beam does not take either is refused, naming
the closest flag. The pipelines, their determinism and their output
are described in `data_prep.pipeline` and `data_prep.plbert`.
"""

import dataclasses

from absl import flags

from albert_tf.cli.app import run_cli
from albert_tf.cli.flags import define_option_flags, define_vocabulary_flags, given_tokenizer, settings_from_flags
from albert_tf.cli.run_record import write_settings
from albert_tf.locking import OutputDirLock
from albert_tf.options import option_specs
from albert_tf.shard_set import ALBERT, PLBERT
from albert_tf.tokenization import kinds
from data_prep import plbert
from data_prep.errors import DataPrepError
from data_prep.pipeline import Settings, beam_arguments, run, sentences_per_document_note

FLAGS = flags.FLAGS


def _option_names(settings) -> set:
    return {spec.name for spec in option_specs(settings)}


def _albert_only() -> list:
    """ALBERT's flags that PL-BERT data has no use for: its vocabulary, masking and sentence pairs."""
    names = _option_names(Settings) - _option_names(plbert.PlbertSettings)
    return sorted(names | {kind.flag for kind in kinds()} | {"do_lower_case"})


def _plbert_only() -> list:
    return sorted(_option_names(plbert.PlbertSettings) - _option_names(Settings))


def define_flags():
    flags.DEFINE_enum(
        "objective",
        ALBERT,
        [ALBERT, PLBERT],
        "albert: SOP + masked-LM rows from a vocabulary; plbert: PL-BERT's phoneme rows and word vocabulary.",
    )
    define_vocabulary_flags(lower_case_flag=False)  # data_prep's default is its own: uncased
    flags.DEFINE_bool("do_lower_case", True, "Lowercase (uncased models).")
    define_option_flags(Settings)
    define_option_flags(plbert.PlbertSettings, exclude=[f.name for f in dataclasses.fields(Settings)])
    flags.mark_flags_as_required(["input_file", "output_dir"])


def check_objective_flags():
    """A flag of the other objective is refused, naming it (it would change nothing)."""
    others = _albert_only() if FLAGS.objective == PLBERT else _plbert_only()
    given = [name for name in others if FLAGS[name].present]
    if given:
        other = ALBERT if FLAGS.objective == PLBERT else PLBERT
        raise DataPrepError(f"--{given[0]}: a flag of --objective {other}, not of --objective {FLAGS.objective}")


def main(argv):
    check_objective_flags()
    if FLAGS.objective == PLBERT:
        return plbert_main(argv)
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


def plbert_main(argv):
    settings = settings_from_flags(plbert.PlbertSettings)
    with OutputDirLock(settings.output_dir):
        metadata = plbert.run(settings, argv[1:])
        write_settings(settings.output_dir)
    counts = metadata["counts"]
    packing = counts["packing"]
    print(
        f"wrote {metadata['num_instances']} windows in {packing['rows']} rows, {len(metadata['shards'])} shards "
        f"to {settings.output_dir} ({counts['documents']} documents, {counts['words']} words, "
        f"{counts['phonemes']} phonemes; {metadata['word_vocab_size']} words in word_vocab.txt, "
        f"{counts['unknown_words'] / max(1, counts['words']):.1%} of the corpus' words [UNK]; "
        f"rows {packing['fill']:.0%} phonemes)"
    )
    print(plbert.symbols_note(counts))


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
