"""The pretraining objective (MLM + SOP): the one loss training uses, and the metrics made from it.

Written as sums over a batch (`batch_stats`), so that replicas and
micro-batches add up exactly; `loss` turns sums into the original's loss,
`summarize` into the original's eval metrics. `keras.ops` only, so the same
loss runs on every Keras backend (the JAX benchmark uses it too).

Example:

>>> import numpy as np
>>> outputs = {"mlm_logits": np.zeros((1, 2, 4), "float32"), "sop_logits": np.zeros((1, 2), "float32")}
>>> labels = {"masked_lm_ids": np.array([[1, 2]]), "masked_lm_weights": np.array([[1.0, 0.0]], "float32"),
...           "next_sentence_labels": np.array([[1]])}
>>> round(float(pretraining_loss(outputs, labels)), 4)  # ln 4 + ln 2, uniform logits
2.0794
"""

from typing import Dict

from keras import ops

MLM_LOSS_EPSILON = 1e-5  # the original's denominator: Σw + 1e-5
STAT_KEYS = ("mlm_nll", "mlm_weight", "mlm_correct", "sop_nll", "sop_correct", "sop_count", "loss")


def _nll_and_correct(logits, labels):
    """Per-position negative log-likelihood of `labels` and whether the argmax is right."""
    logits = ops.cast(logits, "float32")
    labels = ops.cast(labels, "int32")
    log_probs = ops.log_softmax(logits, axis=-1)
    nll = -ops.squeeze(ops.take_along_axis(log_probs, labels[..., None], axis=-1), -1)
    correct = ops.cast(ops.equal(ops.cast(ops.argmax(logits, axis=-1), "int32"), labels), "float32")
    return nll, correct


def masked_lm_stats(mlm_logits, masked_lm_ids, masked_lm_weights) -> Dict[str, object]:
    """Summed masked-LM NLL, mask weight and weighted correct count of one batch."""
    weights = ops.cast(masked_lm_weights, "float32")
    nll, correct = _nll_and_correct(mlm_logits, masked_lm_ids)
    return {
        "mlm_nll": ops.sum(weights * nll),
        "mlm_weight": ops.sum(weights),
        "mlm_correct": ops.sum(weights * correct),
    }


def sentence_order_stats(sop_logits, labels, weights=None) -> Dict[str, object]:
    """Summed sentence-order NLL, correct count and example count of one batch.

    `weights` (packed rows: 1 per real instance, 0 per empty slot) count each label; default 1 each.
    """
    labels = ops.reshape(labels, (-1,))
    nll, correct = _nll_and_correct(ops.reshape(sop_logits, (-1, 2)), labels)
    weights = ops.ones_like(nll) if weights is None else ops.reshape(ops.cast(weights, "float32"), (-1,))
    return {"sop_nll": ops.sum(weights * nll), "sop_correct": ops.sum(weights * correct), "sop_count": ops.sum(weights)}


def batch_stats(outputs, labels) -> Dict[str, object]:
    """Summed NLLs, weights and correct counts of one batch (packed rows: SOP over real instances)."""
    return {
        **masked_lm_stats(outputs["mlm_logits"], labels["masked_lm_ids"], labels["masked_lm_weights"]),
        **sentence_order_stats(
            outputs["sop_logits"], labels["next_sentence_labels"], labels.get("next_sentence_weights")
        ),
    }


def loss(stats):
    """The original loss: Σw·nll/(Σw + 1e-5) + mean SOP NLL, unweighted."""
    return masked_lm_term(stats) + sentence_order_term(stats)


def masked_lm_term(stats):
    return stats["mlm_nll"] / (stats["mlm_weight"] + MLM_LOSS_EPSILON)


def sentence_order_term(stats):
    return stats["sop_nll"] / stats["sop_count"]


def pretraining_loss(outputs, labels):
    """The loss of one batch, as training computes it."""
    return loss(batch_stats(outputs, labels))


def masked_lm_loss(mlm_logits, masked_lm_ids, masked_lm_weights):
    """The masked-LM part of `pretraining_loss`: Σ w·nll / (Σ w + 1e-5)."""
    return masked_lm_term(masked_lm_stats(mlm_logits, masked_lm_ids, masked_lm_weights))


def sentence_order_loss(sop_logits, labels):
    """The sentence-order part of `pretraining_loss`: mean cross-entropy of the 2-way head."""
    return sentence_order_term(sentence_order_stats(sop_logits, labels))


def summarize(stats: Dict[str, float], steps: int) -> Dict[str, float]:
    """Metric values from summed stats (names as the original's eval)."""
    return {
        "loss": stats["loss"] / max(steps, 1),
        "masked_lm_loss": stats["mlm_nll"] / max(stats["mlm_weight"], 1e-5),
        "masked_lm_accuracy": stats["mlm_correct"] / max(stats["mlm_weight"], 1e-5),
        "sentence_order_loss": stats["sop_nll"] / max(stats["sop_count"], 1),
        "sentence_order_accuracy": stats["sop_correct"] / max(stats["sop_count"], 1),
    }
