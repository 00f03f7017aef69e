"""Length-aware batching: pay for the text, not the padding.

The encoders pad every row to `max_seq_length`; most GLUE rows hold far fewer
pieces (SST-2 train: ~90 % padding at 128). Here each example keeps its true
length (the last `input_mask` position + 1; RACE's `[N, choices, L]`: the longest
choice), rows of similar length share a batch, and each batch is cut to the
smallest of its `buckets` that holds its longest row. Graph mode traces one
`[batch, None]` step for every width, so there each batch is cut to its longest
row (`cut_lengths`); XLA compiles one program per shape, so there the widths are
a bounded set (`fine_bucket_lengths`).

- `train_dataset`: as `finetuning.train_dataset` (shuffled, repeated, fixed
  batch size), but batches are cut from sorted pools of `pool_batches` batches
  and served in shuffled order (HF Trainer's `group_by_length`), each batch cut
  to its bucket. `length_grouping=False` is today's fixed padding exactly.
- `predict_in_order`: the result of `model.predict(features)`, computed on
  length-sorted batches cut to their buckets and put back in input order;
  per-token outputs (SQuAD's `[N, L]` logits) are padded back to
  `max_seq_length` with `PAD_LOGIT`.

Outputs for real tokens do not change: position embeddings are absolute (a row
keeps positions 0..n-1) and attention masks padded keys with a -10000 bias whose
softmax weight is exactly 0 in float32, so cutting trailing padding only drops
work whose result was discarded.

Example:

>>> features = {"input_ids": np.array([[2, 7, 3, 0], [2, 3, 0, 0]], "int32")}
>>> features["input_mask"] = (features["input_ids"] > 0).astype("int32")
>>> true_lengths(features).tolist(), bucket_lengths(40)
([3, 2], (16, 32, 40))
"""

import inspect
import weakref
from typing import Callable, Dict, Iterator, Optional, Sequence, Tuple, Union

import keras
import numpy as np
import tensorflow as tf

from albert_tf.errors import AlbertError

SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")
MASK_FEATURE = "input_mask"
BUCKET_STEP = 16
POOL_BATCHES = 50
# Batches ready ahead of the step; a step takes far longer than a batch takes to gather.
PREFETCH_BATCHES = 2
# Per-token float outputs are padded back to max_seq_length with this: SQuAD v2's head already
# masks non-context positions with the same -1e30 (albert_tf.layers.answerability.NEG_INF), so
# its log-softmax and top-k read the padded positions as the fixed path's masked ones; v1's
# decoding drops positions outside the window's pieces, and -1e30 never outranks a real one.
PAD_LOGIT = -1e30

Labels = Union[np.ndarray, Dict[str, np.ndarray]]


class LengthBatchingError(AlbertError, ValueError):
    """Features or settings length batching cannot use; the message names the problem."""


def bucket_lengths(max_seq_length: int, step: int = BUCKET_STEP) -> Tuple[int, ...]:
    """The lengths batches are cut to: multiples of `step` below `max_seq_length`, then `max_seq_length`.

    >>> bucket_lengths(128, 32)
    (32, 64, 96, 128)
    """
    if max_seq_length < 1 or step < 1:
        raise LengthBatchingError(f"bucket lengths need max_seq_length ≥ 1 and step ≥ 1, got {max_seq_length}, {step}")
    return tuple(range(step, max_seq_length, step)) + (max_seq_length,)


# Most single-sentence GLUE rows hold < 32 pieces (SST-2 mean 13.6, CoLA 11.5): steps of 8 there,
# 16 up to 128, 32 beyond; a bounded set of shapes (10 at 128, 18 at 384, 22 at 512) for XLA.
SHORT_BUCKETS = tuple(range(8, 32, 8)) + tuple(range(32, 128, 16))
LONG_BUCKET_STEP = 32


