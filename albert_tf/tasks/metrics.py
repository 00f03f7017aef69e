"""GLUE's metrics in NumPy: accuracy, F1, Matthews correlation, Pearson, Spearman.

Definitions as GLUE's (and scikit-learn/SciPy's): binary F1 of label 1,
Matthews correlation 0 when undefined, Spearman = Pearson of average ranks.

Example:

>>> matthews_corrcoef([1, 1, 0, 0], [1, 0, 0, 0])
0.5773502691896258
>>> spearman([1, 2, 3, 4], [10, 20, 20, 40])
0.9486832980505138
"""

import numpy as np


def accuracy(labels, predictions) -> float:
    return float(np.mean(np.asarray(labels) == np.asarray(predictions)))


def f1_score(labels, predictions, positive=1) -> float:
    labels, predictions = np.asarray(labels) == positive, np.asarray(predictions) == positive
    true_positive = np.sum(labels & predictions)
    denominator = np.sum(labels) + np.sum(predictions)
    return float(2 * true_positive / denominator) if denominator else 0.0


def matthews_corrcoef(labels, predictions) -> float:
    labels, predictions = np.asarray(labels) == 1, np.asarray(predictions) == 1
    tp = float(np.sum(labels & predictions))
    tn = float(np.sum(~labels & ~predictions))
    fp = float(np.sum(~labels & predictions))
    fn = float(np.sum(labels & ~predictions))
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return float((tp * tn - fp * fn) / denominator) if denominator else 0.0


def pearson(x, y) -> float:
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt(np.sum(x * x) * np.sum(y * y))
    return float(np.sum(x * y) / denominator) if denominator else 0.0


def average_ranks(values) -> np.ndarray:
    """Ranks 1..n, ties sharing their average rank (SciPy's `rankdata`)."""
    values = np.asarray(values)
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    ranks = np.empty(len(values), np.float64)
    start = 0
    for end in range(1, len(values) + 1):
        if end == len(values) or sorted_values[end] != sorted_values[start]:
            ranks[order[start:end]] = (start + end + 1) / 2.0
            start = end
    return ranks


def spearman(x, y) -> float:
    return pearson(average_ranks(x), average_ranks(y))
