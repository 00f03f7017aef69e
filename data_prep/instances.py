"""Segments, SOP/NSP pairs and truncation, as ALBERT's `create_instances_from_document`.

Sentences accumulate into a chunk until it reaches the target length; the
chunk is cut at a random sentence boundary into A and B. SOP (default): with
p=0.5 A and B are swapped (label 1). NSP (`random_next_sentence`): with p=0.5 B
comes from another document (label 1). Output: `[CLS] A [SEP] B [SEP]`.

Two deliberate changes from the original, each with a switch back:
  * A chunk of one sentence cannot be cut at a sentence boundary. The
    original then takes B from a random document and labels it 1, even in SOP
    mode (google-research/albert#234), so SOP data holds NSP negatives. Here
    (`one_sentence_chunks="split"`) the sentence is cut at a random word start
    and the halves go through the same SOP swap; `"random_document"` keeps the
    original behaviour.
  * The original draws the short target length once per document, so long
    documents with a short target flood the data with short sequences; here it
    is drawn per chunk, so about `short_seq_prob` of the sequences are short.
    `short_target_per_document=True` keeps the original.

Example:

>>> import random
>>> from data_prep.masking import MaskingOptions, NgramMasker
>>> pieces = ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"] + ["▁w%d" % i for i in range(20)]
>>> builder = InstanceBuilder(NgramMasker(pieces, MaskingOptions()), InstanceOptions(max_seq_length=16))
>>> document = [[5, 6, 7], [8, 9], [10, 11, 12, 13]]
>>> instance = builder.build(document, [document], 0, random.Random(1))[0]
>>> instance.input_ids[0], instance.input_ids.count(3)
(2, 2)
"""

import dataclasses
from typing import List, Sequence

from data_prep.errors import DataPrepError
from data_prep.masking import NgramMasker

ONE_SENTENCE_CHUNK_MODES = ("split", "random_document")


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """Pair-building flags (the original's defaults, plus our two switches)."""

    max_seq_length: int = 512
    short_seq_prob: float = 0.1
    random_next_sentence: bool = False
    one_sentence_chunks: str = "split"
    short_target_per_document: bool = False

    def __post_init__(self):
        if self.max_seq_length < 5:
            raise DataPrepError(f"max_seq_length must be at least 5, got {self.max_seq_length}")
        if self.one_sentence_chunks not in ONE_SENTENCE_CHUNK_MODES:
            raise DataPrepError(f"one_sentence_chunks must be one of {ONE_SENTENCE_CHUNK_MODES}")

    @property
    def needs_other_documents(self) -> bool:
        return self.random_next_sentence or self.one_sentence_chunks == "random_document"


@dataclasses.dataclass
class Instance:
    """One training sequence before padding."""

    input_ids: List[int]
    segment_ids: List[int]
    token_boundary: List[int]
    masked_lm_positions: List[int]
    masked_lm_ids: List[int]
    is_random_next: bool
    short_target: bool
    drawn_ngrams: List[int]
    span_words: List[int]


def truncate_seq_pair(tokens_a: List[int], tokens_b: List[int], max_num_tokens: int, rng) -> None:
    """Trims the longer segment (ties: B) from a random end until the pair fits.

    The same random draws as the original's one-token-at-a-time loop, applied
    as two slices per segment.
    """
    len_a, len_b = len(tokens_a), len(tokens_b)
    front = {"a": 0, "b": 0}
    back = {"a": 0, "b": 0}
    while len_a + len_b > max_num_tokens:
        side = "a" if len_a > len_b else "b"
        if rng.random() < 0.5:
            front[side] += 1
        else:
            back[side] += 1
        if side == "a":
            len_a -= 1
        else:
            len_b -= 1
    for side, tokens in (("a", tokens_a), ("b", tokens_b)):
        if front[side] or back[side]:
            tokens[:] = tokens[front[side] : len(tokens) - back[side]]