def fine_bucket_lengths(max_seq_length: int) -> Tuple[int, ...]:
    """What XLA-compiled steps cut batches to: steps of 8 up to 32, 16 up to 128, 32 beyond.

    >>> fine_bucket_lengths(128)
    (8, 16, 24, 32, 48, 64, 80, 96, 112, 128)
    >>> fine_bucket_lengths(40)
    (8, 16, 24, 32, 40)
    """
    lengths = SHORT_BUCKETS + tuple(range(128, max_seq_length, LONG_BUCKET_STEP))
    return tuple(length for length in lengths if length < max_seq_length) + (max_seq_length,)


def cut_lengths(max_seq_length: int, compiled: bool, min_width: int = 1) -> Tuple[int, ...]:
    """The widths batches may be cut to: every width from `min_width` (each batch to its longest
    row), or, where every new shape is compiled (XLA, TPU), the bounded `fine_bucket_lengths`.

    Graph mode traces a step once for a `[batch, None]` input, so a new width costs
    nothing there (measured: bench/journal/2026-11-26-fit-end-and-cut.md). `min_width`
    is for a model that needs more columns than a row holds (`Task.min_batch_width`).

    >>> cut_lengths(5, compiled=False), cut_lengths(12, compiled=False, min_width=8)
    ((1, 2, 3, 4, 5), (8, 9, 10, 11, 12))
    >>> cut_lengths(40, compiled=True)
    (8, 16, 24, 32, 40)
    """
    if max_seq_length < 1 or min_width < 1:
        raise LengthBatchingError(
            f"cut lengths need max_seq_length ≥ 1 and min_width ≥ 1, got {max_seq_length}, {min_width}"
        )
    if compiled:
        return tuple(width for width in fine_bucket_lengths(max_seq_length) if width >= min_width) or (max_seq_length,)
    return tuple(range(min(min_width, max_seq_length), max_seq_length + 1))


