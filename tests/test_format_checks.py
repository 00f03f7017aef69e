"""Every format is checked alike: values, vocabularies and the files a model directory points at."""

import json
import os

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from albert_tf import formats
from albert_tf.file_safety import OutsideDirectoryError
from albert_tf.formats import CheckpointError
from albert_tf.tokenization import SentencePieceTokenizer, TokenizerError, load_tokenizer

from command_helpers import run_command
from interop_helpers import build, train_toy_spm
from paths import REPO


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
    return train_toy_spm(tmp_path_factory.mktemp("spm"))


def _peer_dir(tmp_path, spm, format_name, kind="pretrainer"):
    directory = tmp_path / format_name
    directory.mkdir()
    formats.save(build(kind), str(directory), format_name, SentencePieceTokenizer(spm))
    return directory


@pytest.mark.parametrize("bad", [np.nan, np.inf, 3e5], ids=["nan", "inf", "huge"])
def test_hf_weights_that_cannot_be_trusted_are_refused_naming_file_and_tensor(tmp_path, spm, bad):
    directory = _peer_dir(tmp_path, spm, "hf")
    weights = directory / "model.safetensors"
    values = load_file(str(weights))
    values["albert.pooler.weight"][0, 0] = bad
    save_file(values, str(weights), metadata={"format": "pt"})
    with pytest.raises(CheckpointError) as error:
        formats.load(str(directory))
    assert str(directory) in str(error.value) and "albert.pooler.weight" in str(error.value)


def test_keras_hub_weights_with_a_non_finite_value_are_refused(tmp_path, spm):
    import h5py

    directory = _peer_dir(tmp_path, spm, "keras_hub")
    with h5py.File(directory / "model.weights.h5", "r+") as f:
        data = f["layers/dense_1/vars/0"][()]
        data[0, 0] = np.nan
        f["layers/dense_1/vars/0"][...] = data
    with pytest.raises(CheckpointError, match=r"layers/dense_1/vars/0 holds 1 non-finite"):
        formats.load(str(directory))


def test_integer_tensors_where_weights_should_be_float_are_refused(tmp_path, spm):
    directory = _peer_dir(tmp_path, spm, "hf", "backbone")
    weights = directory / "model.safetensors"
    values = load_file(str(weights))
    values["pooler.bias"] = values["pooler.bias"].astype(np.int32)
    save_file(values, str(weights), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=r"pooler.bias is int32, not floating point"):
        formats.load(str(directory))


def test_convert_refuses_non_finite_hf_weights_and_writes_nothing(tmp_path, monkeypatch, spm):
    directory = _peer_dir(tmp_path, spm, "hf")
    values = load_file(str(directory / "model.safetensors"))
    values["predictions.bias"][3] = np.nan
    save_file(values, str(directory / "model.safetensors"), metadata={"format": "pt"})
    out = tmp_path / "out"
    monkeypatch.chdir(REPO)
    result = run_command("albert_tf.convert_checkpoint", ["--input", directory, "--output_dir", out])
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0 and "predictions.bias" in result.stderr, result.stderr
    assert not out.exists() or os.listdir(out) == []


def test_another_vocabulary_swapped_in_beside_a_model_is_refused(tmp_path, spm):
    directory = tmp_path / "model"
    formats.save(build("backbone"), str(directory), tokenizer=SentencePieceTokenizer(spm))
    other = train_toy_spm_with_other_text(tmp_path)
    assert SentencePieceTokenizer(other).vocab_size == SentencePieceTokenizer(spm).vocab_size
    (directory / "spm.model").write_bytes(open(other, "rb").read())
    with pytest.raises(TokenizerError, match=r"not the vocabulary this model was saved with"):
        formats.load(str(directory))


def train_toy_spm_with_other_text(tmp_path):
    from data_prep.train_sentencepiece import train_sentencepiece

    from interop_helpers import VOCAB

    lines = [
        f"a slow green turtle walks under the busy bridge {i} days, rome is the capital of italy" for i in range(300)
    ]
    return train_sentencepiece(lines, str(tmp_path / "other"), vocab_size=VOCAB)


