"""Builds a BERT-style WordPiece `vocab.txt` from text files (the library: `data_prep.build_wordpiece_vocab`).

    python -m data_prep.build_wordpiece_vocab --input 'corpus/*.txt' --output_file vocab/vocab.txt \
        --vocab_size 21128 [--nodo_lower_case]

The file starts with `[PAD] [UNK] [CLS] [SEP] [MASK]` (ids 0-4, as ALBERT's
SentencePiece ids); every character seen `--min_character_count` times is kept.
"""

import dataclasses
import sys

from absl import flags

from albert_tf.cli.app import run_cli
from albert_tf.cli.flags import define_option_flags, settings_from_flags
from albert_tf.options import option
from data_prep.build_wordpiece_vocab import build_wordpiece_vocab, corpus_lines, placeholders, write_vocab
from data_prep.documents import FORMATS, expand_input_patterns


@dataclasses.dataclass(frozen=True)
class WordPieceSettings:
    """What `python -m data_prep.build_wordpiece_vocab` is asked (its flags of the same names)."""

    input: str = option(help="Comma-separated text files or globs.")
    output_file: str = option(help="Where vocab.txt goes.")
    input_format: str = option("bert", "Layout of the input files.", choices=FORMATS)
    vocab_size: int = option(21128, "Tokens in vocab.txt (the Chinese models: 21128).")
    do_lower_case: bool = option(True, "Lowercase and strip accents (False for Korean: keeps Hangul whole).")
    min_character_count: int = option(1, "Characters seen this often are always in the vocabulary.")


def define_flags():
    define_option_flags(WordPieceSettings)
    flags.mark_flags_as_required(["input", "output_file"])


def main(argv):
    del argv
    settings = settings_from_flags(WordPieceSettings)
    paths = expand_input_patterns(settings.input)
    tokens = build_wordpiece_vocab(
        corpus_lines(paths, settings.input_format, settings.do_lower_case),
        settings.vocab_size,
        min_character_count=settings.min_character_count,
        note=lambda line: print(line, file=sys.stderr, flush=True),
    )
    write_vocab(tokens, settings.output_file)
    unused = placeholders(tokens)
    print(
        f"wrote {settings.output_file} ({len(tokens)} tokens"
        + (f", {unused} of them [unusedN] placeholders: the corpus gave fewer pieces)" if unused else ")")
    )


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    run_cli(main, define_flags)


if __name__ == "__main__":
    cli()
