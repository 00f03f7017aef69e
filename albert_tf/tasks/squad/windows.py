"""SQuAD examples → model windows: `[CLS] question [SEP] context window [SEP]`, `doc_stride` apart.

Each whitespace word is encoded on its own (SentencePiece never lets a piece cross
whitespace; BERT's basic tokenizer splits on whitespace first), so every piece knows its
word. A training window without the answer gets start = end = 0 (the [CLS] position).
"""

import dataclasses
from typing import Dict, List

import numpy as np

from albert_tf.tasks.squad.reading import SquadExample


@dataclasses.dataclass
class Feature:
    example_index: int
    input_ids: List[int]
    segment_ids: List[int]
    piece_to_word: Dict[int, int]  # position in input_ids → word index (context positions only)
    max_context: Dict[int, bool]
    start_position: int = 0
    end_position: int = 0
    piece_in_word: Dict[int, int] = dataclasses.field(default_factory=dict)  # position → piece index in its word


def encode_words(tokenizer, words: List[str]):
    pieces, piece_word = [], []
    for index, word in enumerate(words):
        ids = tokenizer.encode(word)
        pieces.extend(ids)
        piece_word.extend([index] * len(ids))
    return pieces, piece_word


def _tighten(tokenizer, pieces, start, end, answer_text):
    """The smallest piece span inside [start, end] whose ids equal the answer's own encoding."""
    target = tokenizer.encode(answer_text)
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if pieces[new_start : new_end + 1] == target:
                return new_start, new_end
    return start, end


def convert_examples(
    examples: List[SquadExample],
    tokenizer,
    max_seq_length: int,
    doc_stride: int,
    max_query_length: int,
    is_training: bool,
) -> List[Feature]:
    features = []
    for example_index, example in enumerate(examples):
        query = tokenizer.encode(example.question)[:max_query_length]
        pieces, piece_word = encode_words(tokenizer, example.words)
        piece_in_word = [0] * len(pieces)
        for i in range(1, len(pieces)):
            piece_in_word[i] = piece_in_word[i - 1] + 1 if piece_word[i] == piece_word[i - 1] else 0
        answer_span = None
        if is_training and not example.is_impossible:
            first = piece_word.index(example.start_word)
            last = len(piece_word) - 1 - piece_word[::-1].index(example.end_word)
            answer_span = _tighten(tokenizer, pieces, first, last, example.answer_text)
        window = max_seq_length - len(query) - 3
        spans, begin = [], 0
        while True:
            length = min(window, len(pieces) - begin)
            spans.append((begin, length))
            if begin + length >= len(pieces):
                break
            begin += min(length, doc_stride)
        for span_index, (begin, length) in enumerate(spans):
            input_ids = [tokenizer.cls_id] + query + [tokenizer.sep_id]
            offset = len(input_ids)
            piece_to_word, max_context, in_word = {}, {}, {}
            for i in range(length):
                piece = begin + i
                piece_to_word[offset + i] = piece_word[piece]
                in_word[offset + i] = piece_in_word[piece]
                max_context[offset + i] = _is_max_context(spans, span_index, piece)
            input_ids += pieces[begin : begin + length] + [tokenizer.sep_id]
            segment_ids = [0] * offset + [1] * (length + 1)
            feature = Feature(example_index, input_ids, segment_ids, piece_to_word, max_context, piece_in_word=in_word)
            if answer_span is not None and begin <= answer_span[0] and answer_span[1] < begin + length:
                feature.start_position = answer_span[0] - begin + offset
                feature.end_position = answer_span[1] - begin + offset
            features.append(feature)
    return features


def _is_max_context(spans, span_index, position) -> bool:
    """BERT's rule: the window where the piece has the most context on its shorter side."""
    best_score, best_index = None, None
    for index, (begin, length) in enumerate(spans):
        end = begin + length - 1
        if position < begin or position > end:
            continue
        score = min(position - begin, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return best_index == span_index


def feature_arrays(features: List[Feature], max_seq_length: int) -> Dict[str, np.ndarray]:
    arrays = {
        name: np.zeros((len(features), max_seq_length), "int32") for name in ("input_ids", "input_mask", "segment_ids")
    }
    for i, feature in enumerate(features):
        n = len(feature.input_ids)
        arrays["input_ids"][i, :n] = feature.input_ids
        arrays["input_mask"][i, :n] = 1
        arrays["segment_ids"][i, :n] = feature.segment_ids
    return arrays
