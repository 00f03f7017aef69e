"""Builds a BERT-style WordPiece `vocab.txt` from a corpus (the command: `albert_tf.cli.build_wordpiece_vocab`).

    python -m data_prep.build_wordpiece_vocab --input 'corpus/*.txt' --output_file vocab/vocab.txt \
        --vocab_size 21128 [--nodo_lower_case]

The vocabulary learner is tf-text's (`bert_vocab_from_dataset`, the one its
BERT guides use). Text is first normalised by our own `bert_normalize` (the
tokenizer's), so the learner sees exactly the characters the tokenizer will;
the learner's splitting is BERT's (whitespace, punctuation, CJK characters).
The file starts with `[PAD] [UNK] [CLS] [SEP] [MASK]` (ids 0-4, as ALBERT's
SentencePiece ids), and every character of the corpus that occurs at least
`--min_character_count` times is kept (so few words become `[UNK]`).
"""

import logging
import os
from typing import Iterable, List, Sequence

from albert_tf.tokenization import WORDPIECE_SPECIALS, WordPieceTokenizer, bert_normalize
from data_prep.documents import ReadStats, read_documents


def corpus_lines(paths: Sequence[str], input_format: str, lower: bool) -> Iterable[str]:
    """Sentences of every document, normalised as `WordPieceTokenizer` does."""
    for path in paths:
        stats = ReadStats(path)
        for document in read_documents(path, input_format, stats):
            for sentence in document:
                sentence = bert_normalize(sentence, lower).strip()
                if sentence:
                    yield sentence
        if not stats.documents:
            logging.warning("%s: no text", path)


def build_wordpiece_vocab(
    lines: Iterable[str], vocab_size: int, reserved: Sequence[str] = WORDPIECE_SPECIALS, min_character_count: int = 1
) -> List[str]:
    """The vocabulary (reserved tokens first) learned from normalised `lines`.

    Raises:
        ValueError: no text.
    """
    # TensorFlow only here: data_prep modules import none (Beam workers stay light).
    import tensorflow as tf
    from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset

    lines = list(lines)
    if not lines:
        raise ValueError("no text to learn a WordPiece vocabulary from (all inputs empty)")
    dataset = tf.data.Dataset.from_tensor_slices(lines).batch(1024)
    vocab = bert_vocab_from_dataset.bert_vocab_from_dataset(
        dataset,
        vocab_size=vocab_size,
        reserved_tokens=list(reserved),
        bert_tokenizer_params={"lower_case": False},  # already normalised
        learn_params={
            "max_token_length": 50,
            "max_unique_chars": 20000,
            "upper_thresh": 10_000_000,
            "lower_thresh": 2,
            "num_iterations": 4,
            "slack_ratio": 0.05,
            "include_joiner_token": True,
            "joiner": "##",
        },
    )
    # Guarantee every frequent character (and its ## form) so no common word becomes [UNK].
    counts = {}
    for line in lines:
        for char in line:
            if not char.isspace():
                counts[char] = counts.get(char, 0) + 1
    present = set(vocab)
    extra = [
        token
        for char, count in sorted(counts.items(), key=lambda kv: -kv[1])
        if count >= min_character_count
        for token in (char, "##" + char)
        if token not in present
    ]
    return list(dict.fromkeys(list(vocab) + extra))


def write_vocab(tokens: Sequence[str], output_file: str) -> str:
    directory = os.path.dirname(os.path.abspath(output_file))
    os.makedirs(directory, exist_ok=True)
    staging = output_file + ".tmp"
    with open(staging, "w", encoding="utf-8") as f:
        f.write("".join(token + "\n" for token in tokens))
    WordPieceTokenizer(staging)  # proves the specials before replacing anything
    os.replace(staging, output_file)
    return output_file
