"""Results-changing details of the original's fine-tuning and pretraining set-up (issue 15).

Gradient clipping in fine-tuning, the runners' schedules, `hidden_act` names,
`--init_from_group0` / `--start_warmup_step`, the v2 null threshold, answer
text from character spans, and the pretraining shuffle buffer.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

import keras

from albert_tf import finetuning, optimization
from albert_tf.optimization import AdamWeightDecay, create_optimizer
from conftest import CONFIGS


# ---- 1. clipping to global norm 1.0 before the update ----------------------------------------------
def _toy_variables():
    rng = np.random.default_rng(0)
    kernel = keras.Variable(rng.normal(size=(3, 4)).astype("float32"), name="kernel")
    bias = keras.Variable(rng.normal(size=(4,)).astype("float32"), name="bias")
    return [kernel, bias]


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_huge_gradient_update_equals_the_clipped_one(name):
    rng = np.random.default_rng(1)
    huge = [tf.constant(1e6 * rng.normal(size=v.shape).astype("float32")) for v in _toy_variables()]
    small = [tf.constant(0.1 * rng.normal(size=v.shape).astype("float32")) for v in _toy_variables()]
    clipped_huge, norm = tf.clip_by_global_norm(huge, 1.0)
    assert float(norm) > 1e6 and float(tf.linalg.global_norm(small)) < 1.0
    runs = {}
    for label, clip_norm, steps in (("clipping", 1.0, (huge, small)), ("by_hand", None, (clipped_huge, small)),
                                    ("unclipped", None, (huge, small))):
        variables = _toy_variables()
        optimizer = create_optimizer(name, 0.1, 100, 0, clip_norm=clip_norm)
        assert optimizer.global_clipnorm == clip_norm
        for grads in steps:  # the slots carry the clipped gradient into the next step
            optimizer.apply(grads, variables)
        runs[label] = [v.numpy() for v in variables]
    for a, b in zip(runs["clipping"], runs["by_hand"]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert not np.allclose(runs["clipping"][0], runs["unclipped"][0], rtol=1e-3)


def test_embedding_slices_are_clipped_by_the_norm_of_the_summed_gradient():
    """A token twice in a batch: its row's gradient is the sum, and the norm is the dense one."""
    table = keras.Variable(np.ones((3, 2), "float32"), name="embeddings")
    slices = tf.IndexedSlices(tf.constant([[3.0, 0.0], [3.0, 0.0]]), tf.constant([0, 0]), tf.constant([3, 2]))
    optimizer = AdamWeightDecay(learning_rate=0.1, global_clipnorm=1.0)
    clipped = optimizer._clip_gradients([slices])[0]
    np.testing.assert_allclose(np.asarray(clipped), [[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]], rtol=1e-6)
    optimizer.apply([slices], [table])  # and the update goes through
    assert np.isfinite(table.numpy()).all()


def test_fine_tuning_clips_every_update(tmp_path):
    """`finetuning.train`: one step on a tiny classifier equals AdamW on the clipped gradient."""
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.classifier import AlbertClassifier

    keras.utils.set_random_seed(3)
    model = AlbertClassifier(AlbertBackbone.from_albert_config(str(CONFIGS / "albert_tiny.json")), 2, dropout=0.0)
    rng = np.random.default_rng(0)
    features = {"input_ids": rng.integers(5, 8000, size=(8, 16)).astype("int32"),
                "input_mask": np.ones((8, 16), "int32"), "segment_ids": np.zeros((8, 16), "int32")}
    labels = rng.integers(0, 2, size=8).astype("int32")
    before = [np.array(w) for w in model.get_weights()]

    def huge_loss(y, logits):  # gradients far above norm 1
        return 1e4 * finetuning.classification_loss(y, logits)

    with finetuning._unread_pooler_frozen(model):
        variables = model.trainable_variables
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(huge_loss(labels, model(features, training=True)["logits"]))
        grads, norm = tf.clip_by_global_norm([tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)],
                                             1.0)
        assert float(norm) > 10
        reference = optimization.create_optimizer("adamw", 1e-3, 10, 0)
        reference.apply(grads, variables)
        expected = [np.array(w) for w in model.get_weights()]
    model.set_weights(before)
    settings = finetuning.FineTuneSettings(output_dir=str(tmp_path), train_step=1, train_batch_size=8,
                                           learning_rate=1e-3, verbose=False, save_checkpoints_steps=1)
    dataset = finetuning.train_dataset(features, labels, 8, seed=0)
    finetuning.train(model, dataset, settings, huge_loss, lambda m: {"accuracy": 0.0}, "accuracy")
    assert model.optimizer.global_clipnorm == finetuning.CLIP_NORM == 1.0
    for got, want in zip(model.get_weights(), expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
