"""Builds a BERT-style WordPiece `vocab.txt` from a corpus (the command: `albert_tf.cli.build_wordpiece_vocab`).

    python -m data_prep.build_wordpiece_vocab --input 'corpus/*.txt' --output_file vocab/vocab.txt \
        --vocab_size 21128 [--nodo_lower_case]

The vocabulary learner is tf-text's (the one behind `bert_vocab_from_dataset`, which its
BERT guides use), with its count threshold searched here. Text is first normalised by our own `bert_normalize` (the
tokenizer's), so the learner sees exactly the characters the tokenizer will;
the learner's splitting is BERT's (whitespace, punctuation, CJK characters).
The file starts with `[PAD] [UNK] [CLS] [SEP] [MASK]` (ids 0-4, as ALBERT's
SentencePiece ids), every character of the corpus that occurs at least
`--min_character_count` times is kept (so few words become `[UNK]`), and it
holds exactly `--vocab_size` tokens: the learner is run at a few thresholds until
its vocabulary is within 3 % of the size, then cut to it, or filled with `[unusedN]`
placeholders (said in a note) when the corpus has fewer pieces.
"""

import logging
import math
import os
from typing import Callable, Dict, Iterable, List, Sequence

from albert_tf.tokenization import WORDPIECE_SPECIALS, WordPieceTokenizer, bert_normalize
from data_prep.documents import ReadStats, read_documents, vocabulary_text
from data_prep.errors import DataPrepError


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


# How far from --vocab_size a learned vocabulary may land and be taken (cut to size, or filled with [unusedN]).
SLACK = 0.03
MAX_TRIES = 10  # learner passes (each a few seconds on a few MB): a bounded search on its count threshold
PLACEHOLDER = "[unused{}]"
LEARN_PARAMS = {
    "max_token_length": 50,
    "max_unique_chars": 20000,
    "num_iterations": 4,
    "include_joiner_token": True,
    "joiner": "##",
}
LOWEST_THRESHOLD = 2  # a piece seen once is the corpus's noise


def build_wordpiece_vocab(
    lines: Iterable[str],
    vocab_size: int,
    reserved: Sequence[str] = WORDPIECE_SPECIALS,
    min_character_count: int = 1,
    note: Callable[[str], None] = lambda line: None,
) -> List[str]:
    """Exactly `vocab_size` tokens (reserved first) learned from normalised `lines`.

    The learner keeps the pieces seen at least a threshold number of times; the threshold is searched
    (bisection on its logarithm, at most `MAX_TRIES` learner passes) for a vocabulary within `SLACK` of
    `vocab_size`, with every frequent character. A larger one loses its rarest pieces; a smaller one
    (or the largest the corpus gives) is filled with BERT's `[unusedN]` placeholders (ids a model can
    later give to new tokens). `note` is told of each learner pass.

    Raises:
        DataPrepError: no text, or a `vocab_size` below what the corpus's characters alone need.
    """
    lines = list(lines)
    if not lines:
        raise DataPrepError("no text to learn a WordPiece vocabulary from (all inputs empty)")
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
        raise DataPrepError(
            f"--vocab_size {vocab_size}: the reserved tokens and the corpus's {len(characters) // 2} characters "
            f"(each with its ## form) alone need {floor}; raise it, or --min_character_count"
        )
    word_counts = _count_words(lines)
    note(f"{len(lines):,} lines, {len(word_counts):,} distinct words; searching the learner's threshold")
    low, high = LOWEST_THRESHOLD, max(LOWEST_THRESHOLD, max(word_counts.values()))
    over = under = None  # the closest vocabularies above and below vocab_size
    for _ in range(MAX_TRIES):
        threshold = min(max(round(math.sqrt(low * high)), low), high)
        tokens = list(dict.fromkeys(_learn(word_counts, threshold, reserved) + characters))
        note(f"pieces seen at least {threshold:,} times: {len(tokens):,} tokens (--vocab_size {vocab_size:,})")
        if len(tokens) > vocab_size:
            over, low = tokens, threshold + 1
        else:
            under, high = tokens, threshold - 1
        if abs(len(tokens) - vocab_size) <= SLACK * vocab_size or low > high:
            break

    def close(tokens):
        return tokens is not None and abs(len(tokens) - vocab_size) <= SLACK * vocab_size

    # Cut the rarest pieces of the larger one, unless only the smaller one is close (or the corpus has no more).
    if over is not None and (close(over) or not close(under)):
        return _cut(over, vocab_size, set(reserved) | set(characters))
    return under + [PLACEHOLDER.format(i) for i in range(vocab_size - len(under))]


def placeholders(tokens: Sequence[str]) -> int:
    """How many of `tokens` are the `[unusedN]` placeholders `build_wordpiece_vocab` filled in."""
    return len(set(tokens) & {PLACEHOLDER.format(i) for i in range(len(tokens))})


def _cut(tokens: List[str], size: int, required: set) -> List[str]:
    """`tokens` without its last (rarest) pieces beyond `size`; the reserved tokens and characters stay."""
    dropped = set([token for token in tokens if token not in required][::-1][: len(tokens) - size])
    return [token for token in tokens if token not in dropped]


def _count_words(lines: List[str]) -> Dict[str, int]:
    """How often each word occurs, words split as BERT splits them (the learner's own splitter)."""
    # TensorFlow only here: data_prep modules import none (Beam workers stay light).
    import tensorflow as tf
    from tensorflow_text.python.ops import bert_tokenizer
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    splitter = bert_tokenizer.BasicTokenizer(lower_case=False)  # already normalised
    return learner.count_words(tf.data.Dataset.from_tensor_slices(lines).batch(1024).map(splitter.tokenize))


def _learn(word_counts: Dict[str, int], threshold: int, reserved: Sequence[str]) -> List[str]:
    """tf-text's learner keeping the pieces seen at least `threshold` times (its search pinned there)."""
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    # With both bounds at `threshold` its bisection ends at once: one pass at that threshold.
    return list(
        learner.learn(
            word_counts,
            1,
            list(reserved),
            upper_thresh=threshold,
            lower_thresh=threshold,
            **LEARN_PARAMS,
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
