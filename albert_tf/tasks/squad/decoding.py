"""Model outputs → answer texts: n-best spans per question over its windows, v2's null scores.

`decode` is the v1 head's (start × end logits); `decode_v2` the answerability head's beam
search; predicted pieces map back to the original characters as the original aligns them.
"""

import collections
import functools
from typing import Dict, List, Optional, Tuple

import numpy as np

from albert_tf.tasks.squad.reading import SquadExample
from albert_tf.tasks.squad.windows import Feature


def convert_index(index, pos, m=None, is_start=True):
    """The original's `squad_utils._convert_index`: a character for a piece character left unaligned."""
    if index[pos] is not None:
        return index[pos]
    n = len(index)
    rear = pos
    while rear < n - 1 and index[rear] is None:
        rear += 1
    front = pos
    while front > 0 and index[front] is None:
        front -= 1
    if index[front] is None:
        if index[rear] >= 1:
            return 0 if is_start else index[rear] - 1
        return index[rear]
    if index[rear] is None:
        if m is not None and index[front] < m - 1:
            return index[front] + 1 if is_start else m - 1
        return index[front]
    if is_start:
        return index[front] + 1 if index[rear] > index[front] + 1 else index[rear]
    return index[rear] - 1 if index[rear] > index[front] + 1 else index[front]


@functools.lru_cache(maxsize=1 << 16)
def _piece_char_spans(tokenizer, text: str) -> Optional[Tuple[Tuple[int, int], ...]]:
    """(first, last) character of `text` for each piece of its last word, as the original aligns them.

    `text` is a word, possibly after the whitespace character before it (the
    original aligns a piece's "▁" to that space). Characters are matched when
    the character, normalised alone, equals the piece character (the
    original's longest-common-subsequence alignment, here within the word);
    unmatched piece characters map by `convert_index`. None when nothing
    matches.
    """
    tokens = tokenizer.convert_ids_to_tokens(tokenizer.encode(text))
    wordpiece = not hasattr(tokenizer, "sp_model")
    texts = [(t[2:] if wordpiece and t.startswith("##") else t).replace("\u2581", " ") for t in tokens]
    if wordpiece and text[:1].isspace() and texts:
        texts[0] = " " + texts[0]
    if not texts or not all(texts):
        return None
    chars = "".join(texts)
    normalized = [" " if c.isspace() else tokenizer.preprocess(c) for c in text]
    n, m = len(text), len(chars)
    f = np.zeros((n, m), "int32")
    g = {}
    for i in range(n):  # as the original's _lcs_match, without its band
        for j in range(m):
            if i > 0:
                g[(i, j)] = 0
                f[i, j] = f[i - 1, j]
            if j > 0 and f[i, j - 1] > f[i, j]:
                g[(i, j)] = 1
                f[i, j] = f[i, j - 1]
            f_prev = f[i - 1, j - 1] if i > 0 and j > 0 else 0
            if normalized[i] == chars[j] and f_prev + 1 > f[i, j]:
                g[(i, j)] = 2
                f[i, j] = f_prev + 1
    chartok_to_orig = [None] * m
    i, j = n - 1, m - 1
    while i >= 0 and j >= 0 and (i, j) in g:
        if g[(i, j)] == 2:
            chartok_to_orig[j] = i
            i, j = i - 1, j - 1
        elif g[(i, j)] == 1:
            j -= 1
        else:
            i -= 1
    if all(v is None for v in chartok_to_orig):
        return None
    spans, at = [], 0
    for piece in texts:
        first, last = at, at + len(piece) - 1
        spans.append((convert_index(chartok_to_orig, first, n, True), convert_index(chartok_to_orig, last, n, False)))
        at += len(piece)
    return tuple(spans)


def _word_char_spans(example: SquadExample, tokenizer, word: int):
    """(offset in the context, piece spans) of a word; see `_piece_char_spans`."""
    begin = example.word_starts[word]
    end = begin + len(example.words[word])
    if begin > 0 and example.context[begin - 1].isspace():
        begin -= 1
    return begin, _piece_char_spans(tokenizer, example.context[begin:end])


def answer_text(example: SquadExample, tokenizer, feature: Feature, start: int, end: int) -> str:
    """The context's characters from the start piece's first to the end piece's last, stripped.

    As the original's `write_predictions`: `paragraph_text[tok_start_to_orig_index[s]:
    tok_end_to_orig_index[e] + 1].strip()`, the pieces aligned to characters as
    its `convert_examples_to_features` does (see `_piece_char_spans`). A word whose
    pieces cannot be aligned at all gives whole words.
    """
    first_word, last_word = feature.piece_to_word[start], feature.piece_to_word[end]
    first_base, first_spans = _word_char_spans(example, tokenizer, first_word)
    last_base, last_spans = _word_char_spans(example, tokenizer, last_word)
    if first_spans and last_spans and start in feature.piece_in_word and end in feature.piece_in_word:
        begin = first_base + first_spans[feature.piece_in_word[start]][0]
        finish = last_base + last_spans[feature.piece_in_word[end]][1] + 1
        if begin < finish:
            return example.context[begin:finish].strip()
    begin = example.word_starts[first_word]
    return example.context[begin : example.word_starts[last_word] + len(example.words[last_word])]


