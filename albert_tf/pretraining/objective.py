"""The pretraining objective (MLM + SOP) as sums over a batch, and the metrics made from them.

Sums rather than means, so that replicas and micro-batches add up exactly.
"""

from typing import Dict

import tensorflow as tf

STAT_KEYS = ("mlm_nll", "mlm_weight", "mlm_correct", "sop_nll", "sop_correct", "sop_count", "loss")


def batch_stats(outputs, labels) -> Dict[str, tf.Tensor]:
    """Summed NLLs, weights and correct counts of one batch."""
    mlm_logits, sop_logits = outputs["mlm_logits"], outputs["sop_logits"]
    ids = labels["masked_lm_ids"]
    weights = labels["masked_lm_weights"]
    log_probs = tf.nn.log_softmax(mlm_logits, axis=-1)
    nll = -tf.squeeze(tf.gather(log_probs, ids[..., None], batch_dims=2), -1)
    correct = tf.cast(tf.equal(tf.argmax(mlm_logits, -1, output_type=tf.int32), ids), tf.float32)
    sop_labels = tf.reshape(labels["next_sentence_labels"], [-1])
    sop_nll = -tf.gather(tf.nn.log_softmax(sop_logits, -1), sop_labels[:, None], batch_dims=1)
    sop_correct = tf.cast(tf.equal(tf.argmax(sop_logits, -1, output_type=tf.int32), sop_labels), tf.float32)
    return {
        "mlm_nll": tf.reduce_sum(weights * nll),
        "mlm_weight": tf.reduce_sum(weights),
        "mlm_correct": tf.reduce_sum(weights * correct),
        "sop_nll": tf.reduce_sum(sop_nll),
        "sop_correct": tf.reduce_sum(sop_correct),
        "sop_count": tf.cast(tf.size(sop_labels), tf.float32),
    }


def loss(stats):
    """The original loss: Σw·nll/(Σw + 1e-5) + mean SOP NLL."""
    return stats["mlm_nll"] / (stats["mlm_weight"] + 1e-5) + stats["sop_nll"] / stats["sop_count"]


def summarize(stats: Dict[str, float], steps: int) -> Dict[str, float]:
    """Metric values from summed stats (names as the original's eval)."""
    return {
        "loss": stats["loss"] / max(steps, 1),
        "masked_lm_loss": stats["mlm_nll"] / max(stats["mlm_weight"], 1e-5),
        "masked_lm_accuracy": stats["mlm_correct"] / max(stats["mlm_weight"], 1e-5),
        "sentence_order_loss": stats["sop_nll"] / max(stats["sop_count"], 1),
        "sentence_order_accuracy": stats["sop_correct"] / max(stats["sop_count"], 1),
    }
