"""SQuAD: reading, SentencePiece-aware features with doc-stride windows, n-best decoding, official metrics.

Alignment: the context is split on whitespace into words (character offsets
kept) and each word is encoded on its own. SentencePiece never lets a piece
cross whitespace, so these pieces are exactly those of the whole context, and
each piece knows its word: answers map to pieces exactly, and predicted
pieces map back to the original characters. Inside a word (e.g. "$5" in
"($5)") the answer span is tightened to the pieces whose text matches the
answer, as BERT's `_improve_answer_span`.
The same holds for WordPiece vocabularies: BERT's basic tokenizer splits
on whitespace before anything else.

Windows: `[CLS] question [SEP] context window [SEP]`, question truncated to
`max_query_length`, windows `doc_stride` pieces apart; a training window
without the answer gets start = end = 0 (the [CLS] position), as the original.

The metrics are the official evaluation scripts' (v1.1 and v2.0), reimplemented
with the same normalisation (lowercase, punctuation and articles dropped).

Example:

>>> normalize_answer("The  Eiffel Tower!")
'eiffel tower'
>>> round(f1_score("eiffel tower in paris", "the Eiffel Tower"), 3)
0.667
"""

import collections
import dataclasses
import functools
import json
import os
import re
import string
from typing import Dict, List, Optional, Tuple

import numpy as np

from albert_tf import finetuning
from albert_tf.errors import AlbertError
from albert_tf.models.span_qa import AlbertSpanQA
from albert_tf.models.span_qa_answerability import START_POSITIONS, AlbertSpanQAv2
from albert_tf.range_checks import check_ranges
from albert_tf.tasks.base import Encoded, ReadReport, Task
from albert_tf.tasks.text_files import decode_replacing


class SquadDataError(AlbertError, ValueError):
    """A SQuAD file that cannot be used; the message names the file and question ids."""


@dataclasses.dataclass
class SquadExample:
    qas_id: str
    question: str
    context: str
    words: List[str]
    word_starts: List[int]  # character offset of each word in `context`
    answers: List[str]  # gold texts (all of them, for evaluation)
    start_word: Optional[int] = None  # the first answer's words (training)
    end_word: Optional[int] = None
    answer_text: str = ""
    is_impossible: bool = False


def _split_words(context: str) -> Tuple[List[str], List[int]]:
    words, starts = [], []
    for match in re.finditer(r"\S+", context):
        words.append(match.group())
        starts.append(match.start())
    return words, starts


def read_examples(path: str, is_training: bool) -> Tuple[List[SquadExample], Dict]:
    """Examples of a SQuAD JSON file; malformed questions are skipped and reported.

    Skipped (counted, the first few reported with their id): a question without
    an id or text, a paragraph without a context string, an id seen before
    (its predictions would overwrite the first's), malformed `answers`, and in
    training an answer not found at `answer_start`. Invalid UTF-8 is replaced
    by U+FFFD; the report's `replaced_bytes` counts it.
    """
    try:
        with open(path, "rb") as f:
            text, replaced = decode_replacing(f.read(), path)
        data = json.loads(text.removeprefix("\ufeff"))  # a BOM, as editors on Windows write
    except (OSError, ValueError, RecursionError) as error:  # RecursionError: arrays nested 1000s deep
        raise SquadDataError(f"{path}: not a SQuAD JSON file ({type(error).__name__}: {error})") from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise SquadDataError(f'{path}: not a SQuAD JSON file (expected an object with a "data" list)')
    examples, problems, skipped, seen = [], [], 0, set()
    for article_index, article in enumerate(data["data"]):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        for paragraph_index, paragraph in enumerate(paragraphs if isinstance(paragraphs, list) else [None]):
            where = f"data[{article_index}].paragraphs[{paragraph_index}]"
            questions = paragraph.get("qas") if isinstance(paragraph, dict) else None
            context = paragraph.get("context") if isinstance(paragraph, dict) else None
            if not isinstance(questions, list) or not isinstance(context, str):
                skipped += max(1, len(questions) if isinstance(questions, list) else 1)
                if len(problems) < 5:
                    problems.append(f'{path}: {where}: needs a "context" string and a "qas" list')
                continue
            words, starts = _split_words(context)
            for qa in questions:
                try:
                    example = _example(qa, context, words, starts, is_training, seen)
                except _BadQuestion as error:
                    skipped += 1
                    if len(problems) < 5:
                        problems.append(f"{path}: {where}: {error}")
                    continue
                seen.add(example.qas_id)
                examples.append(example)
    if not examples:
        raise SquadDataError(f"{path}: no usable question ({skipped} skipped: {'; '.join(problems)})")
    return examples, {"skipped": skipped, "first_problems": problems, "replaced_bytes": replaced}


