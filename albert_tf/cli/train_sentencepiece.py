"""Trains ALBERT's SentencePiece vocabulary from text files (the library: `data_prep.train_sentencepiece`).

    python -m data_prep.train_sentencepiece --input 'corpus/*.txt' \
        --model_prefix vocab/30k-clean --vocab_size 30000

A unigram model with ALBERT's ids (`<pad>`=0, `<unk>`=1, `[CLS]`=2, `[SEP]`=3,
`[MASK]`=4, then the user-defined symbols), trained on sentences normalised by
the tokenizer's own `preprocess_text`, streamed (memory does not grow with the corpus).
"""

import dataclasses
from typing import Tuple

from absl import flags

from albert_tf.cli.app import run_cli
from albert_tf.cli.flags import define_option_flags, settings_from_flags
from albert_tf.options import option
from albert_tf.tokenization import ALBERT_USER_DEFINED_SYMBOLS
from data_prep.documents import FORMATS, expand_input_patterns
from data_prep.train_sentencepiece import corpus_sentences, train_sentencepiece


@dataclasses.dataclass(frozen=True)
class SentencePieceSettings:
    """What `python -m data_prep.train_sentencepiece` is asked (its flags of the same names)."""

    input: str = option(help="Comma-separated text files or globs.")
    model_prefix: str = option(help="Writes <prefix>.model and <prefix>.vocab.")
    input_format: str = option("bert", "Layout of the input files.", choices=FORMATS)
    vocab_size: int = option(30000, "Pieces in the vocabulary (ALBERT: 30000).")
    cased: bool = option(False, "Keep case (the released English models are uncased).")
    input_sentence_size: int = option(10_000_000, "Sentences sampled for training.")
    character_coverage: float = option(0.99995, "As the ALBERT README.")
    user_defined_symbols: Tuple[str, ...] = option(
        ALBERT_USER_DEFINED_SYMBOLS, "Pieces always kept whole (ids 5, 6, ...)."
    )


def define_flags():
    define_option_flags(SentencePieceSettings)
    flags.mark_flags_as_required(["input", "model_prefix"])


def main(argv):
    del argv
    settings = settings_from_flags(SentencePieceSettings)
    paths = expand_input_patterns(settings.input)
    model_file = train_sentencepiece(
        corpus_sentences(paths, settings.input_format, lower=not settings.cased),
        settings.model_prefix,
        vocab_size=settings.vocab_size,
        input_sentence_size=settings.input_sentence_size,
        character_coverage=settings.character_coverage,
        user_defined_symbols=list(settings.user_defined_symbols),
    )
    print(
        f"wrote {model_file} and {settings.model_prefix}.vocab "
        f"({settings.vocab_size} pieces, {'cased' if settings.cased else 'uncased'})"
    )


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    run_cli(main, define_flags)


if __name__ == "__main__":
    cli()
