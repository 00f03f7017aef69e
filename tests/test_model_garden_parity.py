"""Parity with TF Model Garden (tf-models-official 2.20): the same TF1-layout
checkpoint, converted by Model Garden's own converter into its AlbertEncoder
and by ours into AlbertBackbone, gives the same outputs."""

import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertBackbone
from albert_tf.formats import load_weights
from albert_tf.formats.original import write_original_checkpoint

from reference_numpy import random_original_checkpoint

tf_keras = pytest.importorskip("tf_keras")
mg_configs = pytest.importorskip("official.legacy.albert.configs")
mg_converter = pytest.importorskip("official.nlp.tools.tf2_albert_encoder_checkpoint_converter")
from official.modeling import tf_utils  # noqa: E402
from official.nlp.modeling import networks  # noqa: E402


def model_garden_encoder(cfg):
    """Built exactly as Model Garden's converter builds it."""
    return networks.AlbertEncoder(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.hidden_size,
        embedding_width=cfg.embedding_size,
        num_layers=cfg.num_hidden_layers,
        num_attention_heads=cfg.num_attention_heads,
        intermediate_size=cfg.intermediate_size,
        activation=tf_utils.get_activation(cfg.hidden_act),
        dropout_rate=cfg.hidden_dropout_prob,
        attention_dropout_rate=cfg.attention_probs_dropout_prob,
        max_sequence_length=cfg.max_position_embeddings,
        type_vocab_size=cfg.type_vocab_size,
        initializer=tf_keras.initializers.TruncatedNormal(stddev=cfg.initializer_range),
        dict_outputs=True,
    )


@pytest.mark.parametrize("config_name", ["albert_tiny", "bert_like_tiny"])
def test_same_outputs_as_model_garden_from_one_checkpoint(tmp_path, config_name):
    with open("configs/albert_tiny.json") as f:
        values = json.load(f)
    if config_name == "bert_like_tiny":
        values["embedding_size"] = values["hidden_size"]  # no projection
    config_path = tmp_path / "albert_config.json"
    config_path.write_text(json.dumps(values))
    rng = np.random.default_rng(3)
    weights = random_original_checkpoint(values, rng)
    weights["global_step"] = np.array(1000, np.int64)
    prefix = write_original_checkpoint(weights, str(tmp_path / "google" / "model.ckpt"))

    mg_cfg = mg_configs.AlbertConfig.from_json_file(str(config_path))
    (tmp_path / "mg" / "temp_v1").mkdir(parents=True)  # its converter needs it
    mg_path = str(tmp_path / "mg" / "encoder")
    mg_converter.convert_checkpoint(mg_cfg, mg_path, prefix, "encoder")
    encoder = model_garden_encoder(mg_cfg)
    tf.train.Checkpoint(encoder=encoder).restore(
        tf.train.latest_checkpoint(str(tmp_path / "mg"))
    ).assert_existing_objects_matched()

    ours = AlbertBackbone.from_albert_config(str(config_path))
    load_weights(ours, prefix)

    ids = rng.integers(5, values["vocab_size"], (3, 24)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 17:] = 0
    mask[2, 5:] = 0
    segments = np.zeros_like(ids)
    segments[:, 12:] = 1
    theirs = encoder({"input_word_ids": ids, "input_mask": mask, "input_type_ids": segments})
    mine = ours({"input_ids": ids, "input_mask": mask, "segment_ids": segments})
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(np.asarray(mine[key]), theirs[key].numpy(), atol=1e-5, rtol=0)