def _valid_span(feature: Feature, start: int, end: int, max_answer_length: int) -> bool:
    return (
        start in feature.piece_to_word
        and end in feature.piece_to_word
        and start <= end
        and end - start + 1 <= max_answer_length
        and feature.max_context.get(start, False)
    )


def _nbest(example: SquadExample, features: List[Feature], candidates, tokenizer, n_best_size: int) -> List[Dict]:
    """Distinct answer texts of the best `(score, feature index, start, end)` candidates, with probabilities."""
    candidates = sorted(candidates, key=lambda c: -c[0])
    seen, entries = set(), []
    for score, index, s, e in candidates:
        text = answer_text(example, tokenizer, features[index], s, e)
        if text in seen:
            continue
        seen.add(text)
        entries.append({"text": text, "score": score})
        if len(entries) == n_best_size:
            break
    if not entries:
        entries = [{"text": "", "score": 0.0}]
    scores = np.array([entry["score"] for entry in entries])
    probabilities = np.exp(scores - scores.max())
    probabilities /= probabilities.sum()
    for entry, probability in zip(entries, probabilities):
        entry["probability"] = float(probability)
    return entries


def _by_example(features: List[Feature]) -> Dict[int, List[int]]:
    by_example = collections.defaultdict(list)
    for index, feature in enumerate(features):
        by_example[feature.example_index].append(index)
    return by_example


def decode(
    examples: List[SquadExample],
    features: List[Feature],
    start_logits,
    end_logits,
    tokenizer,
    n_best_size: int = 20,
    max_answer_length: int = 30,
) -> Tuple[Dict, Dict, Dict]:
    """v1 head: (best answer per id, n-best lists per id, null score difference per id).

    The null score of a question is the lowest [CLS] start+end score over its
    windows (v2 with this head: answer "" when `null - best > threshold`, see
    `apply_threshold`).
    """
    by_example = _by_example(features)
    predictions, nbest, null_diff = {}, {}, {}
    for example_index, example in enumerate(examples):
        candidates, null = [], None
        for index in by_example[example_index]:
            feature = features[index]
            start, end = np.asarray(start_logits[index]), np.asarray(end_logits[index])
            score_null = float(start[0] + end[0])
            null = score_null if null is None else min(null, score_null)
            for s in np.argsort(-start)[:n_best_size]:
                for e in np.argsort(-end)[:n_best_size]:
                    if _valid_span(feature, int(s), int(e), max_answer_length):
                        candidates.append((float(start[s] + end[e]), index, int(s), int(e)))
        entries = _nbest(example, features, candidates, tokenizer, n_best_size)
        predictions[example.qas_id] = entries[0]["text"]
        nbest[example.qas_id] = entries
        null_diff[example.qas_id] = (null if null is not None else 0.0) - entries[0]["score"]
    return predictions, nbest, null_diff


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    logits = np.asarray(logits, "float64")
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def decode_v2(
    examples: List[SquadExample],
    features: List[Feature],
    outputs: Dict[str, np.ndarray],
    tokenizer,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    end_n_top: int = 5,
) -> Tuple[Dict, Dict, Dict]:
    """Answerability head (`AlbertSpanQAv2`): (best span per id, n-best lists, null odds per id).

    As the original: each of the model's top starts with its top `end_n_top`
    ends, scored by start + end log-probability; the null odds of a question
    is its lowest `cls_logits` over windows (answer "" above the threshold).
    """
    by_example = _by_example(features)
    start_log_probs = _log_softmax(outputs["start_logits"])
    end_log_probs = _log_softmax(outputs["end_logits"])
    predictions, nbest, null_odds = {}, {}, {}
    for example_index, example in enumerate(examples):
        candidates, null = [], None
        for index in by_example[example_index]:
            feature = features[index]
            cls_logit = float(outputs["cls_logits"][index])
            null = cls_logit if null is None else min(null, cls_logit)
            for k, s in enumerate(outputs["start_positions"][index]):
                for e in np.argsort(-end_log_probs[index, k])[:end_n_top]:
                    if _valid_span(feature, int(s), int(e), max_answer_length):
                        score = float(start_log_probs[index, s] + end_log_probs[index, k, e])
                        candidates.append((score, index, int(s), int(e)))
        entries = _nbest(example, features, candidates, tokenizer, n_best_size)
        predictions[example.qas_id] = entries[0]["text"]
        nbest[example.qas_id] = entries
        null_odds[example.qas_id] = null if null is not None else 0.0
    return predictions, nbest, null_odds


def apply_threshold(predictions: Dict[str, str], null_diff: Dict[str, float], threshold: float) -> Dict[str, str]:
    """v2: no answer where the null score (difference or odds) is at or above `threshold`.

    The original's `write_predictions_v2` answers only when `score_diff <
    null_score_diff_threshold`, so a question exactly at the threshold gets "".
    """
    return {qid: ("" if null_diff[qid] >= threshold else text) for qid, text in predictions.items()}
