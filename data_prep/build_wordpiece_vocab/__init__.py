"""Builds a BERT-style WordPiece `vocab.txt` from a corpus (the command: `albert_tf.cli.build_wordpiece_vocab`).

    python -m data_prep.build_wordpiece_vocab --input 'corpus/*.txt' --output_file vocab/vocab.txt \
        --vocab_size 21128 [--nodo_lower_case]

The vocabulary learner is tf-text's (`bert_vocab_from_dataset`, the one its
BERT guides use). Text is first normalised by our own `bert_normalize` (the
tokenizer's), so the learner sees exactly the characters the tokenizer will;
the learner's splitting is BERT's (whitespace, punctuation, CJK characters).
The file starts with `[PAD] [UNK] [CLS] [SEP] [MASK]` (ids 0-4, as ALBERT's
SentencePiece ids), every character of the corpus that occurs at least
`--min_character_count` times is kept (so few words become `[UNK]`), and it
holds exactly `--vocab_size` tokens (`[unusedN]` fill what the learner leaves).
"""

import logging
import os
from typing import Iterable, List, Sequence

from albert_tf.tokenization import WORDPIECE_SPECIALS, WordPieceTokenizer, bert_normalize
from data_prep.documents import ReadStats, read_documents, vocabulary_text


def corpus_lines(paths: Sequence[str], input_format: str, lower: bool) -> Iterable[str]:
    """Sentences of every document, normalised as `WordPieceTokenizer` does."""
    for path in paths:
        stats = ReadStats(path)
        for document in read_documents(path, input_format, stats):
            for sentence in document:
                sentence = bert_normalize(vocabulary_text(sentence, input_format), lower).strip()
                if sentence:
                    yield sentence
        if not stats.documents:
            logging.warning("%s: no text", path)


def build_wordpiece_vocab(
    lines: Iterable[str], vocab_size: int, reserved: Sequence[str] = WORDPIECE_SPECIALS, min_character_count: int = 1
) -> List[str]:
    """Exactly `vocab_size` tokens (reserved first) learned from normalised `lines`.

    The learner's size is approximate (within its 5 % slack), and every frequent character is added
    after it, so it is asked again for fewer where it overshoots; what is left is filled with BERT's
    `[unusedN]` placeholders (ids a model can later give to new tokens).

    Raises:
        ValueError: no text, or a `vocab_size` below what the corpus's characters alone need.
    """
    lines = list(lines)
    if not lines:
        raise ValueError("no text to learn a WordPiece vocabulary from (all inputs empty)")
    counts = {}
    for line in lines:
        for char in line:
            if not char.isspace():
                counts[char] = counts.get(char, 0) + 1
    # Every frequent character (and its ## form), so no common word becomes [UNK].
    characters = [
        token
        for char, count in sorted(counts.items(), key=lambda kv: -kv[1])
        if count >= min_character_count
        for token in (char, "##" + char)
    ]
    floor = len(dict.fromkeys(list(reserved) + characters))
    if vocab_size < floor:
        raise ValueError(
            f"--vocab_size {vocab_size}: the reserved tokens and the corpus's {len(characters) // 2} characters "
            f"(each with its ## form) alone need {floor}; raise it, or --min_character_count"
        )
    target = vocab_size
    for _ in range(4):
        learned = _learn(lines, target, reserved)
        tokens = list(dict.fromkeys(learned + characters))
        if len(tokens) <= vocab_size:
            break
        target -= len(tokens) - vocab_size + max(1, vocab_size // 100)
    else:  # the learner never came under: keep the characters, cut the learned pieces that do not fit
        missing = [token for token in dict.fromkeys(characters) if token not in set(learned)]
        tokens = learned[: vocab_size - len(missing)] + missing
    unused = (f"[unused{i}]" for i in range(vocab_size))
    return tokens + [token for token, _ in zip(unused, range(vocab_size - len(tokens)))]


def _learn(lines: List[str], vocab_size: int, reserved: Sequence[str]) -> List[str]:
    """tf-text's learner on `lines` (its size within 5 % of `vocab_size`), reserved tokens first."""
    # TensorFlow only here: data_prep modules import none (Beam workers stay light).
    import tensorflow as tf
    from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset

    dataset = tf.data.Dataset.from_tensor_slices(lines).batch(1024)
    return list(
        bert_vocab_from_dataset.bert_vocab_from_dataset(
            dataset,
            vocab_size=max(len(reserved) + 1, vocab_size),
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
    )


def write_vocab(tokens: Sequence[str], output_file: str) -> str:
    directory = os.path.dirname(os.path.abspath(output_file))
    os.makedirs(directory, exist_ok=True)
    staging = output_file + ".tmp"
    with open(staging, "w", encoding="utf-8") as f:
        f.write("".join(token + "\n" for token in tokens))
    WordPieceTokenizer(staging)  # proves the specials before replacing anything
    os.replace(staging, output_file)
    return output_file