class _BadQuestion(ValueError):
    """One question read_examples skips; the message says why."""


def _example(qa, context, words, starts, is_training: bool, seen) -> SquadExample:
    if not isinstance(qa, dict) or not isinstance(qa.get("id"), (str, int)) or not isinstance(qa.get("question"), str):
        raise _BadQuestion('a question needs an "id" and a "question" string')
    qas_id = str(qa["id"])
    if qas_id in seen:
        raise _BadQuestion(f"question {qas_id}: duplicate id (its prediction would replace the first's)")
    answers = qa.get("answers", [])
    if not isinstance(answers, list) or not all(
        isinstance(a, dict) and isinstance(a.get("text"), str) and type(a.get("answer_start", 0)) is int
        for a in answers
    ):
        raise _BadQuestion(f'question {qas_id}: "answers" must be a list of {{"text": str, "answer_start": int}}')
    impossible = bool(qa.get("is_impossible", False))
    example = SquadExample(
        qas_id, qa["question"], context, words, starts, [a["text"] for a in answers], is_impossible=impossible
    )
    if is_training and not impossible:
        if not answers or "answer_start" not in answers[0]:
            raise _BadQuestion(f"question {qas_id}: no answer with an answer_start to train on")
        begin, text = answers[0]["answer_start"], answers[0]["text"]
        if begin < 0 or context[begin : begin + len(text)] != text or not text.strip():
            raise _BadQuestion(f"question {qas_id}: answer {text!r} is not at answer_start {begin}")
        example.start_word = int(np.searchsorted(starts, begin, side="right") - 1)
        example.end_word = int(np.searchsorted(starts, begin + len(text) - 1, side="right") - 1)
        example.answer_text = text
    return example


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


def _encode_words(tokenizer, words: List[str]):
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
        pieces, piece_word = _encode_words(tokenizer, example.words)
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


def _convert_index(index, pos, m=None, is_start=True):
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
    unmatched piece characters map by `_convert_index`. None when nothing
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
        spans.append((_convert_index(chartok_to_orig, first, n, True), _convert_index(chartok_to_orig, last, n, False)))
        at += len(piece)
    return tuple(spans)


def _word_char_spans(example: SquadExample, tokenizer, word: int):
    """(offset in the context, piece spans) of a word; see `_piece_char_spans`."""
    begin = example.word_starts[word]
    end = begin + len(example.words[word])
    if begin > 0 and example.context[begin - 1].isspace():
        begin -= 1
    return begin, _piece_char_spans(tokenizer, example.context[begin:end])


def _answer_text(example: SquadExample, tokenizer, feature: Feature, start: int, end: int) -> str:
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
        text = _answer_text(example, tokenizer, features[index], s, e)
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


# ---- the official evaluation (v1.1 and v2.0), same normalisation -----------------------
def normalize_answer(text: str) -> str:
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str, truth: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(truth))


def f1_score(prediction: str, truth: str) -> float:
    predicted, gold = normalize_answer(prediction).split(), normalize_answer(truth).split()
    if not predicted or not gold:  # v2: both empty (no answer) is a match
        return float(predicted == gold)
    common = collections.Counter(predicted) & collections.Counter(gold)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(predicted), overlap / len(gold)
    return 2 * precision * recall / (precision + recall)