def without_autotune_thread(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`dataset` without tf.data's autotuning thread, whose sleep (up to a minute) each iterator's deletion waits out.

    Keras `fit` deletes its iterator on return, and fine-tuning calls `fit` once per
    evaluation interval: with the thread, each `fit` ended 12–57 s after its last
    step (gdb: the main thread in `~RootDataset::Iterator`, waiting on the thread's
    `Model::OptimizeLoop`). Parallel maps and prefetch keep their static defaults.
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def true_lengths(features: Dict[str, np.ndarray], mask_feature: str = MASK_FEATURE) -> np.ndarray:
    """Each example's length `[N]`: its last nonzero `mask_feature` position + 1 (max over extra axes)."""
    if mask_feature not in features:
        raise LengthBatchingError(f"features have no {mask_feature!r} to take lengths from: {sorted(features)}")
    mask = np.asarray(features[mask_feature])
    if mask.ndim < 2:
        raise LengthBatchingError(f"{mask_feature!r} must be [N, ..., L], got shape {mask.shape}")
    width = mask.shape[-1]
    nonzero = mask.reshape(len(mask), -1, width) != 0
    # Index of the last nonzero position + 1; 0 for an all-zero row.
    last = np.where(nonzero.any(-1), width - np.argmax(nonzero[..., ::-1], axis=-1), 0)
    return last.max(axis=1).astype("int32")


def bucket_of(lengths: np.ndarray, buckets: Sequence[int]) -> np.ndarray:
    """The smallest bucket length ≥ each length (lengths beyond the last bucket are an error)."""
    buckets = np.asarray(sorted(buckets))
    lengths = np.asarray(lengths)
    if lengths.size and lengths.max() > buckets[-1]:
        raise LengthBatchingError(f"a row of length {lengths.max()} exceeds the longest bucket {buckets[-1]}")
    return buckets[np.searchsorted(buckets, lengths, side="left")]


def _checked(features, labels, sequence_features, buckets):
    missing = [name for name in sequence_features if name not in features]
    if missing and MASK_FEATURE in missing:
        raise LengthBatchingError(f"features have no {MASK_FEATURE!r}: {sorted(features)}")
    names = tuple(name for name in sequence_features if name in features)
    width = np.shape(features[MASK_FEATURE])[-1]
    for name in names:
        if np.shape(features[name])[-1] != width:
            raise LengthBatchingError(
                f"feature {name!r} has length {np.shape(features[name])[-1]}, {MASK_FEATURE!r} has {width}"
            )
    buckets = tuple(sorted(set(buckets))) if buckets is not None else bucket_lengths(width)
    if buckets[-1] != width:
        raise LengthBatchingError(f"the longest bucket must be the features' length {width}, got {buckets}")
    labels = labels if isinstance(labels, dict) or labels is None else {"logits": labels}
    return names, buckets, labels


def cut_batch(
    features: Dict[str, tf.Tensor], buckets: Sequence[int], sequence_features: Sequence[str] = SEQUENCE_FEATURES
) -> Dict[str, tf.Tensor]:
    """One batch of tensors with its `sequence_features` cut to the bucket of its longest row (a tf.data map).

    The longest row is the last nonzero `input_mask` position + 1 over the batch.
    """
    mask = tf.cast(features[MASK_FEATURE] != 0, tf.int32)
    positions = tf.range(1, tf.shape(mask)[-1] + 1, dtype=tf.int32)
    longest = tf.reduce_max(mask * positions)
    table = tf.constant(sorted(buckets), tf.int32)
    width = tf.gather(table, tf.minimum(tf.searchsorted(table, longest[None], side="left")[0], len(buckets) - 1))
    return _cut(features, tuple(name for name in sequence_features if name in features), width)


def _cut(tensors: dict, names, width):
    return {name: (value[..., :width] if name in names else value) for name, value in tensors.items()}


def train_dataset(
    features: Dict[str, np.ndarray],
    labels: Labels,
    batch_size: int,
    seed: int,
    *,
    length_grouping: bool = True,
    buckets: Optional[Sequence[int]] = None,
    pool_batches: int = POOL_BATCHES,
    sequence_features: Sequence[str] = SEQUENCE_FEATURES,
    sequence_labels: Sequence[str] = (),
) -> tf.data.Dataset:
    """Shuffled, repeated batches of `(features, labels)`, `batch_size` rows each.

    An array of labels is `{"logits": labels}`.

    With `length_grouping`, the shuffled stream is cut into pools of
    `pool_batches` batches (fewer when the data holds fewer); each pool is sorted by
    true length, cut into batches, and its batches served in an order drawn from
    `(seed, pool index)`; each batch's `sequence_features` (and `sequence_labels`,
    per-token targets) are cut to the smallest of `buckets` (default: multiples of
    16 and the features' length) that holds its longest row. Shapes: batch
    dimension fixed, sequence dimension unknown (`None`) with known rank. Without
    it: the shuffled, repeated stream in batches, the fixed padding of
    `albert_tf.finetuning.datasets.train_dataset`.

    The stream is every example once per epoch, epoch `e` in an order drawn from
    `(seed, e)` alone: every iterator of the dataset yields the same batches (Keras
    iterates a dataset once to build the model under a tf.distribute strategy, then
    again to train). Each pool holds consecutive examples of the stream, so `k` pools
    that span whole epochs hold every example once per epoch.
    """
    names, buckets, labels = _checked(features, labels, sequence_features, buckets)
    count = len(next(iter(labels.values())))
    if count < batch_size:
        raise LengthBatchingError(f"{count} training examples, fewer than --train_batch_size {batch_size}")
    if not length_grouping:
        return without_autotune_thread(_epochs((features, labels), count, seed, batch_size).prefetch(PREFETCH_BATCHES))
    label_names = tuple(sequence_labels)
    pool_batches = max(1, min(pool_batches, count // batch_size))
    lengths = true_lengths(features)
    bucket_table = tf.constant(buckets, tf.int32)

    def regroup(pool_index, pool):
        order = tf.reshape(tf.argsort(pool[2], stable=True), [pool_batches, batch_size])
        order = tf.random.experimental.stateless_shuffle(order, seed=tf.stack([tf.cast(seed, tf.int64), pool_index]))
        # [pool_batches, batch_size, ...]: `unbatch` then yields whole batches.
        return tf.nest.map_structure(lambda t: tf.gather(t, order), pool)

    def cut(batch_features, batch_labels, batch_lengths):
        index = tf.searchsorted(bucket_table, tf.reduce_max(batch_lengths)[None], side="left")[0]
        width = bucket_table[index]
        return _cut(batch_features, names, width), _cut(batch_labels, label_names, width)

    return without_autotune_thread(
        _epochs((features, labels, lengths), count, seed, batch_size * pool_batches)
        .enumerate()
        .map(regroup)
        .unbatch()
        .map(cut)
        .prefetch(PREFETCH_BATCHES)
    )


def _epochs(elements, count: int, seed: int, batch_size: int) -> tf.data.Dataset:
    """`elements` (arrays of `count` rows) in batches of `batch_size` rows, every row once per epoch, repeated.

    Epoch `e`'s order is a stateless shuffle seeded by `(seed, -1 - e)` (pools use `(seed, pool index ≥ 0)`):
    a function of the seed alone, unlike `shuffle(reshuffle_each_iteration=True)`, whose order changes
    with each iterator of the same dataset. Batches run across epoch boundaries, as `repeat().batch()`.
    """
    tensors = tf.nest.map_structure(tf.convert_to_tensor, elements)

    def epoch_order(epoch):
        order_seed = tf.stack([tf.cast(seed, tf.int64), -1 - epoch])
        return tf.data.Dataset.from_tensor_slices(
            tf.random.experimental.stateless_shuffle(tf.range(count, dtype=tf.int64), seed=order_seed)
        )

    rows = tf.data.Dataset.counter().flat_map(epoch_order).batch(batch_size, drop_remainder=True)
    return rows.map(lambda index: tf.nest.map_structure(lambda t: tf.gather(t, index), tensors))


def eval_batches(
    features: Dict[str, np.ndarray],
    batch_size: int,
    *,
    buckets: Optional[Sequence[int]] = None,
    sequence_features: Sequence[str] = SEQUENCE_FEATURES,
) -> Iterator[Tuple[np.ndarray, Dict[str, np.ndarray]]]:
    """`(row indices, features of those rows cut to their bucket)`, shortest rows first, every row once."""
    if batch_size < 1:
        raise LengthBatchingError(f"batch size must be positive, got {batch_size}")
    names, buckets, _ = _checked(features, None, sequence_features, buckets)
    lengths = true_lengths(features)
    order = np.argsort(lengths, kind="stable")
    widths = bucket_of(lengths, buckets)
    for begin in range(0, len(order), batch_size):
        rows = order[begin : begin + batch_size]
        width = int(widths[rows].max())
        yield rows, _cut({name: np.asarray(value)[rows] for name, value in features.items()}, names, width)


# model -> {input signature: its traced function}: repeated evaluations (every
# save_checkpoints_steps) reuse one trace, as Keras' own predict_function does.
_TRACED = weakref.WeakKeyDictionary()


def _inference_function(model, features, names) -> Callable:
    """`model(batch, training=False)` traced once for any batch size and sequence length."""
    signature = {}
    for name, value in features.items():
        value = np.asarray(value)
        shape = [None] + list(value.shape[1:])
        if name in names:
            shape[-1] = None
        signature[name] = tf.TensorSpec(shape, tf.as_dtype(value.dtype), name=name)
    key = tuple(sorted((name, tuple(spec.shape.as_list()), spec.dtype.name) for name, spec in signature.items()))
    try:
        traced = _TRACED.setdefault(model, {})
    except TypeError:  # not weakly referenceable: trace for this call only
        traced = {}
    if key not in traced:
        # A weak reference: the cache entry must not keep its own key (the model) alive.
        reference = _reference(model)
        if isinstance(model, keras.Model):
            traced[key] = tf.function(
                lambda batch: reference()(batch, training=False), input_signature=[signature], autograph=False
            )
        else:
            traced[key] = tf.function(lambda batch: reference()(batch), input_signature=[signature], autograph=False)
    return traced[key]


def _reference(model):
    try:
        return weakref.WeakMethod(model) if inspect.ismethod(model) else weakref.ref(model)
    except TypeError:
        return lambda: model


def predict_in_order(
    model,
    features: Dict[str, np.ndarray],
    batch_size: int,
    *,
    length_grouping: bool = True,
    buckets: Optional[Sequence[int]] = None,
    sequence_features: Sequence[str] = SEQUENCE_FEATURES,
    pad_value: float = PAD_LOGIT,
    keras_predict: bool = False,
):
    """What `model.predict(features, batch_size=batch_size)` returns, from length-sorted, bucket-cut batches.

    `model` is a Keras model or any callable on a dict of tensors (a SavedModel
    signature, a `tf.function`). Output axes whose size follows the sequence
    length (unknown in the traced output's static shape, past the batch axis)
    are padded back to the features' length with `pad_value` (floats; integers
    get 0), so `[N, L]` logits line up with the fixed path's positions.
    Without `length_grouping`: `model.predict` for a Keras model, else fixed
    batches in input order. `keras_predict`: a Keras model runs its own predict step on each batch
    (one compilation per width: pass few `buckets`), as one that is not TensorFlow's must
    (`Compute.predicts_per_shape`); otherwise one `tf.function` traced for any width.
    """
    names, buckets, _ = _checked(features, None, sequence_features, buckets)
    if not length_grouping:
        if isinstance(model, keras.Model):
            return model.predict(features, batch_size=batch_size, verbose=0)
    width = buckets[-1]
    count = len(features[MASK_FEATURE])
    if keras_predict and isinstance(model, keras.Model):
        # Keras compiles its predict step once per batch shape (callers pass few widths: `compiled` buckets).
        function = model.predict_on_batch
        structure = model.output
    else:
        function = _inference_function(model, features, names)
        structure = function.get_concrete_function().structured_outputs
    # Axes past the batch axis whose static size is unknown follow the sequence length.
    sequence_axes = [
        {axis for axis in range(1, len(spec.shape)) if spec.shape[axis] is None} for spec in tf.nest.flatten(structure)
    ]
    results = None
    if length_grouping:
        batches = eval_batches(features, batch_size, buckets=buckets, sequence_features=names)
    else:
        batches = _batches_in_order(features, batch_size, count)
    for rows, batch in batches:
        # 16-bit outputs of a mixed-precision model come back float32 (numpy has no bfloat16 to pad with).
        outputs = [np.asarray(_widened(t)) for t in tf.nest.flatten(function(batch))]
        if results is None:
            results = []
            for output, axes in zip(outputs, sequence_axes):
                shape = [count] + [width if axis in axes else size for axis, size in enumerate(output.shape) if axis]
                fill = pad_value if np.issubdtype(output.dtype, np.floating) else 0
                results.append(np.full(shape, fill, output.dtype))
        for result, output in zip(results, outputs):
            index = (rows,) + tuple(slice(0, size) for size in output.shape[1:])
            result[index] = output
    if results is None:
        raise LengthBatchingError("no examples to predict")
    return tf.nest.pack_sequence_as(structure, results)


def _widened(tensor):
    return tf.cast(tensor, tf.float32) if tensor.dtype in (tf.bfloat16, tf.float16) else tensor


def _batches_in_order(features, batch_size, count):
    for begin in range(0, count, batch_size):
        rows = np.arange(begin, min(begin + batch_size, count))
        yield rows, {name: np.asarray(value)[rows] for name, value in features.items()}