@pytest.mark.parametrize("name", ["../outside.model", "/etc/hostname", "sub/../../outside.model"])
def test_a_tokenizer_json_pointing_outside_its_directory_is_refused(tmp_path, spm, name):
    directory = tmp_path / "model"
    formats.save(build("backbone"), str(directory), tokenizer=SentencePieceTokenizer(spm))
    (tmp_path / "outside.model").write_bytes(open(spm, "rb").read())
    settings = directory / "tokenizer.json"
    settings.write_text(json.dumps(json.loads(settings.read_text()) | {"vocabulary": name}))
    with pytest.raises(OutsideDirectoryError, match="field 'vocabulary'"):
        formats.load(str(directory))


def test_an_hf_shard_index_naming_files_outside_its_directory_is_refused(tmp_path, spm):
    directory = _peer_dir(tmp_path, spm, "hf", "backbone")
    os.rename(directory / "model.safetensors", tmp_path / "elsewhere.safetensors")
    index = {"metadata": {}, "weight_map": {"pooler.bias": "../elsewhere.safetensors"}}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(OutsideDirectoryError, match="weight_map"):
        formats.load(str(directory))


@pytest.mark.parametrize(
    "content", [{"kind": ["x"]}, ["spm.model"], {"kind": 3}], ids=["list-kind", "list", "int-kind"]
)
def test_a_malformed_tokenizer_json_is_one_clear_error(tmp_path, spm, content):
    directory = tmp_path / "model"
    formats.save(build("backbone"), str(directory), tokenizer=SentencePieceTokenizer(spm))
    (directory / "tokenizer.json").write_text(json.dumps(content))
    with pytest.raises(TokenizerError, match="tokenizer.json"):
        formats.load(str(directory))


def test_an_extra_tensor_in_our_weights_file_is_refused_and_listed(tmp_path):
    import h5py

    directory = tmp_path / "model"
    formats.save(build("backbone"), str(directory))
    with h5py.File(directory / "backbone.weights.h5", "r+") as f:
        f.create_dataset("layers/stray_head/vars/0", data=np.zeros((4, 2), np.float32))
    with pytest.raises(
        CheckpointError, match=r"holds 1 tensor\(s\) the AlbertBackbone has no place for: layers/stray_head/vars/0$"
    ):
        formats.load(str(directory))


@pytest.mark.parametrize("damage", ["no-tokenizer-json", "no-vocab-sha256"])
def test_a_vocabulary_nothing_proves_is_the_models_is_said(tmp_path, spm, damage):
    directory = tmp_path / "model"
    formats.save(build("backbone"), str(directory), tokenizer=SentencePieceTokenizer(spm))
    settings = directory / "tokenizer.json"
    if damage == "no-tokenizer-json":
        os.remove(settings)
        expected = f"{directory}: spm.model has no tokenizer.json beside it; nothing proves it is the vocabulary"
    else:
        settings.write_text(
            json.dumps({k: v for k, v in json.loads(settings.read_text()).items() if k != "vocab_sha256"})
        )
        expected = f"{settings}: records no vocab_sha256; nothing proves spm.model is the vocabulary"
    loaded = formats.load(str(directory))
    assert loaded.tokenizer is not None
    assert [note for note in loaded.notes if note.startswith(expected)], loaded.notes
    assert formats.load(str(directory), tokenizer=load_tokenizer(spm)).notes == ()  # a given vocabulary: nothing to say


# ---- hostile probes (issue 41 sweep): a preset's JSON files that parse but are not objects -----
@pytest.mark.parametrize(
    "file,content,message",
    [
        ("task.json", [1, 2], r"task.json: expected a JSON object, got list"),
        (
            "task.json",
            {"registered_name": "keras_hub>AlbertTextClassifier", "config": [1]},
            r"task.json: field 'config': expected a JSON object, got list",
        ),
        (
            "config.json",
            {"registered_name": "keras_hub>AlbertBackbone", "config": "x"},
            r"config.json: field 'config': expected a JSON object, got str",
        ),
    ],
)
def test_keras_hub_json_that_is_not_an_object_is_one_clear_error(tmp_path, file, content, message):
    from albert_tf.config import AlbertConfig, ConfigError
    from albert_tf.formats.keras_hub import backbone_config, load_preset

    config = AlbertConfig.from_json_file(str(REPO / "configs" / "albert_tiny.json"))
    (tmp_path / "config.json").write_text(json.dumps(backbone_config(config)), encoding="utf-8")
    (tmp_path / file).write_text(json.dumps(content), encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_preset(str(tmp_path))
