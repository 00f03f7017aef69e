"""GLUE's metrics in NumPy: accuracy, F1, macro-F1, Matthews correlation, Pearson, Spearman; which is better.

Definitions as GLUE's (and scikit-learn/SciPy's): binary F1 of label 1,
Matthews correlation 0 when undefined, Spearman = Pearson of average ranks.

Example:

>>> matthews_corrcoef([1, 1, 0, 0], [1, 0, 0, 0])
0.5773502691896258
>>> spearman([1, 2, 3, 4], [10, 20, 20, 40])
0.9486832980505138
>>> macro_f1([0, 0, 1, 2], [0, 1, 1, 2], num_classes=3)
0.7777777777777777
>>> majority_share([1, 1, 0, 1]), is_better(0.2, 0.3, "mse")
(0.75, True)
"""

import numpy as np


def accuracy(labels, predictions) -> float:
    return float(np.mean(np.asarray(labels) == np.asarray(predictions)))


def f1_score(labels, predictions, positive=1) -> float:
    labels, predictions = np.asarray(labels) == positive, np.asarray(predictions) == positive
    true_positive = np.sum(labels & predictions)
    denominator = np.sum(labels) + np.sum(predictions)
    return float(2 * true_positive / denominator) if denominator else 0.0


def macro_f1(labels, predictions, num_classes: int) -> float:
    """The unweighted mean of each class's F1 (a class absent from both counts as 0, as scikit-learn)."""
    return float(np.mean([f1_score(labels, predictions, positive=c) for c in range(num_classes)]))


def multiclass_matthews_corrcoef(labels, predictions, num_classes: int) -> float:
    """Matthews correlation of K classes (Gorodkin's R_K; the binary one for K = 2), 0 when undefined."""
    confusion = np.zeros((num_classes, num_classes), np.float64)
    np.add.at(confusion, (np.asarray(labels), np.asarray(predictions)), 1)
    samples, correct = confusion.sum(), np.trace(confusion)
    true_counts, predicted_counts = confusion.sum(1), confusion.sum(0)
    numerator = correct * samples - np.dot(true_counts, predicted_counts)
    denominator = np.sqrt(
        (samples**2 - np.dot(predicted_counts, predicted_counts)) * (samples**2 - np.dot(true_counts, true_counts))
    )
    return float(numerator / denominator) if denominator else 0.0


def majority_share(labels) -> float:
    """The share of the most frequent label: the accuracy of always predicting it."""
    _, counts = np.unique(np.asarray(labels), return_counts=True)
    return float(counts.max() / counts.sum())


LOWER_IS_BETTER = frozenset({"mse"})  # every other metric a task returns is better when higher


def is_better(value: float, than: float, metric: str) -> bool:
    """Whether `value` of `metric` beats `than` (strictly: a tie keeps the earlier best)."""
    return value < than if metric in LOWER_IS_BETTER else value > than


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
