"""Trains ALBERT's SentencePiece vocabulary (the command: `albert_tf.cli.train_sentencepiece`).

    python -m data_prep.train_sentencepiece --input 'corpus/*.txt' \
        --model_prefix vocab/30k-clean --vocab_size 30000

A unigram model with ALBERT's ids (`<pad>`=0, `<unk>`=1, `[CLS]`=2, `[SEP]`=3,
`[MASK]`=4, then the user-defined symbols), trained on sentences normalised by
the tokenizer's own `preprocess_text`. Sentences are streamed into the trainer,
which keeps a uniform sample of `--input_sentence_size` of them, so memory does
not grow with the corpus.
"""

import logging
import os
from typing import Iterable, Optional, Sequence

import sentencepiece as spm

from albert_tf.tokenization import (
    ALBERT_USER_DEFINED_SYMBOLS,
    CLS_PIECE,
    MASK_PIECE,
    SEP_PIECE,
    SentencePieceTokenizer,
    preprocess_text,
)
from data_prep.documents import ReadStats, read_documents, vocabulary_text
from data_prep.errors import DataPrepError

# SentencePiece drops longer sentences; WikiText paragraphs are split first.
MAX_SENTENCE_BYTES = 1 << 14


def corpus_sentences(paths: Sequence[str], input_format: str, lower: bool) -> Iterable[str]:
    """Normalised sentences of every document in `paths`, streamed."""
    for path in paths:
        stats = ReadStats(path)
        for document in read_documents(path, input_format, stats):
            for sentence in document:
                sentence = preprocess_text(vocabulary_text(sentence, input_format), lower=lower)
                if sentence:
                    yield sentence
        if stats.replaced_bytes:
            logging.warning("%s: %d invalid UTF-8 sequences replaced", path, stats.replaced_bytes)
        if stats.cut_sentences:
            logging.warning(
                "%s: %d over-long sentences cut (%d characters dropped)", path, stats.cut_sentences, stats.cut_chars
            )
        if not stats.documents:
            logging.warning("%s: no text", path)


def train_sentencepiece(
    sentences: Iterable[str],
    model_prefix: str,
    vocab_size: int = 30000,
    input_sentence_size: int = 10_000_000,
    character_coverage: float = 0.99995,
    user_defined_symbols: Sequence[str] = ALBERT_USER_DEFINED_SYMBOLS,
    num_threads: Optional[int] = None,
) -> str:
    """Trains the model from already-normalised sentences; returns the `.model` path.

    Raises:
        DataPrepError: no sentences, or a vocabulary larger than the text supports
            (the message says how large it may be).
    """
    directory = os.path.dirname(os.path.abspath(model_prefix))
    os.makedirs(directory, exist_ok=True)
    counted = _Counting(sentences)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(counted),
            model_prefix=model_prefix,
            vocab_size=vocab_size,
            model_type="unigram",
            pad_id=0,
            unk_id=1,
            bos_id=-1,
            eos_id=-1,
            control_symbols=[CLS_PIECE, SEP_PIECE, MASK_PIECE],
            user_defined_symbols=list(user_defined_symbols),
            character_coverage=character_coverage,
            input_sentence_size=input_sentence_size,
            shuffle_input_sentence=True,
            max_sentence_length=MAX_SENTENCE_BYTES,
            num_threads=num_threads or os.cpu_count() or 1,
            minloglevel=2,
        )
    except RuntimeError as error:
        if not counted.count:
            raise DataPrepError("no text to train SentencePiece on (all inputs empty)") from None
        raise DataPrepError(f"SentencePiece training failed on {counted.count} sentences: {error}") from None
    model_file = model_prefix + ".model"
    SentencePieceTokenizer(model_file)  # proves the ALBERT ids
    return model_file


class _Counting:
    def __init__(self, items):
        self.items, self.count = items, 0

    def __iter__(self):
        for item in self.items:
            self.count += 1
            yield item
