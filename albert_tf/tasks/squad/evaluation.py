"""The official SQuAD evaluation scripts (v1.1 and v2.0), reimplemented with the same normalisation.

Lowercase, punctuation and articles dropped, whitespace collapsed; EM and F1 take the best
over a question's gold answers; v2 adds HasAns/NoAns and the tuned null threshold.

Example:

>>> normalize_answer("The  Eiffel Tower!")
'eiffel tower'
>>> round(f1_score("eiffel tower in paris", "the Eiffel Tower"), 3)
0.667
"""

import collections
import re
import string
from typing import Dict, List, Tuple

import numpy as np

from albert_tf.tasks.squad.reading import SquadExample


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
