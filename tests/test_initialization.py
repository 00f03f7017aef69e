"""Every model starts from the original's initialisation: one independent truncated-normal draw per weight."""

import itertools
import json
import math

import keras
import numpy as np
import pytest

from albert_tf import AlbertBackbone, AlbertConfig, AlbertPretrainer
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.models.span_qa import AlbertSpanQA
from albert_tf.models.span_qa_answerability import AlbertSpanQAv2
from albert_tf.models.token_classifier import AlbertTokenClassifier

from paths import CONFIGS

# Two groups of two inner blocks, and embedding_size != hidden_size (so the projection exists).
CONFIG_OVERRIDES = dict(vocab_size=1000, num_hidden_groups=2, inner_group_num=2)
# Weights drawn at random; every other weight (bias, LayerNorm gamma/beta, MLM output bias) is a constant.
RANDOM_SUFFIXES = ("/kernel", "/embeddings", "position_embeddings")
# std of a normal truncated at ±2σ, as a fraction of σ: sqrt(1 - 2·2·φ(2) / (2Φ(2) - 1)).
_PHI_2 = math.exp(-2.0) / math.sqrt(2 * math.pi)
TRUNCATED_STD_FACTOR = math.sqrt(1 - 4 * _PHI_2 / math.erf(2 / math.sqrt(2)))

MODELS = {
    "backbone": lambda backbone: backbone,
    "pretrainer": AlbertPretrainer,
    "classifier": lambda backbone: AlbertClassifier(backbone, num_classes=3),
    "token_classifier": lambda backbone: AlbertTokenClassifier(backbone, num_classes=5),
    "span_qa": AlbertSpanQA,
    "span_qa_v2": AlbertSpanQAv2,
    "multiple_choice": AlbertMultipleChoice,
}


def config():
    with open(CONFIGS / "albert_tiny.json") as f:
        values = json.load(f)
    values.update(CONFIG_OVERRIDES)
    return AlbertConfig.from_dict(values)


def build(kind, seed):
    keras.utils.set_random_seed(seed)
    return MODELS[kind](AlbertBackbone.from_albert_config(config()))


def weight_values(model):
    return {weight.path: np.asarray(weight.numpy(), "float64") for weight in model.weights}


def random_weights(values):
    return {path: value for path, value in values.items() if path.endswith(RANDOM_SUFFIXES)}


def test_truncated_std_factor_is_the_known_constant():
    assert TRUNCATED_STD_FACTOR == pytest.approx(0.8796, abs=1e-4)


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_every_weight_is_its_own_draw(kind):
    values = weight_values(build(kind, seed=0))
    drawn = random_weights(values)
    assert "pooler/kernel" in drawn and "embedding_projection/kernel" in drawn
    for path, value in values.items():
        if path not in drawn:
            assert np.ptp(value) == 0, f"{path} should start constant"
    # A weight drawn with another's seed is a (reshaped) copy or a prefix of it in flat order.
    for (path_a, a), (path_b, b) in itertools.combinations(drawn.items(), 2):
        n = min(a.size, b.size)
        shared = np.mean(a.ravel()[:n] == b.ravel()[:n])
        assert shared < 0.01, f"{path_a} and {path_b} share {shared:.0%} of their first {n} values"


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_weights_follow_the_truncated_normal_of_initializer_range(kind):
    stddev = config().initializer_range
    expected_std = TRUNCATED_STD_FACTOR * stddev
    drawn = random_weights(weight_values(build(kind, seed=1)))
    for path, value in drawn.items():
        n = value.size
        assert np.max(np.abs(value)) <= 2 * stddev * (1 + 1e-6), path
        if n < 32:  # a 2-row token-type table says little about its distribution
            continue
        # Five standard errors: the test is about the distribution, not a lucky draw.
        assert abs(np.mean(value)) < 5 * expected_std / math.sqrt(n), path
        assert abs(np.std(value) - expected_std) < 5 * expected_std / math.sqrt(n) + 1e-4, path
    pooled = np.concatenate([value.ravel() for value in drawn.values()])
    assert np.std(pooled) == pytest.approx(expected_std, rel=0.01)
    assert np.mean(pooled) == pytest.approx(0.0, abs=0.01 * stddev)


@pytest.mark.parametrize("kind", ["pretrainer", "span_qa_v2"])
def test_set_random_seed_makes_a_model_reproducible(kind):
    first, again, other = (weight_values(build(kind, seed)) for seed in (7, 7, 8))
    assert first.keys() == again.keys() == other.keys()
    for path in first:
        np.testing.assert_array_equal(first[path], again[path], err_msg=path)
    for path in random_weights(first):
        assert not np.array_equal(first[path], other[path]), f"{path} is the same under seeds 7 and 8"