class InstanceBuilder:
    """Turns one tokenized document into masked training instances."""

    def __init__(self, masker: NgramMasker, options: InstanceOptions):
        self.masker = masker
        self.options = options

    def _target_length(self, rng) -> int:
        max_num_tokens = self.options.max_seq_length - 3
        if rng.random() < self.options.short_seq_prob:
            return rng.randint(2, max_num_tokens)
        return max_num_tokens

    def _split_sentence(self, sentence: Sequence[int], rng):
        """Cuts one sentence at a random word start (any token if it has none)."""
        starts = [i for i in range(1, len(sentence)) if self.masker.is_start[sentence[i]]]
        cut = rng.choice(starts) if starts else rng.randint(1, len(sentence) - 1)
        return list(sentence[:cut]), list(sentence[cut:])

    def _random_segment(self, pool, document_index, target_b_length, rng) -> List[int]:
        """B from another document of the pool (10 tries to avoid our own, as the original)."""
        for _ in range(10):
            random_index = rng.randint(0, len(pool) - 1)
            if random_index != document_index:
                break
        random_document = pool[random_index]
        tokens_b = []
        for sentence in random_document[rng.randint(0, len(random_document) - 1) :]:
            tokens_b.extend(sentence)
            if len(tokens_b) >= target_b_length:
                break
        return tokens_b

    def build(
        self, document: Sequence[Sequence[int]], pool: Sequence[Sequence[Sequence[int]]], document_index: int, rng
    ) -> List[Instance]:
        """All instances of `document` (one pass; call once per dupe).

        Args:
            document: sentences as id lists (no specials).
            pool: documents that random B segments may come from; `document`
                is `pool[document_index]`.
            document_index: where `document` sits in `pool`.
            rng: a `random.Random` seeded for this document and dupe.
        """
        options = self.options
        max_num_tokens = options.max_seq_length - 3
        target = self._target_length(rng)
        instances = []
        chunk: List[Sequence[int]] = []
        chunk_length = 0
        i = 0
        while i < len(document):
            chunk.append(document[i])
            chunk_length += len(document[i])
            if i == len(document) - 1 or chunk_length >= target:
                pair = self._make_pair(chunk, pool, document_index, target, rng)
                if pair is not None:
                    tokens_a, tokens_b, is_random_next, unused = pair
                    i -= unused
                    instances.append(
                        self._instance(tokens_a, tokens_b, is_random_next, target < max_num_tokens, max_num_tokens, rng)
                    )
                chunk, chunk_length = [], 0
                if not options.short_target_per_document:
                    target = self._target_length(rng)
            i += 1
        return instances

    def _make_pair(self, chunk, pool, document_index, target, rng):
        options = self.options
        use_random_document = False
        if len(chunk) == 1:
            if options.one_sentence_chunks == "random_document" or options.random_next_sentence:
                use_random_document = len(pool) > 1
            elif len(chunk[0]) < 2:
                return None  # one token: no pair to make
        elif options.random_next_sentence and rng.random() < 0.5:
            use_random_document = True
        a_end = 1 if len(chunk) == 1 else rng.randint(1, len(chunk) - 1)
        if use_random_document:
            tokens_a = [t for sentence in chunk[:a_end] for t in sentence]
            tokens_b = self._random_segment(pool, document_index, target - len(tokens_a), rng)
            return tokens_a, tokens_b, True, len(chunk) - a_end  # unused sentences go back
        if len(chunk) == 1:
            if len(chunk[0]) < 2:
                return None
            tokens_a, tokens_b = self._split_sentence(chunk[0], rng)
        else:
            tokens_a = [t for sentence in chunk[:a_end] for t in sentence]
            tokens_b = [t for sentence in chunk[a_end:] for t in sentence]
        if not options.random_next_sentence and rng.random() < 0.5:
            return tokens_b, tokens_a, True, 0  # SOP: swapped
        return tokens_a, tokens_b, False, 0

    def _instance(self, tokens_a, tokens_b, is_random_next, short_target, max_num_tokens, rng):
        truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
        masker = self.masker
        ids = [masker.cls_id] + tokens_a + [masker.sep_id] + tokens_b + [masker.sep_id]
        segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
        masked = masker.mask(ids, rng)
        return Instance(
            masked.input_ids,
            segment_ids,
            masked.token_boundary,
            masked.positions,
            masked.labels,
            is_random_next,
            short_target,
            masked.drawn_ngrams,
            masked.span_words,
        )
