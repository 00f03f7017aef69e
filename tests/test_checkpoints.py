import json
import os

import numpy as np
import pytest

from albert_tf import AlbertBackbone, AlbertConfig, AlbertPretrainer, formats
from albert_tf.convert_checkpoint import convert
from albert_tf.formats import CheckpointError
from albert_tf.formats import original as tf1

from command_helpers import run_command
from paths import CONFIGS
from reference_numpy import random_original_checkpoint

RNG = np.random.default_rng(2)


def tiny_dict(**overrides):
    with open(CONFIGS / "albert_tiny.json") as f:
        return {**json.load(f), **overrides}


def write_config(tmp_path, name="albert_config.json", **overrides):
    path = tmp_path / name
    path.write_text(json.dumps(tiny_dict(**overrides)))
    return str(path)


def original(tmp_path, with_heads=True, extra=None, prefix_names="", **overrides):
    values = random_original_checkpoint(tiny_dict(**overrides), RNG, with_heads=with_heads)
    values = {prefix_names + k: v for k, v in values.items()}
    values.update(extra or {})
    return values, tf1.write_original_checkpoint(values, str(tmp_path / "google" / "model.ckpt"))


def test_import_then_export_is_exact(tmp_path):
    values, prefix = original(tmp_path, num_hidden_groups=2, inner_group_num=2)
    model = AlbertPretrainer(
        AlbertBackbone.from_albert_config(AlbertConfig.from_dict(tiny_dict(num_hidden_groups=2, inner_group_num=2)))
    )
    report = tf1.load_original_checkpoint(model, prefix)
    assert report.loaded == len(values)
    exported = tf1.original_variables(model)
    assert sorted(exported) == sorted(values)
    for name, value in values.items():
        np.testing.assert_array_equal(exported[name], value, err_msg=name)


def test_optimizer_slots_global_step_and_hub_prefix_are_handled(tmp_path):
    extra = {
        "module/global_step": np.array(7, np.int64),
        "module/bert/pooler/dense/kernel/adam_m": np.zeros((64, 64), np.float32),
        "module/bert/pooler/dense/kernel/adam_v": np.zeros((64, 64), np.float32),
    }
    _, prefix = original(tmp_path, extra=extra, prefix_names="module/")
    model = AlbertPretrainer(AlbertBackbone.from_albert_config(AlbertConfig.from_dict(tiny_dict())))
    report = tf1.load_original_checkpoint(model, prefix)
    assert sorted(report.ignored) == [
        "bert/pooler/dense/kernel/adam_m",
        "bert/pooler/dense/kernel/adam_v",
        "global_step",
    ]


def test_backbone_skips_heads_and_pretrainer_needs_them(tmp_path):
    _, prefix = original(tmp_path)
    backbone = AlbertBackbone.from_albert_config(AlbertConfig.from_dict(tiny_dict()))
    report = tf1.load_original_checkpoint(backbone, prefix)
    assert len(report.skipped_heads) == 7
    _, encoder_only = original(tmp_path / "enc", with_heads=False)
    model = AlbertPretrainer(AlbertBackbone.from_albert_config(AlbertConfig.from_dict(tiny_dict())))
    with pytest.raises(CheckpointError, match=r"7 problem\(s\)") as err:
        tf1.load_original_checkpoint(model, encoder_only)
    assert "has no checkpoint variable cls/seq_relationship/output_weights [2, 64]" in str(err.value)


def test_unknown_variables_and_wrong_shapes_are_all_listed(tmp_path):
    extra = {"bert/encoder/some_new_thing": np.zeros(3, np.float32)}
    _, prefix = original(tmp_path, extra=extra, hidden_size=128, intermediate_size=512)
    model = AlbertBackbone.from_albert_config(AlbertConfig.from_dict(tiny_dict()))
    before = [w.numpy().copy() for w in model.weights]
    with pytest.raises(CheckpointError) as err:
        tf1.load_original_checkpoint(model, prefix)
    message = str(err.value)
    assert message.startswith(prefix)
    assert "checkpoint variable bert/encoder/some_new_thing [3] matches no weight" in message
    assert (
        "checkpoint variable bert/encoder/transformer/group_0/inner_group_0/attention_1/"
        "self/query/kernel has shape [128, 128], the model expects [64, 64]"
    ) in message
    # Nothing was assigned.
    for w, b in zip(model.weights, before):
        np.testing.assert_array_equal(w.numpy(), b)


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    model = AlbertBackbone.from_albert_config(AlbertConfig.from_dict(tiny_dict()))
    with pytest.raises(CheckpointError, match="nowhere/model.ckpt: checkpoint does not exist"):
        formats.load_weights(model, str(tmp_path / "nowhere" / "model.ckpt"))


def test_inexpressible_sharing_is_refused_for_the_original_layout():
    config = AlbertConfig.from_dict(tiny_dict(sharing="attention"))
    with pytest.raises(CheckpointError, match="sharing='attention'.*no equivalent"):
        tf1.name_table(config)
    bert_like = AlbertConfig.from_dict(tiny_dict(sharing="none", num_hidden_groups=4))
    assert len(tf1.original_groups(bert_like)) == 4


def test_convert_round_trip_through_both_formats(tmp_path):
    values, prefix = original(tmp_path)
    config_path = write_config(tmp_path)
    ours = tmp_path / "ours"
    written = convert(prefix, config_path, str(ours))
    assert sorted(os.path.basename(p) for p in written) == ["albert_config.json", "pretrainer.weights.h5"]
    back = tmp_path / "back"
    convert(str(ours), config_path, str(back), to_original=True)
    _, again = tf1.read_original_checkpoint(str(back))
    assert sorted(again) == sorted(values)
    for name in values:
        np.testing.assert_array_equal(again[name], values[name], err_msg=name)
    # Our directory loads into a bare backbone too (heads dropped).
    backbone = AlbertBackbone.from_albert_config(config_path)
    formats.load_weights(backbone, str(ours))
    np.testing.assert_array_equal(backbone.pooler.kernel.numpy(), values["bert/pooler/dense/kernel"])


def test_cli_writes_nothing_on_error(tmp_path):
    # xlarge-shaped weights into a smaller config: one clear error, nothing written.
    _, prefix = original(tmp_path, hidden_size=128, intermediate_size=512)
    out = tmp_path / "out"
    result = run_command(
        "albert_tf.convert_checkpoint",
        [f"--input={prefix}", f"--albert_config_file={write_config(tmp_path)}", f"--output_dir={out}"],
    )
    assert result.returncode == 1
    assert "error: " in result.stderr and "the model expects [64, 64]" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".staging-")]


def test_cli_reports_bad_config_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"vocab_size": 10}')
    result = run_command(
        "albert_tf.convert_checkpoint", ["--input=x", f"--albert_config_file={bad}", f"--output_dir={tmp_path / 'out'}"]
    )
    assert result.returncode == 1
    assert f"error: {bad}: missing required field(s): attention_probs_dropout_prob" in result.stderr
