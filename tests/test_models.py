import json

import numpy as np
import pytest

from albert_tf import AlbertBackbone, AlbertConfig, AlbertPretrainer
from albert_tf.formats.original import load_original_checkpoint, write_original_checkpoint
from albert_tf.models.backbone import group_index
from albert_tf.pretraining.objective import masked_lm_loss, sentence_order_loss

from helpers import run_model_test
from paths import CONFIGS
from reference_numpy import albert_forward, random_original_checkpoint

RNG = np.random.default_rng(1)


def make_inputs(vocab_size, seq_len, batch=2, positions=None):
    ids = RNG.integers(5, vocab_size, (batch, seq_len)).astype("int32")
    mask = np.ones((batch, seq_len), "int32")
    mask[1, seq_len - 2 :] = 0
    segments = np.zeros((batch, seq_len), "int32")
    segments[:, seq_len // 2 :] = 1
    inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": segments}
    if positions:
        inputs["masked_lm_positions"] = RNG.integers(1, seq_len - 2, (batch, positions)).astype("int32")
    return inputs


def tiny(**overrides):
    with open("configs/albert_tiny.json") as f:
        values = json.load(f)
    values.update(overrides)
    return AlbertConfig.from_dict(values)


def test_backbone_shared_checks(tmp_path):
    config = tiny(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)

    def check(out, seq_len):
        assert tuple(out["sequence_output"].shape) == (2, seq_len, config.hidden_size)
        assert tuple(out["pooled_output"].shape) == (2, config.hidden_size)

    run_model_test(
        lambda dtype: AlbertBackbone.from_albert_config(config, dtype=dtype),
        lambda s: make_inputs(config.vocab_size, s),
        tmp_path,
        float32_outputs=["sequence_output"],
        check_outputs=check,
    )


def test_pretrainer_shared_checks(tmp_path):
    config = tiny(num_hidden_groups=2, inner_group_num=2)

    def check(out, seq_len):
        assert tuple(out["mlm_logits"].shape) == (2, 3, config.vocab_size)
        assert tuple(out["sop_logits"].shape) == (2, 2)

    run_model_test(
        lambda dtype: AlbertPretrainer(AlbertBackbone.from_albert_config(config, dtype=dtype)),
        lambda s: make_inputs(config.vocab_size, s, positions=3),
        tmp_path,
        float32_outputs=["mlm_logits", "sop_logits"],
        check_outputs=check,
    )


@pytest.mark.parametrize("layers,groups,inner", [(4, 1, 1), (6, 3, 1), (3, 2, 2), (5, 2, 1)])
def test_forward_matches_the_original_math_for_any_groups(tmp_path, layers, groups, inner):
    """G>1 and K>1 checkpoints route each layer to the right weights."""
    config = tiny(num_hidden_layers=layers, num_hidden_groups=groups, inner_group_num=inner)
    values = random_original_checkpoint(config.to_dict(), RNG)
    prefix = write_original_checkpoint(values, str(tmp_path / "model.ckpt"))
    model = AlbertPretrainer(AlbertBackbone.from_albert_config(config, output_all_layers=True))
    load_original_checkpoint(model, prefix)
    inputs = make_inputs(config.vocab_size, 10, positions=4)
    backbone_out = model.backbone({k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids")})
    out = model(inputs)
    ref = albert_forward(
        values,
        config.to_dict(),
        inputs["input_ids"],
        inputs["input_mask"],
        inputs["segment_ids"],
        inputs["masked_lm_positions"],
    )
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(backbone_out[key], ref[key], atol=1e-4)
    for key in ("mlm_logits", "sop_logits"):
        np.testing.assert_allclose(out[key], ref[key], atol=1e-4)
    assert len(backbone_out["encoder_outputs"]) == layers * inner
    for ours, theirs in zip(backbone_out["encoder_outputs"], ref["encoder_outputs"]):
        np.testing.assert_allclose(ours, theirs, atol=1e-4)


def test_group_routing_copies_the_float_expression():
    # L = G = 22: layer 15 uses group 14 in the original (15/22*22 < 15).
    assert [group_index(l, 22, 22) for l in range(22)][14:17] == [14, 14, 16]
    assert [group_index(l, 6, 3) for l in range(6)] == [0, 0, 1, 1, 2, 2]
    backbone = AlbertBackbone.from_albert_config(tiny(num_hidden_layers=22, num_hidden_groups=22))
    assert "group_15_inner_0_attention" not in backbone.block_names
    assert len(backbone.block_names) == 2 * 21


@pytest.mark.parametrize("sharing,attention,ffn", [("all", 1, 1), ("attention", 1, 4), ("ffn", 4, 1), ("none", 4, 4)])
def test_sharing_modes(sharing, attention, ffn):
    backbone = AlbertBackbone.from_albert_config(tiny(sharing=sharing))
    names = backbone.block_names
    assert sum(n.endswith("_attention") for n in names) == attention
    assert sum(n.endswith("_ffn") for n in names) == ffn
    config = backbone.albert_config
    H, I = config.hidden_size, config.intermediate_size
    per_attention = 4 * (H * H + H) + 2 * H
    per_ffn = H * I + I + I * H + H + 2 * H
    shared = AlbertBackbone.from_albert_config(tiny()).count_params()
    assert backbone.count_params() == shared + (attention - 1) * per_attention + (ffn - 1) * per_ffn


def test_projection_exists_only_when_widths_differ():
    assert AlbertBackbone.from_albert_config(tiny()).embedding_projection is not None
    bert_like = AlbertBackbone.from_albert_config(tiny(embedding_size=64))
    assert bert_like.embedding_projection is None
    assert not any("embedding_projection" in w.path for w in bert_like.weights)


def test_mlm_decoder_is_tied_to_the_word_embeddings():
    model = AlbertPretrainer(AlbertBackbone.from_albert_config(tiny()))
    inputs = make_inputs(8000, 8, positions=2)
    before = model(inputs)["mlm_logits"]
    table = model.backbone.word_embeddings.embeddings
    table.assign(table.numpy() * 2.0)
    after = model(inputs)["mlm_logits"]
    assert np.max(np.abs(np.asarray(after) - np.asarray(before))) > 1e-3
    # Only the bias is new: 8000 + transform + LN + SOP over the backbone.
    H, E = 64, 32
    extra = model.count_params() - model.backbone.count_params()
    assert extra == 8000 + (H * E + E) + 2 * E + (2 * H + 2)


def test_losses_follow_the_original_normalisation():
    logits = RNG.standard_normal((2, 3, 7)).astype("float32")
    ids = RNG.integers(0, 7, (2, 3))
    weights = np.array([[1, 1, 0], [1, 0, 0]], "float32")
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_probs, ids[..., None], -1)[..., 0]
    expected = (nll * weights).sum() / (weights.sum() + 1e-5)
    np.testing.assert_allclose(masked_lm_loss(logits, ids, weights), expected, rtol=1e-6)
    sop = RNG.standard_normal((4, 2)).astype("float32")
    labels = np.array([0, 1, 1, 0])
    lp = sop - np.log(np.exp(sop).sum(-1, keepdims=True))
    np.testing.assert_allclose(sentence_order_loss(sop, labels), -lp[np.arange(4), labels].mean(), rtol=1e-6)


def test_sequence_longer_than_the_position_table_fails():
    backbone = AlbertBackbone.from_albert_config(tiny(max_position_embeddings=8))
    with pytest.raises(ValueError, match="sequence length 9 exceeds max_position_embeddings=8"):
        backbone(make_inputs(8000, 9))


@pytest.mark.parametrize(
    "kind", ["classifier", "regression", "token_classifier", "multiple_choice", "span_qa", "span_qa_v2"]
)
def test_task_models(kind, tmp_path):
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.models.multiple_choice import AlbertMultipleChoice
    from albert_tf.models.span_qa import AlbertSpanQA
    from albert_tf.models.span_qa_answerability import AlbertSpanQAv2
    from albert_tf.models.token_classifier import AlbertTokenClassifier

    config = str(CONFIGS / "albert_tiny.json")
    choices = 4 if kind == "multiple_choice" else None

    def factory(dtype):
        backbone = AlbertBackbone.from_albert_config(config, dtype=dtype)
        return {
            "classifier": lambda: AlbertClassifier(backbone, 3, dtype=dtype),
            "regression": lambda: AlbertClassifier(backbone, 1, dtype=dtype),
            "token_classifier": lambda: AlbertTokenClassifier(backbone, 5, dtype=dtype),
            "multiple_choice": lambda: AlbertMultipleChoice(backbone, dtype=dtype),
            "span_qa": lambda: AlbertSpanQA(backbone, dtype=dtype),
            "span_qa_v2": lambda: AlbertSpanQAv2(backbone, start_n_top=2, dtype=dtype),
        }[kind]()

    def make_inputs(seq_len):
        shape = (2, choices, seq_len) if choices else (2, seq_len)
        rng = np.random.default_rng(seq_len)
        mask = np.ones(shape, "int32")
        mask[0, ..., seq_len // 2 :] = 0
        segments = np.zeros(shape, "int32")
        segments[..., 3:] = 1  # span QA: a 2-piece question, then the context
        return {"input_ids": rng.integers(0, 8000, shape).astype("int32"), "input_mask": mask, "segment_ids": segments}

    expected_shapes = {
        "classifier": {"logits": lambda s: (2, 3)},
        "regression": {"logits": lambda s: (2, 1)},
        "token_classifier": {"logits": lambda s: (2, s, 5)},
        "multiple_choice": {"logits": lambda s: (2, 4)},
        "span_qa": {"start_logits": lambda s: (2, s), "end_logits": lambda s: (2, s)},
        "span_qa_v2": {
            "start_logits": lambda s: (2, s),
            "end_logits": lambda s: (2, 2, s),
            "cls_logits": lambda s: (2,),
            "start_positions": lambda s: (2, 2),
        },
    }[kind]

    def check(outputs, seq_len):
        assert {name: tuple(outputs[name].shape) for name in expected_shapes} == {
            name: shape(seq_len) for name, shape in expected_shapes.items()
        }

    float32_outputs = [name for name in expected_shapes if name != "start_positions"]
    run_model_test(factory, make_inputs, tmp_path, float32_outputs=float32_outputs, check_outputs=check)
