"""PL-BERT's objective: masked-phoneme and word cross-entropy, as sums over a batch.

The same interface as ALBERT's `albert_tf.pretraining.objective`: `batch_stats`
sums over a batch (so replicas and micro-batches add up exactly), `loss` turns
the sums into the training loss, `summarize` into metrics. `keras.ops` only, so
every Keras backend runs it. The masking that makes the labels is
`albert_tf.pretraining.plbert_masking` (in the input pipeline, as the
reference's dataloader).

The loss is the reference's two terms (its train.ipynb: `loss_vocab + loss_token`),
each a mean per token over the batch: the phoneme cross-entropy over the masked
positions, the word cross-entropy over every real position (packed rows: every
instance's tokens count alike). The reference averages per row first (and divides
the phoneme term by 1 + the rows with a mask); per token is what sums over a
batch can give, and is the same for rows of equal length.

The word head's logits `[B, S, V]` (V up to 85k) are never held whole: `word_stats`
computes them a chunk of positions at a time, forward and backward (a custom
gradient recomputes each chunk), so memory is one chunk's `[C, V]`.

Example:

>>> import numpy as np
>>> outputs = {"phoneme_logits": np.zeros((1, 2, 4), "float32"), "sequence_output": np.zeros((1, 2, 3), "float32"),
...            "word_kernel": np.zeros((3, 8), "float32"), "word_bias": np.zeros((8,), "float32")}
>>> labels = {"phoneme_labels": np.array([[1, 2]]), "phoneme_weights": np.array([[1.0, 0.0]], "float32"),
...           "word_labels": np.array([[5, 6]]), "word_weights": np.array([[1.0, 1.0]], "float32")}
>>> round(float(pretraining_loss(outputs, labels)), 4)  # ln 4 + ln 8, uniform logits
3.4657
"""

from typing import Dict

from keras import ops

from albert_tf.pretraining.objective import masked_lm_stats

LOSS_EPSILON = 1e-5  # as ALBERT's masked-LM term: Σw + 1e-5, so a batch without masks gives 0
WORD_CHUNK = 1024  # positions a chunk: [1024, 85k] float32 logits are 350 MB
STAT_KEYS = ("phoneme_nll", "phoneme_weight", "phoneme_correct", "word_nll", "word_weight", "word_correct", "loss")


def phoneme_stats(phoneme_logits, phoneme_labels, phoneme_weights) -> Dict[str, object]:
    """Summed masked-phoneme NLL, mask weight and weighted correct count (all positions' logits, weighted)."""
    stats = masked_lm_stats(phoneme_logits, phoneme_labels, phoneme_weights)
    names = {"phoneme_nll": "mlm_nll", "phoneme_weight": "mlm_weight", "phoneme_correct": "mlm_correct"}
    return {ours: stats[theirs] for ours, theirs in names.items()}


def _chunk_logits(x, kernel, bias):
    return ops.matmul(x, kernel) + bias