def evaluate(examples: List[SquadExample], predictions: Dict[str, str]) -> Dict[str, float]:
    """EM and F1 (×100) over all questions; unanswerable ones have the gold answer ""."""
    exact, f1, has_answer = [], [], []
    for example in examples:
        truths = [t for t in example.answers if normalize_answer(t)] or [""]
        prediction = predictions.get(example.qas_id, "")
        exact.append(max(exact_match(prediction, t) for t in truths))
        f1.append(max(f1_score(prediction, t) for t in truths))
        has_answer.append(truths != [""])
    exact, f1, has_answer = np.array(exact), np.array(f1), np.array(has_answer)
    result = {"exact_match": 100 * exact.mean(), "f1": 100 * f1.mean(), "total": len(examples)}
    if not has_answer.all():
        for name, chosen in (("HasAns", has_answer), ("NoAns", ~has_answer)):
            if chosen.any():
                result[f"{name}_exact"] = 100 * exact[chosen].mean()
                result[f"{name}_f1"] = 100 * f1[chosen].mean()
    return result


def best_threshold(
    examples: List[SquadExample], predictions: Dict[str, str], null_diff: Dict[str, float]
) -> Tuple[float, float]:
    """(threshold, best F1) as the original's `find_best_thresh` (the official v2.0 script's) on F1.

    Goes through the questions in order of null score difference (stable),
    answering one more each time; the threshold is the difference of the
    question where the running F1 last improved (0.0 if abstaining on all is
    best). As the original, the threshold is then applied with
    `apply_threshold` (`>=`: that question and its ties get ""), so the F1
    after applying it can be lower than the best F1 returned here.
    """
    answered, abstained, diffs = [], [], []
    for example in examples:
        truths = [t for t in example.answers if normalize_answer(t)] or [""]
        prediction = predictions.get(example.qas_id, "")
        if truths == [""]:  # the official script: any non-empty prediction is wrong
            answered.append(0.0 if prediction else 1.0)
        else:
            answered.append(max(f1_score(prediction, t) for t in truths))
        abstained.append(float(truths == [""]))
        diffs.append(null_diff[example.qas_id])
    order = np.argsort(diffs, kind="mergesort")
    total = best_total = float(np.sum(abstained))  # every question abstains
    best = 0.0
    for index in order:
        total += answered[index] - abstained[index]
        if total > best_total:
            best_total, best = total, float(diffs[index])
    return best, 100 * best_total / len(examples)


# ---- the task ------------------------------------------------------------------------------------
@dataclasses.dataclass
class SquadPredictions:
    """What postprocessing gives: answers (after the v2 threshold), n-best lists, null scores."""

    answers: Dict[str, str]
    nbest: Dict[str, List[Dict]]
    null_scores: Dict[str, float]
    threshold: Optional[float] = None  # v2: tuned on the gold answers, as the original
    spans_only: Optional[Dict[str, str]] = None  # v2: every question answered


