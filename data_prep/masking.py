"""n-gram whole-word masking, as ALBERT's `create_masked_lm_predictions`.

Word units are pieces grouped by the vocabulary kind's word-start rule (its
registry entry's `is_word_start`; SentencePiece: `_is_start_piece_sp`;
WordPiece: BERT's `##` continuations);
spans of n ≤ `ngram` units are drawn with p(n) ∝ 1/n (6/11, 3/11, 2/11), up to
`round(len·masked_lm_prob)` tokens and at most `max_predictions_per_seq`; each
chosen token becomes [MASK] (80%), stays (10%) or becomes a uniformly random
piece (10%, specials included, as the original).

One deliberate change: the original draws n from NumPy's global, unseeded
RNG, so its data cannot be reproduced; here n comes from the same seeded
`random.Random` as every other choice.

Example:

>>> import random
>>> pieces = ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]", "▁the", "▁ca", "t", "▁sat"]
>>> masker = NgramMasker(pieces, MaskingOptions(masked_lm_prob=0.5))
>>> result = masker.mask([2, 5, 6, 7, 8, 3], random.Random(0))
>>> sorted(result.positions) == result.positions and 0 not in result.positions
True
>>> result.token_boundary
[1, 1, 1, 0, 1, 1]
"""

import dataclasses
import itertools
from typing import List, Sequence

from albert_tf.tokenization import kind_named


@dataclasses.dataclass(frozen=True)
class MaskingOptions:
    """The original's masking flags, with its defaults."""

    masked_lm_prob: float = 0.15
    max_predictions_per_seq: int = 20
    ngram: int = 3
    favor_shorter_ngram: bool = True
    do_whole_word_mask: bool = True

    def ngram_weights(self) -> List[float]:
        weights = [1.0 / n for n in range(1, self.ngram + 1)]
        return weights if self.favor_shorter_ngram else weights[::-1]


@dataclasses.dataclass
class MaskedSequence:
    """One masked sequence: ids after replacement and what to predict."""

    input_ids: List[int]
    positions: List[int]
    labels: List[int]
    token_boundary: List[int]
    drawn_ngrams: List[int]  # every n drawn, accepted or not: the p(n) ∝ 1/n draw itself
    span_words: List[int]  # words in each accepted span


class NgramMasker:
    """Masks id sequences; built once per vocabulary.

    Args:
        pieces: every piece of the vocabulary in id order.
        options: the masking flags.
        vocab_type: the tokenizer kind's name (its registry entry gives the word-start rule).
    """

    def __init__(self, pieces: Sequence[str], options: MaskingOptions, vocab_type: str = "sentencepiece"):
        self.options = options
        self.vocab_size = len(pieces)
        word_start = kind_named(vocab_type).is_word_start
        self.is_start = [word_start(p) for p in pieces]
        index = {p: i for i, p in enumerate(pieces)}
        self.cls_id, self.sep_id, self.mask_id = index["[CLS]"], index["[SEP]"], index["[MASK]"]
        self._ngrams = list(range(1, options.ngram + 1))
        self._cumulative = list(itertools.accumulate(options.ngram_weights()))

    def word_units(self, ids: Sequence[int]):
        """Candidate units (lists of positions) and the token_boundary feature."""
        units, boundary = [], [0] * len(ids)
        whole_word = self.options.do_whole_word_mask
        is_start, cls_id, sep_id = self.is_start, self.cls_id, self.sep_id
        for i, token in enumerate(ids):
            if token == cls_id or token == sep_id:
                boundary[i] = 1
            elif is_start[token]:
                units.append([i])
                boundary[i] = 1
            elif whole_word and units:
                units[-1].append(i)
            else:
                units.append([i])
        return units, boundary

    def mask(self, ids: Sequence[int], rng) -> MaskedSequence:
        """Chooses spans and replaces their tokens (see the module docstring)."""
        options = self.options
        units, boundary = self.word_units(ids)
        output = list(ids)
        if options.masked_lm_prob == 0:
            return MaskedSequence(output, [], [], boundary, [], [])
        budget = min(options.max_predictions_per_seq, max(1, int(round(len(ids) * options.masked_lm_prob))))
        # Spans start at units in random order: a lazy Fisher-Yates shuffle, since
        # the budget is usually met long before every unit has been visited.
        starts = list(range(len(units)))
        covered = set()
        masked = []  # (position, original id)
        drawn, span_words = [], []
        for k in range(len(starts)):
            if len(masked) >= budget:
                break
            j = k + rng.randrange(len(starts) - k)
            starts[k], starts[j] = starts[j], starts[k]
            start = starts[k]
            n = rng.choices(self._ngrams, cum_weights=self._cumulative)[0]
            drawn.append(n)
            # Fall back to shorter spans while over budget, as the original.
            span = [p for unit in units[start : start + n] for p in unit]
            while len(masked) + len(span) > budget and n > 1:
                n -= 1
                span = [p for unit in units[start : start + n] for p in unit]
            if len(masked) + len(span) > budget or any(p in covered for p in span):
                continue
            span_words.append(len(units[start : start + n]))
            for position in span:
                covered.add(position)
                if rng.random() < 0.8:
                    output[position] = self.mask_id
                elif rng.random() < 0.5:
                    pass  # keep the original token
                else:
                    output[position] = rng.randrange(self.vocab_size)
                masked.append((position, ids[position]))
        masked.sort()
        return MaskedSequence(output, [p for p, _ in masked], [t for _, t in masked], boundary, drawn, span_words)
