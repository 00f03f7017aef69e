import json
import os
import shutil

import pytest

from albert_tf.config import AlbertConfig
from albert_tf.param_table import count_parameters

from command_helpers import run_command
from paths import CONFIGS

# Released models, counted by running Google's graph (param counts published with the checkpoints).
RELEASED = {
    "albert_base": (11_683_584, 11_813_810),
    "albert_large": (17_683_968, 17_847_474),
    "albert_xlarge": (58_724_864, 59_021_490),
    "albert_xxlarge": (222_595_584, 223_158_450),
}


@pytest.mark.parametrize("name", sorted(RELEASED))
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_released_models_count_exactly(name, version):
    counts = count_parameters(AlbertConfig.from_json_file(str(CONFIGS / f"{name}_{version}.json")))
    assert (counts["backbone"], counts["with_heads"]) == RELEASED[name]


@pytest.mark.parametrize("name,paper,exact", [("bert_base", 108e6, 109_081_344), ("bert_large", 334e6, 334_607_360)])
def test_bert_lands_at_the_papers_counts(name, paper, exact):
    counts = count_parameters(AlbertConfig.from_json_file(str(CONFIGS / f"{name}.json")))
    assert counts["backbone"] == exact
    # The paper's 108M / 334M match the encoder without the pooler (108.5M,
    # 333.6M); with the pooler base is 109.1M, 1.0% above the paper.
    assert abs(counts["backbone_without_pooler"] - paper) / paper < 0.01


@pytest.mark.slow
def test_cli_prints_table_and_json(tmp_path):
    for name in ("albert_tiny", "albert_base_v2"):
        shutil.copy(CONFIGS / f"{name}.json", tmp_path)

    def run(*flags):
        completed = run_command("albert_tf.param_table", [f"--configs_dir={tmp_path}", *flags])
        assert completed.returncode == 0, completed.stderr[-2000:]
        return completed.stdout

    rows = json.loads(run("--json"))
    assert [r["config"] for r in rows] == ["albert_base_v2", "albert_tiny"]
    assert rows[0]["backbone"] == 11_683_584 and rows[0]["with_heads"] == 11_813_810
    assert rows[0]["sharing"] == "all" and rows[0]["embedding"] == 128
    table = run()
    assert "albert_base_v2" in table and "11,683,584" in table and "11,813,810" in table


def test_default_configs_are_the_released_ones_and_an_empty_dir_is_an_error(tmp_path, monkeypatch):
    from albert_tf.cli.param_table import table_rows
    from albert_tf.config import ConfigError, shipped_configs_dir

    assert os.path.samefile(shipped_configs_dir(), CONFIGS)
    with pytest.raises(ConfigError, match=f"^--configs_dir {tmp_path}: holds no \\*.json config$"):
        table_rows(str(tmp_path))
    with pytest.raises(ConfigError, match="^--configs_dir .*/missing: is not a directory$"):
        table_rows(str(tmp_path / "missing"))
    monkeypatch.chdir(tmp_path)
    failed = run_command("albert_tf.param_table", [f"--configs_dir={tmp_path}"])
    assert failed.returncode == 1 and failed.stdout == ""
    assert failed.stderr.strip() == f"error: --configs_dir {tmp_path}: holds no *.json config"


@pytest.mark.slow
def test_cli_without_flags_counts_the_released_configs_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    completed = run_command("albert_tf.param_table", ["--json"])
    assert completed.returncode == 0, completed.stderr[-2000:]
    rows = json.loads(completed.stdout)
    assert {r["config"] for r in rows} >= {"albert_tiny", "albert_base_v2", "bert_base"}


@pytest.mark.parametrize("name", ["albert_tiny", "albert_base_v2"])
def test_counting_without_weight_values_counts_the_materialised_model(name):
    # count_parameters builds in a stateless scope (shapes, no values): the same counts as a model
    # whose weights are initialised.
    import keras

    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.pretrainer import AlbertPretrainer

    config = AlbertConfig.from_json_file(str(CONFIGS / f"{name}.json"))
    counts = count_parameters(config)
    try:
        backbone = AlbertBackbone.from_albert_config(config)
        pretrainer = AlbertPretrainer(backbone)
        assert counts == {
            "backbone": backbone.count_params(),
            "backbone_without_pooler": backbone.count_params() - backbone.pooler.count_params(),
            "with_heads": pretrainer.count_params(),
        }
    finally:
        keras.backend.clear_session()