@dataclasses.dataclass(frozen=True)
class SquadTask(Task):
    """SQuAD v1.1 / v2.0 as the original `run_squad_v{1,2}.py`.

    Splits: "train" is `train_file`, "dev" is `predict_file`. v1.1 trains
    `AlbertSpanQA`; v2.0 the answerability head `AlbertSpanQAv2` (the end
    conditioned on the gold start; loss (start + end)/2 + 0.5·answerability), and a
    question gets "" when its null score is at or above the threshold tuned on
    the gold answers (the original's `find_best_thresh`). A v1-head model
    predicting v2 data uses BERT's null-score rule.
    """

    version: str = "1.1"
    train_file: Optional[str] = None
    predict_file: Optional[str] = None
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    start_n_top: int = 5
    end_n_top: int = 5
    metric: str = "f1"

    def __post_init__(self):
        if self.version not in ("1.1", "2.0"):
            raise SquadDataError(f"--version {self.version}: expected 1.1 or 2.0")
        check_ranges(
            self,
            SquadDataError,
            positive=("doc_stride", "max_query_length", "n_best_size", "max_answer_length", "start_n_top", "end_n_top"),
        )

    def min_seq_length(self):
        # As BERT's run_squad: else no window holds any of the paragraph.
        return (
            self.max_query_length + 4,
            f"[CLS] question (--max_query_length {self.max_query_length}) [SEP] text [SEP]",
        )

    @property
    def name(self) -> str:
        return f"squad{self.version}"

    def read(self, split: str) -> Tuple[List[SquadExample], ReadReport]:
        path, flag = (self.train_file, "train_file") if split == "train" else (self.predict_file, "predict_file")
        if not path:
            why = "training" if split == "train" else "evaluation (dev picks the best checkpoint when training)"
            raise finetuning.FineTuneError(f"--{flag} is needed for {why}")
        examples, found = read_examples(path, is_training=split == "train")
        report = ReadReport(path, rows=len(examples) + found["skipped"], skipped=found["skipped"])
        report.first_problems, report.replaced_bytes = found["first_problems"], found["replaced_bytes"]
        return examples, report

    def encode(self, split, examples, tokenizer, max_seq_length, training) -> Encoded:
        windows = convert_examples(
            examples, tokenizer, max_seq_length, self.doc_stride, self.max_query_length, is_training=training
        )
        features, labels = feature_arrays(windows, max_seq_length), None
        if training:
            starts = np.array([w.start_position for w in windows], "int32")
            ends = np.array([w.end_position for w in windows], "int32")
            labels = {"start_logits": starts, "end_logits": ends}
            if self.version == "2.0":
                # As the original: the end head sees the gold start; windows without the answer are impossible.
                features[START_POSITIONS] = starts[:, None]
                labels["end_logits"] = ends[:, None]
                labels["cls_logits"] = (starts == 0).astype("float32")
        return Encoded(split, examples, features, labels, rows=windows)

    def build_model(self, backbone, dropout):
        if self.version == "2.0":
            return AlbertSpanQAv2(backbone, start_n_top=self.start_n_top)
        return AlbertSpanQA(backbone)

    def training_model(self, model):
        return model.training_model() if isinstance(model, AlbertSpanQAv2) else model

    def losses(self):
        losses = {"start_logits": finetuning.classification_loss, "end_logits": finetuning.classification_loss}
        if self.version == "2.0":
            losses["cls_logits"] = finetuning.binary_loss
        return losses

    def loss_weights(self):
        weights = {"start_logits": 0.5, "end_logits": 0.5}
        if self.version == "2.0":
            weights["cls_logits"] = 0.5
        return weights

    def postprocess(self, data, outputs, tokenizer) -> SquadPredictions:
        if "cls_logits" in outputs:
            answers, nbest, null = decode_v2(
                data.examples, data.rows, outputs, tokenizer, self.n_best_size, self.max_answer_length, self.end_n_top
            )
        else:
            answers, nbest, null = decode(
                data.examples,
                data.rows,
                outputs["start_logits"],
                outputs["end_logits"],
                tokenizer,
                self.n_best_size,
                self.max_answer_length,
            )
        if self.version != "2.0":
            return SquadPredictions(answers, nbest, null)
        threshold, _ = best_threshold(data.examples, answers, null)
        return SquadPredictions(apply_threshold(answers, null, threshold), nbest, null, threshold, answers)

    def score(self, data, predictions: SquadPredictions) -> Dict[str, float]:
        result = evaluate(data.examples, predictions.answers)
        if predictions.threshold is not None:
            # Spans alone (every question answered) tell span learning apart from answerability.
            spans_only = evaluate(data.examples, predictions.spans_only)
            result["null_score_diff_threshold"] = predictions.threshold
            result["HasAns_f1_answering_all"] = spans_only.get("HasAns_f1", spans_only["f1"])
        return result

    def write(self, output_dir, data, predictions: SquadPredictions) -> List[str]:
        files = {"predictions.json": predictions.answers, "nbest_predictions.json": predictions.nbest}
        if self.version == "2.0":
            files["null_odds.json"] = predictions.null_scores
        paths = []
        for name, value in files.items():
            paths.append(os.path.join(output_dir, name))
            with open(paths[-1], "w", encoding="utf-8") as f:
                json.dump(value, f, indent=1, ensure_ascii=False)
        return paths
