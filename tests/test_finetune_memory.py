"""Fine-tuning large models in less memory: accumulated micro-batches and remat change nothing but memory."""

import keras
import numpy as np
import pytest

from albert_tf.finetuning import training
from albert_tf.finetuning.datasets import train_dataset
from albert_tf.finetuning.settings import FineTuneError, FineTuneSettings
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.models.classifier import AlbertClassifier

from finetune_helpers import NO_DEV, ScriptedTask, no_predictions
from paths import CONFIGS


def one_step(tmp_path, name, weights, features, labels, grad_accum_steps, remat):
    keras.utils.set_random_seed(0)
    model = AlbertClassifier(
        AlbertBackbone.from_albert_config(str(CONFIGS / "albert_tiny.json"), remat=remat), 2, dropout=0.0
    )
    model.set_weights(weights)
    settings = FineTuneSettings(
        output_dir=str(tmp_path / name),
        train_batch_size=8,
        train_step=1,
        save_checkpoints_steps=1,
        learning_rate=1e-3,
        warmup_step=0,
        grad_accum_steps=grad_accum_steps,
        verbose=False,
    )
    dataset = train_dataset(features, labels, settings.micro_batch_size, seed=0)
    training.train(ScriptedTask(score=lambda _: {"accuracy": 0.0}), model, dataset, settings, NO_DEV, no_predictions)
    return [np.array(w) for w in model.get_weights()]


@pytest.mark.slow
def test_two_micro_batches_with_remat_make_the_update_of_one_full_batch(tmp_path):
    keras.utils.set_random_seed(1)
    reference = AlbertClassifier(AlbertBackbone.from_albert_config(str(CONFIGS / "albert_tiny.json")), 2, dropout=0.0)
    initial = [np.array(w) for w in reference.get_weights()]
    rng = np.random.default_rng(0)
    features = {
        "input_ids": rng.integers(5, 8000, size=(8, 16)).astype("int32"),
        "input_mask": np.ones((8, 16), "int32"),
        "segment_ids": np.zeros((8, 16), "int32"),
    }
    labels = rng.integers(0, 2, size=8).astype("int32")
    full = one_step(tmp_path, "full", initial, features, labels, grad_accum_steps=1, remat=False)
    small = one_step(tmp_path, "small", initial, features, labels, grad_accum_steps=2, remat=True)
    moved = [not np.allclose(a, b) for a, b in zip(full, initial)]
    assert sum(moved) > len(moved) // 2  # the step really updated the model
    for a, b in zip(full, small):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_batch_must_divide_into_micro_batches():
    import pytest

    with pytest.raises(FineTuneError, match="--train_batch_size 10 must divide by --grad_accum_steps 4"):
        _ = FineTuneSettings(output_dir="x", train_batch_size=10, grad_accum_steps=4).micro_batch_size


# ---- a batch far beyond the machine's memory is refused before training (hardening probes) ----
@pytest.mark.parametrize("remat", [False, True])
def test_a_batch_far_beyond_memory_is_refused_before_training(tmp_path, monkeypatch, remat):
    from albert_tf import memory_check
    from albert_tf.finetuning import training
    from albert_tf.finetuning.settings import FineTuneSettings
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.classifier import AlbertClassifier

    from toy_inputs import good_request

    monkeypatch.setattr(memory_check, "available_bytes", lambda: 2 * 2**30)  # a 2 GiB machine
    backbone = AlbertBackbone.from_albert_config(str(CONFIGS / "albert_base_v2.json"), remat=remat)
    model = AlbertClassifier(backbone, 2)
    features = good_request(4)
    del features["masked_lm_positions"]
    batch = 100_000 if remat else 2_000
    settings = FineTuneSettings(
        output_dir=str(tmp_path / "out"), train_batch_size=batch, max_seq_length=128, verbose=False
    )
    with pytest.raises(memory_check.MemoryLimitError, match=f"^--train_batch_size: {batch} sequences of 128 per step"):
        training.train(ScriptedTask([]), model, None, settings, NO_DEV, no_predictions)
    assert not (tmp_path / "out").exists()
    # What fits is not refused: the lower bound of a real batch.
    memory_check.check_batch_fits(backbone.albert_config, model.count_params(), 8, 128, remat)