def word_stats(sequence_output, word_kernel, word_bias, word_labels, word_weights, chunk=WORD_CHUNK):
    """Summed word NLL, weight and weighted correct count of `x W + b`, `chunk` positions at a time.

    Equal to the full logits' cross-entropy (to float32 rounding); the gradient
    (to `sequence_output`, `word_kernel`, `word_bias`) is computed chunk by chunk
    too: `softmax - one_hot` per chunk, never all positions at once.
    """
    hidden = ops.shape(sequence_output)[-1]
    x = ops.reshape(ops.cast(sequence_output, "float32"), (-1, hidden))
    labels = ops.reshape(ops.cast(word_labels, "int32"), (-1,))
    weights = ops.reshape(ops.cast(word_weights, "float32"), (-1,))
    kernel, bias = ops.cast(word_kernel, "float32"), ops.cast(word_bias, "float32")
    positions = ops.shape(x)[0]
    if isinstance(positions, int):  # a static size: no chunk longer than the batch
        chunk = max(1, min(chunk, positions))
    pad = (-positions) % chunk  # the padded positions weigh 0
    x = ops.reshape(ops.pad(x, [[0, pad], [0, 0]]), (-1, chunk, hidden))
    labels = ops.reshape(ops.pad(labels, [[0, pad]]), (-1, chunk))
    weights = ops.reshape(ops.pad(weights, [[0, pad]]), (-1, chunk))
    vocab = ops.shape(kernel)[-1]
    chunks = ops.shape(x)[0]

    def chunk_at(i, x):
        return ops.take(x, i, axis=0), ops.take(labels, i, axis=0), ops.take(weights, i, axis=0)

    @ops.custom_gradient
    def nll_and_correct(x, kernel, bias):
        def forward(i, sums):
            x_c, labels_c, weights_c = chunk_at(i, x)
            logits = _chunk_logits(x_c, kernel, bias)
            target = ops.squeeze(ops.take_along_axis(logits, labels_c[:, None], axis=-1), -1)
            nll = ops.logsumexp(logits, axis=-1) - target
            correct = ops.cast(ops.equal(ops.cast(ops.argmax(logits, axis=-1), "int32"), labels_c), "float32")
            return sums + ops.stack([ops.sum(weights_c * nll), ops.sum(weights_c * correct)])

        sums = ops.fori_loop(0, chunks, forward, ops.zeros((2,), "float32"))

        def gradient(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream  # the TF and JAX backends differ here
            scale = upstream[0]  # the correct count has no gradient

            def backward(i, grads):
                grad_x, grad_kernel, grad_bias = grads
                x_c, labels_c, weights_c = chunk_at(i, x)
                probabilities = ops.softmax(_chunk_logits(x_c, kernel, bias), axis=-1)
                one_hot = ops.one_hot(labels_c, vocab, dtype="float32")
                d_logits = (probabilities - one_hot) * (weights_c * scale)[:, None]
                grad_x_c = ops.matmul(d_logits, ops.transpose(kernel))
                return (
                    ops.slice_update(grad_x, [i, 0, 0], grad_x_c[None]),
                    grad_kernel + ops.matmul(ops.transpose(x_c), d_logits),
                    grad_bias + ops.sum(d_logits, axis=0),
                )

            zeros = (ops.zeros_like(x), ops.zeros_like(kernel), ops.zeros_like(bias))
            return ops.fori_loop(0, chunks, backward, zeros)

        return sums, gradient

    sums = nll_and_correct(x, kernel, bias)
    return {"word_nll": sums[0], "word_weight": ops.sum(weights), "word_correct": sums[1]}


def batch_stats(outputs, labels, chunk=WORD_CHUNK) -> Dict[str, object]:
    """Summed NLLs, weights and correct counts of one batch (the outputs of `PlbertPretrainer`)."""
    return {
        **phoneme_stats(outputs["phoneme_logits"], labels["phoneme_labels"], labels["phoneme_weights"]),
        **word_stats(
            outputs["sequence_output"],
            outputs["word_kernel"],
            outputs["word_bias"],
            labels["word_labels"],
            labels["word_weights"],
            chunk,
        ),
    }


def loss(stats):
    """Mean masked-phoneme NLL + mean word NLL, each per token of the batch."""
    return phoneme_term(stats) + word_term(stats)


def phoneme_term(stats):
    return stats["phoneme_nll"] / (stats["phoneme_weight"] + LOSS_EPSILON)


def word_term(stats):
    return stats["word_nll"] / (stats["word_weight"] + LOSS_EPSILON)


def pretraining_loss(outputs, labels, chunk=WORD_CHUNK):
    """The loss of one batch, as training computes it."""
    return loss(batch_stats(outputs, labels, chunk))


def summarize(stats: Dict[str, float], steps: int) -> Dict[str, float]:
    """Metric values from summed stats."""
    return {
        "loss": stats["loss"] / max(steps, 1),
        "phoneme_loss": stats["phoneme_nll"] / max(stats["phoneme_weight"], 1e-5),
        "phoneme_accuracy": stats["phoneme_correct"] / max(stats["phoneme_weight"], 1e-5),
        "word_loss": stats["word_nll"] / max(stats["word_weight"], 1e-5),
        "word_accuracy": stats["word_correct"] / max(stats["word_weight"], 1e-5),
    }
