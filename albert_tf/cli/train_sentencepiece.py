"""Trains ALBERT's SentencePiece vocabulary from text files (the library: `data_prep.train_sentencepiece`).

    python -m data_prep.train_sentencepiece --input 'corpus/*.txt' \
        --model_prefix vocab/30k-clean --vocab_size 30000

A unigram model with ALBERT's ids (`<pad>`=0, `<unk>`=1, `[CLS]`=2, `[SEP]`=3,
`[MASK]`=4, then the user-defined symbols), trained on sentences normalised by
the tokenizer's own `preprocess_text`, streamed (memory does not grow with the corpus).
"""

import sys

from absl import flags

from albert_tf.cli.app import run_cli
from albert_tf.tokenization import ALBERT_USER_DEFINED_SYMBOLS
from data_prep.documents import FORMATS, expand_input_patterns
from data_prep.train_sentencepiece import corpus_sentences, train_sentencepiece


def define_flags():
    flags.DEFINE_string("input", None, "Comma-separated text files or globs.", required=True)
    flags.DEFINE_enum("input_format", "bert", FORMATS, "Layout of the input files.")
    flags.DEFINE_string("model_prefix", None, "Writes <prefix>.model and <prefix>.vocab.", required=True)
    flags.DEFINE_integer("vocab_size", 30000, "Pieces in the vocabulary (ALBERT: 30000).")
    flags.DEFINE_bool("cased", False, "Keep case (the released English models are uncased).")
    flags.DEFINE_integer("input_sentence_size", 10_000_000, "Sentences sampled for training.")
    flags.DEFINE_float("character_coverage", 0.99995, "As the ALBERT README.")
    flags.DEFINE_list(
        "user_defined_symbols", list(ALBERT_USER_DEFINED_SYMBOLS), "Pieces always kept whole (ids 5, 6, ...)."
    )


def main(argv):
    del argv
    FLAGS = flags.FLAGS
    try:
        paths = expand_input_patterns(FLAGS.input)
        model_file = train_sentencepiece(
            corpus_sentences(paths, FLAGS.input_format, lower=not FLAGS.cased),
            FLAGS.model_prefix,
            vocab_size=FLAGS.vocab_size,
            input_sentence_size=FLAGS.input_sentence_size,
            character_coverage=FLAGS.character_coverage,
            user_defined_symbols=FLAGS.user_defined_symbols,
        )
    except (OSError, ValueError) as error:  # bad input: a message, not a traceback
        sys.exit(f"error: {error}")
    print(
        f"wrote {model_file} and {FLAGS.model_prefix}.vocab "
        f"({FLAGS.vocab_size} pieces, {'cased' if FLAGS.cased else 'uncased'})"
    )


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    run_cli(main, define_flags)


if __name__ == "__main__":
    cli()
