"""Length-aware batching (albert_tf.inputs.length_batching): same outputs, less padding, training randomness kept."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertBackbone
from albert_tf.inputs import length_batching
from albert_tf.inputs.length_batching import LengthBatchingError, bucket_lengths, predict_in_order, true_lengths
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.models.span_qa import AlbertSpanQA
from albert_tf.tasks import glue
from albert_tf.tokenization import SentencePieceTokenizer

TINY = "configs/albert_tiny.json"
MAX_SEQ_LENGTH = 128
BUCKETS = bucket_lengths(MAX_SEQ_LENGTH)


@pytest.fixture(scope="module")
def glue_dev(real_data, wikitext_spm):
    """Encoded SST-2 dev (single sentences) and MRPC dev (pairs), fixed-padded at 128 as the encoders do."""
    tokenizer = SentencePieceTokenizer(wikitext_spm)
    encoded = {}
    for name in ("sst-2", "mrpc"):
        examples, _ = glue.task(name, str(real_data / "glue")).read("dev")
        encoded[name] = (
            glue.encode_examples(examples, tokenizer, MAX_SEQ_LENGTH),
            np.array([int(e.label) for e in examples]),
        )
    return encoded


@pytest.fixture(scope="module")
def backbone():
    keras.utils.set_random_seed(7)
    return AlbertBackbone.from_albert_config(TINY)


def test_true_lengths_take_the_last_mask_position_and_the_longest_choice():
    mask = np.zeros((2, 3, 10), "int32")
    mask[0, 0, :4] = mask[0, 1, :7] = mask[0, 2, :2] = 1
    mask[1, 2, :1] = 1
    assert true_lengths({"input_mask": mask}).tolist() == [7, 1]
    assert true_lengths({"input_mask": mask[:, 1]}).tolist() == [7, 0]
    assert bucket_lengths(128) == (16, 32, 48, 64, 80, 96, 112, 128)
    assert bucket_lengths(40) == (16, 32, 40)
    assert length_batching.bucket_of(np.array([1, 16, 17, 40]), (16, 32, 40)).tolist() == [16, 16, 32, 40]


def test_bad_inputs_are_named():
    features = {"input_ids": np.ones((4, 8), "int32"), "input_mask": np.ones((4, 8), "int32")}
    with pytest.raises(LengthBatchingError, match="'input_mask'"):
        length_batching.train_dataset({"input_ids": features["input_ids"]}, np.zeros(4), 2, 1)
    with pytest.raises(LengthBatchingError, match="4 training examples, fewer than --train_batch_size 8"):
        length_batching.train_dataset(features, np.zeros(4), 8, 1)
    with pytest.raises(LengthBatchingError, match="'segment_ids' has length 6"):
        length_batching.train_dataset({**features, "segment_ids": np.ones((4, 6), "int32")}, np.zeros(4), 2, 1)
    with pytest.raises(LengthBatchingError, match="longest bucket must be the features' length 8"):
        list(length_batching.eval_batches(features, 2, buckets=(4,)))


@pytest.mark.slow
@pytest.mark.realdata
@pytest.mark.parametrize("name", ["sst-2", "mrpc"])
def test_predictions_equal_the_fixed_padding_path_in_input_order(glue_dev, backbone, name):
    features, _ = glue_dev[name]
    model = AlbertClassifier(backbone, num_classes=2)
    fixed = model.predict(features, batch_size=32, verbose=0)["logits"]
    grouped = predict_in_order(model, features, 32)["logits"]
    assert grouped.shape == fixed.shape
    np.testing.assert_allclose(grouped, fixed, atol=1e-5, rtol=1e-5)
    assert (grouped.argmax(-1) == fixed.argmax(-1)).all()
    # Input order is restored row for row: a shuffled input gives the same rows shuffled.
    permutation = np.random.default_rng(0).permutation(len(fixed))
    shuffled = predict_in_order(model, {k: v[permutation] for k, v in features.items()}, 32)["logits"]
    np.testing.assert_array_equal(shuffled, grouped[permutation])
    # The off switch is today's predict.
    np.testing.assert_array_equal(predict_in_order(model, features, 32, length_grouping=False)["logits"], fixed)


@pytest.mark.realdata
def test_eval_batches_are_sorted_cut_to_buckets_and_cover_every_row_once(glue_dev):
    features, _ = glue_dev["sst-2"]
    lengths = true_lengths(features)
    seen, widths, real, computed = [], [], 0, 0
    for rows, batch in length_batching.eval_batches(features, 32):
        width = batch["input_ids"].shape[1]
        assert width in BUCKETS and lengths[rows].max() <= width
        assert width == BUCKETS[0] or lengths[rows].max() > width - 16  # the smallest bucket that holds it
        np.testing.assert_array_equal(batch["input_ids"], features["input_ids"][rows, :width])
        seen += rows.tolist()
        widths.append(width)
        real, computed = real + lengths[rows].sum(), computed + width * len(rows)
    assert sorted(seen) == list(range(len(lengths)))
    assert widths == sorted(widths) and len(set(widths)) > 2
    # SST-2 dev sentences are short: far fewer tokens than fixed 128 pads to.
    assert computed < 0.5 * MAX_SEQ_LENGTH * len(lengths)
    assert real <= computed


@pytest.mark.slow
@pytest.mark.realdata
def test_per_token_logits_are_padded_back_to_max_seq_length(glue_dev, backbone):
    features, _ = glue_dev["mrpc"]
    model = AlbertSpanQA(backbone)
    fixed = model.predict(features, batch_size=16, verbose=0)
    grouped = predict_in_order(model, features, 16)
    mask = features["input_mask"] == 1
    # Past each row's batch width nothing was computed: the pad value there, never a top answer.
    widths = np.zeros(len(mask), int)
    for rows, batch in length_batching.eval_batches(features, 16):
        widths[rows] = batch["input_ids"].shape[1]
    cut = np.arange(MAX_SEQ_LENGTH)[None, :] >= widths[:, None]
    assert cut.any()
    for name in ("start_logits", "end_logits"):
        assert grouped[name].shape == fixed[name].shape == features["input_ids"].shape
        np.testing.assert_allclose(grouped[name][mask], fixed[name][mask], atol=1e-5, rtol=1e-5)
        assert (grouped[name][cut] == np.float32(length_batching.PAD_LOGIT)).all()


@pytest.mark.slow
@pytest.mark.realdata
def test_race_shaped_features_group_by_the_longest_choice(glue_dev, backbone):
    features, labels = glue_dev["mrpc"]
    count = len(labels) // 4 * 4
    race = {k: v[:count].reshape(count // 4, 4, MAX_SEQ_LENGTH) for k, v in features.items()}
    model = AlbertMultipleChoice(backbone, num_choices=4)
    fixed = model.predict(race, batch_size=8, verbose=0)["logits"]
    grouped = predict_in_order(model, race, 8)["logits"]
    np.testing.assert_allclose(grouped, fixed, atol=1e-5, rtol=1e-5)
    assert (grouped.argmax(-1) == fixed.argmax(-1)).all()
    dataset = length_batching.train_dataset(race, np.arange(count // 4), 8, seed=3, pool_batches=5)
    assert dataset.element_spec[0]["input_ids"].shape.as_list() == [8, 4, None]
    lengths = true_lengths(race)
    for batch, rows in dataset.take(10):
        width = batch["input_mask"].shape[-1]
        assert width in BUCKETS and width >= lengths[rows["logits"].numpy()].max()


def epoch_of_pools(dataset, steps):
    """(the example indices of `steps` batches, in order; the batches' sequence widths)."""
    rows, widths = [], []
    for batch, labels in dataset.take(steps):
        rows.append(labels["logits"].numpy())
        widths.append(batch["input_ids"].shape[1])
        assert batch["input_ids"].shape[0] == len(rows[-1])
    return np.concatenate(rows), widths


@pytest.mark.realdata
def test_training_batches_hold_every_example_once_per_epoch_cut_to_buckets(glue_dev):
    features, _ = glue_dev["sst-2"]
    count, batch_size, pool_batches = 640, 16, 10  # 4 pools are one epoch
    features = {k: v[:count] for k, v in features.items()}
    indices = np.arange(count)
    lengths = true_lengths(features)

    def dataset(seed, **kwargs):
        return length_batching.train_dataset(features, indices, batch_size, seed, pool_batches=pool_batches, **kwargs)

    assert dataset(5).element_spec[0]["input_ids"].shape.as_list() == [batch_size, None]
    rows, widths = epoch_of_pools(dataset(5), 2 * count // batch_size)
    for epoch in rows.reshape(2, count):
        assert sorted(epoch) == indices.tolist()
    for batch, width in zip(rows.reshape(-1, batch_size), widths):
        assert width in BUCKETS and lengths[batch].max() <= width
        assert width == BUCKETS[0] or lengths[batch].max() > width - 16
    assert len(set(widths)) > 2 and np.mean(widths) < 0.5 * MAX_SEQ_LENGTH
    # Batch rows hold neighbouring lengths: far less spread than random batches.
    assert np.mean(np.ptp(lengths[rows.reshape(-1, batch_size)], axis=1)) < 0.3 * np.ptp(lengths)
    # Deterministic for a seed; another seed, another order; batches in a pool served shuffled.
    again, _ = epoch_of_pools(dataset(5), 2 * count // batch_size)
    np.testing.assert_array_equal(again, rows)
    other, _ = epoch_of_pools(dataset(6), 2 * count // batch_size)
    assert not np.array_equal(other, rows)
    assert widths[:pool_batches] != sorted(widths[:pool_batches])
    # The features are the rows' own, cut.
    batch, labels = next(iter(dataset(5)))
    np.testing.assert_array_equal(batch["segment_ids"], features["segment_ids"][labels["logits"].numpy(), : widths[0]])


@pytest.mark.realdata
def test_off_switch_is_todays_fixed_padding(glue_dev):
    from albert_tf.finetuning.datasets import train_dataset

    features, labels = glue_dev["mrpc"]
    # The original's pipeline: every row at max_seq_length, examples shuffled, batches in stream order.
    today = (
        tf.data.Dataset.from_tensor_slices((features, {"logits": labels}))
        .shuffle(len(labels), seed=9, reshuffle_each_iteration=True)
        .repeat()
        .batch(16, drop_remainder=True)
    )
    runner_off = train_dataset(features, labels, 16, seed=9, length_grouping=False)
    assert runner_off.element_spec == today.element_spec
    off = length_batching.train_dataset(features, labels, 16, seed=9, length_grouping=False)
    assert off.element_spec == today.element_spec
    assert off.element_spec[0]["input_ids"].shape.as_list() == [16, MAX_SEQ_LENGTH]
    # An epoch's batches hold every example once, shuffled (ids identify the rows: MRPC dev has no duplicate pair).
    rows = {row.tobytes(): i for i, row in enumerate(features["input_ids"])}
    per_epoch = len(labels) // 16
    seen = [rows[row.tobytes()] for batch, _ in off.take(per_epoch) for row in batch["input_ids"].numpy()]
    assert len(seen) == len(set(seen)) == per_epoch * 16 and seen != sorted(seen)


def test_every_iterator_of_a_training_dataset_yields_the_same_batches(glue_dev):
    # Keras iterates a dataset once to build the model under a tf.distribute strategy, then again to
    # train: the order must be the seed's, not the iterator's (shuffle's reshuffle_each_iteration).
    features, labels = glue_dev["mrpc"]
    for grouping in (True, False):
        dataset = length_batching.train_dataset(features, labels, 16, seed=9, length_grouping=grouping)
        first, second = [[b["input_ids"].numpy() for b, _ in dataset.take(30)] for _ in range(2)]
        again = [
            b["input_ids"].numpy()
            for b, _ in length_batching.train_dataset(features, labels, 16, seed=9, length_grouping=grouping).take(30)
        ]
        for a, b, c in zip(first, second, again):
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(a, c)


@pytest.mark.slow
@pytest.mark.realdata
def test_keras_fit_trains_on_grouped_batches_under_a_mirrored_strategy(glue_dev):
    features, labels = glue_dev["sst-2"]
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        keras.utils.set_random_seed(1)
        model = AlbertClassifier(AlbertBackbone.from_albert_config(TINY), num_classes=2)
        model.compile(
            optimizer=keras.optimizers.Adam(1e-3),
            loss={"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
        )
    dataset = length_batching.train_dataset(features, labels, 16, seed=2, pool_batches=8)
    before = [w.copy() for w in model.get_weights()]
    history = model.fit(dataset, steps_per_epoch=12, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert all(np.abs(a - b).max() > 0 for a, b in zip(before, model.get_weights()) if a.ndim == 2)


@pytest.mark.slow
@pytest.mark.realdata
def test_early_exit_and_mixed_precision_models_predict_as_with_fixed_padding(glue_dev, backbone):
    from albert_tf.models.early_exit import AlbertEarlyExitClassifier

    features, _ = glue_dev["sst-2"]
    features = {k: v[:200] for k, v in features.items()}
    early_exit = AlbertEarlyExitClassifier(backbone, num_classes=2)
    fixed, grouped = early_exit.predict(features, batch_size=32, verbose=0), predict_in_order(early_exit, features, 32)
    assert grouped["exit_logits"].shape == fixed["exit_logits"].shape == (200, 4, 2)
    for name in ("logits", "exit_logits"):
        np.testing.assert_allclose(grouped[name], fixed[name], atol=1e-5, rtol=1e-5)
    keras.utils.set_random_seed(7)
    bf16 = AlbertClassifier(AlbertBackbone.from_albert_config(TINY, dtype="mixed_bfloat16"), num_classes=2)
    bf16.set_weights(AlbertClassifier(backbone, num_classes=2).get_weights())
    fixed = bf16.predict(features, batch_size=32, verbose=0)["logits"]
    grouped = predict_in_order(bf16, features, 32)["logits"]
    assert grouped.dtype == fixed.dtype
    np.testing.assert_allclose(grouped, fixed, atol=3e-2)


@pytest.mark.slow
@pytest.mark.realdata
def test_fine_tuning_trains_on_grouped_batches_with_remat_and_gradient_accumulation(glue_dev, tmp_path):
    from albert_tf.finetuning import training
    from albert_tf.finetuning.settings import FineTuneSettings

    from finetune_helpers import NO_DEV, ScriptedTask

    features, labels = glue_dev["sst-2"]
    settings = FineTuneSettings(
        output_dir=str(tmp_path),
        train_step=6,
        save_checkpoints_steps=3,
        max_seq_length=MAX_SEQ_LENGTH,
        train_batch_size=16,
        grad_accum_steps=2,
        remat=True,
        learning_rate=1e-3,
        verbose=False,
    )
    keras.utils.set_random_seed(3)
    model = AlbertClassifier(AlbertBackbone.from_albert_config(TINY, remat=True), num_classes=2)
    dataset = length_batching.train_dataset(features, labels, settings.micro_batch_size, seed=3, pool_batches=10)
    task = ScriptedTask(score=lambda predicted: {"accuracy": float(np.mean(predicted == labels))})
    result = training.train(
        task,
        model,
        dataset,
        settings,
        NO_DEV,
        lambda trained, dev: predict_in_order(trained, features, 64)["logits"].argmax(-1),
    )
    assert [h["global_step"] for h in result["history"]] == [3, 6]
    assert all(np.isfinite(h["train_loss"]) for h in result["history"])
    # The trained (no longer random) model predicts the same through both paths.
    trained = model.predict(features, batch_size=64, verbose=0)["logits"]
    np.testing.assert_allclose(predict_in_order(model, features, 64)["logits"], trained, atol=1e-5, rtol=1e-5)
    assert result["best"]["accuracy"] == max(h["accuracy"] for h in result["history"])
