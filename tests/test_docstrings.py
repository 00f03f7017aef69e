"""The examples in the docstrings run and print what they say."""

import doctest
import importlib
import os

import pytest

from paths import REPO

MODULES = [
    "albert_tf.config",
    "albert_tf.formats",
    "albert_tf.formats.base",
    "albert_tf.formats.loaded",
    "albert_tf.formats.original",
    "albert_tf.formats.native",
    "albert_tf.formats.run_dir",
    "albert_tf.confined",
    "albert_tf.layers.activations",
    "albert_tf.layers.attention",
    "albert_tf.layers.embedding",
    "albert_tf.layers.feedforward",
    "albert_tf.layers.heads",
    "albert_tf.models.backbone",
    "albert_tf.models.pretrainer",
    "albert_tf.pretraining.objective",
    "albert_tf.tokenization",
    "albert_tf.tokenization.registry",
    "albert_tf.tokenization.sentencepiece",
    "albert_tf.tokenization.text",
    "albert_tf.tokenization.tf_sentencepiece",
    "albert_tf.tokenization.tf_wordpiece",
    "albert_tf.tokenization.wordpiece",
    "albert_tf.inputs.shard_reader",
    "albert_tf.optimization",
    "albert_tf.export.saved_model",
    "albert_tf.errors",
    "albert_tf.publish",
    "albert_tf.shard_set",
    "albert_tf.export.signatures",
    "albert_tf.inputs.packing",
    "albert_tf.models.classifier",
    "albert_tf.models.token_classifier",
    "albert_tf.models.multiple_choice",
    "albert_tf.models.early_exit",
    "albert_tf.tasks.depth_weighted",
    "albert_tf.models.span_qa",
    "albert_tf.models.span_qa_answerability",
    "albert_tf.layers.answerability",
    "albert_tf.tasks.metrics",
    "albert_tf.tasks.settings",
    "albert_tf.tasks.losses",
    "albert_tf.tasks.history",
    "albert_tf.tasks.best_model",
    "albert_tf.run_layout",
    "albert_tf.tasks.glue",
    "albert_tf.tasks.race",
    "albert_tf.tasks.squad.evaluation",
    "albert_tf.formats.table",
    "albert_tf.formats.hf",
    "albert_tf.formats.keras_hub",
    "albert_tf.inference",
    "albert_tf.preemption",
    "albert_tf.pretraining.worker_faults",
    "albert_tf.pretraining.health",
    "data_prep.documents",
    "data_prep.masking",
    "data_prep.instances",
    "data_prep.tfrecord",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, monkeypatch):
    monkeypatch.chdir(REPO)  # examples name configs/ relative to the repo
    module = importlib.import_module(name)
    result = doctest.testmod(module, extraglobs={"tempfile": importlib.import_module("tempfile"), "os": os})
    assert result.attempted > 0, f"{name} has no example"
    assert result.failed == 0
