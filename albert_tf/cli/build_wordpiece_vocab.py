"""Builds a BERT-style WordPiece `vocab.txt` from text files (the library: `data_prep.build_wordpiece_vocab`).

    python -m data_prep.build_wordpiece_vocab --input 'corpus/*.txt' --output_file vocab/vocab.txt \
        --vocab_size 21128 [--nodo_lower_case]

The file starts with `[PAD] [UNK] [CLS] [SEP] [MASK]` (ids 0-4, as ALBERT's
SentencePiece ids); every character seen `--min_character_count` times is kept.
"""

import sys

from absl import flags

from albert_tf.cli.app import run_cli
from data_prep.build_wordpiece_vocab import build_wordpiece_vocab, corpus_lines, write_vocab
from data_prep.documents import FORMATS, expand_input_patterns


def define_flags():
    flags.DEFINE_string("input", None, "Comma-separated text files or globs.", required=True)
    flags.DEFINE_enum("input_format", "bert", FORMATS, "Layout of the input files.")
    flags.DEFINE_string("output_file", None, "Where vocab.txt goes.", required=True)
    flags.DEFINE_integer("vocab_size", 21128, "Tokens in vocab.txt (the Chinese models: 21128).")
    flags.DEFINE_bool("do_lower_case", True, "Lowercase and strip accents (False for Korean: keeps Hangul whole).")
    flags.DEFINE_integer("min_character_count", 1, "Characters seen this often are always in the vocabulary.")


def main(argv):
    del argv
    FLAGS = flags.FLAGS
    try:
        paths = expand_input_patterns(FLAGS.input)
        tokens = build_wordpiece_vocab(
            corpus_lines(paths, FLAGS.input_format, FLAGS.do_lower_case),
            FLAGS.vocab_size,
            min_character_count=FLAGS.min_character_count,
        )
        write_vocab(tokens, FLAGS.output_file)
    except (OSError, ValueError) as error:
        sys.exit(f"error: {error}")
    print(f"wrote {FLAGS.output_file} ({len(tokens)} tokens)")


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    run_cli(main, define_flags)


if __name__ == "__main__":
    cli()
