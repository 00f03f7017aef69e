import json

import pytest

from albert_tf.config import AlbertConfig, ConfigError

from paths import CONFIGS

GOOGLE_BASE_V2 = {  # the released albert_base_v2 albert_config.json
    "attention_probs_dropout_prob": 0,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0,
    "embedding_size": 128,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "num_hidden_groups": 1,
    "net_structure_type": 0,
    "gap_size": 0,
    "num_memory_blocks": 0,
    "inner_group_num": 1,
    "down_scale_factor": 1,
    "type_vocab_size": 2,
    "vocab_size": 30000,
}


def test_google_config_round_trips_with_extra_keys(tmp_path):
    config = AlbertConfig.from_dict(GOOGLE_BASE_V2)
    assert config.extra == {"net_structure_type": 0, "gap_size": 0, "num_memory_blocks": 0}
    assert config.sharing == "all"
    assert config.to_dict() == GOOGLE_BASE_V2
    path = tmp_path / "albert_config.json"
    config.to_json_file(str(path))
    assert AlbertConfig.from_json_file(str(path)) == config
    assert json.loads(path.read_text()) == GOOGLE_BASE_V2


def test_every_shipped_config_loads_and_round_trips():
    paths = sorted(CONFIGS.glob("*.json"))
    assert len(paths) == 17  # 8 ALBERT, 4 Chinese ALBERT, 2 BERT, tiny, PL-BERT base and tiny
    for path in paths:
        config = AlbertConfig.from_json_file(str(path))
        assert config.to_dict() == json.loads(path.read_text()), path.name
    for size in ("base", "large", "xlarge", "xxlarge"):
        chinese = AlbertConfig.from_json_file(str(CONFIGS / f"albert_{size}_zh.json")).to_dict()
        english = AlbertConfig.from_json_file(str(CONFIGS / f"albert_{size}_v2.json")).to_dict()
        # The released Chinese models: WordPiece vocab.txt of 21,128 entries and ReLU (their albert_config.json).
        assert (chinese.pop("vocab_size"), chinese.pop("hidden_act")) == (21128, "relu")
        assert {k: v for k, v in english.items() if k not in ("vocab_size", "hidden_act")} == chinese


def test_sharing_is_written_only_when_not_default():
    config = AlbertConfig.from_dict({**GOOGLE_BASE_V2, "sharing": "ffn"})
    assert config.to_dict()["sharing"] == "ffn"


def test_missing_field_is_named_not_defaulted_to_xxlarge():
    values = dict(GOOGLE_BASE_V2)
    del values["hidden_size"], values["vocab_size"]
    with pytest.raises(ConfigError, match="missing required field.*hidden_size, vocab_size"):
        AlbertConfig.from_dict(values, source="my.json")


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("num_attention_heads", 7, "field 'hidden_size': 768 is not divisible by num_attention_heads=7"),
        ("num_hidden_groups", 13, "field 'num_hidden_groups': 13 groups exceed num_hidden_layers=12"),
        ("hidden_act", "swish", "field 'hidden_act': unknown activation 'swish'"),
        ("sharing", "some", "field 'sharing': unknown mode 'some'"),
        ("embedding_size", 0, "field 'embedding_size': must be positive"),
        ("vocab_size", "30000", "field 'vocab_size': must be an integer"),
        ("hidden_dropout_prob", 1.5, r"field 'hidden_dropout_prob': must be in \[0, 1\)"),
        ("initializer_range", -0.1, "field 'initializer_range': must be positive"),
    ],
)
def test_inconsistent_values_name_the_field(tmp_path, field, value, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**GOOGLE_BASE_V2, field: value}))
    with pytest.raises(ConfigError, match=f"{path}: {message}"):
        AlbertConfig.from_json_file(str(path))


def test_malformed_json_names_file_line_and_column(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{\n  "vocab_size": 30000,\n  "hidden_size": ,\n}')
    with pytest.raises(ConfigError, match=r"broken.json: malformed JSON at line 3, column 18"):
        AlbertConfig.from_json_file(str(path))


def test_missing_file_and_non_object(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        AlbertConfig.from_json_file(str(tmp_path / "nope.json"))
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="expected a JSON object"):
        AlbertConfig.from_json_file(str(path))
