"""HF transformers directories and keras-hub presets: exact round trips, detection, errors, CLI.

The parity tests against the real peers (transformers + torch, keras-hub) are in
test_interop_peers.py.
"""

import json
import os

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from albert_tf import formats
from albert_tf.config import ConfigError
from albert_tf.convert_checkpoint import convert
from albert_tf.formats import CheckpointError, hf, keras_hub, original
from albert_tf.tokenization import load_tokenizer

from command_helpers import run_command
from interop_helpers import assert_same_weights, build, save_ours, tiny_config, train_toy_spm
from paths import REPO


@pytest.fixture(scope="module")
def toy_spm(tmp_path_factory):
    return train_toy_spm(tmp_path_factory.mktemp("spm"))


def our_dir(tmp_path, kind, spm, seed=0):
    """Our model directory (`model.keras` for task models) with the toy vocabulary."""
    model = build(kind, seed=seed)
    directory = tmp_path / f"ours_{kind}"
    directory.mkdir()
    return model, save_ours(model, directory, spm)


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind", ["backbone", "pretrainer", "classifier", "span_qa", "multiple_choice", "token_classifier"]
)
def test_hf_round_trip_is_exact(tmp_path, toy_spm, kind):
    model, ours = our_dir(tmp_path, kind, toy_spm)
    notes = []
    convert(ours, output_dir=str(tmp_path / "hf"), output_format="hf", notes=notes)
    assert formats.detect(str(tmp_path / "hf")) == "hf"
    files = sorted(os.listdir(tmp_path / "hf"))
    assert files == [
        "config.json",
        "model.safetensors",
        "special_tokens_map.json",
        "spiece.model",
        "tokenizer.json",  # transformers' fast tokenizer, reproducing our SentencePiece pipeline
        "tokenizer_config.json",
    ]
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == [hf.architecture_of(model)] and config["model_type"] == "albert"
    tensors = load_file(str(tmp_path / "hf" / "model.safetensors"))
    prefix = "" if kind == "backbone" else "albert."
    assert f"{prefix}encoder.albert_layer_groups.1.albert_layers.1.ffn.weight" in tensors
    convert(str(tmp_path / "hf"), output_dir=str(tmp_path / "back"), notes=notes)
    back = formats.load(str(tmp_path / "back"))
    assert type(back.model) is type(model) and back.spm_model_file.endswith("spm.model")
    no_pooler = kind in ("span_qa", "token_classifier")  # HF's heads have none
    assert_same_weights(model, back.model, skip=("pooler",) if no_pooler else ())
    if no_pooler:
        assert not np.any(back.model.backbone.pooler.kernel.numpy())
        assert any("no pooler" in n for n in notes) and any("set to zeros" in n for n in notes)
    else:
        assert notes == []


@pytest.mark.parametrize("kind", ["backbone", "pretrainer", "classifier"])
def test_keras_hub_round_trip_is_exact(tmp_path, toy_spm, kind):
    model, ours = our_dir(tmp_path, kind, toy_spm)
    notes = []
    convert(ours, output_dir=str(tmp_path / "kh"), output_format="keras_hub", notes=notes)
    assert formats.detect(str(tmp_path / "kh")) == "keras_hub"
    assert os.path.isfile(tmp_path / "kh" / "assets" / "tokenizer" / "vocabulary.spm")
    assert os.path.isfile(tmp_path / "kh" / "task.weights.h5") == (kind != "backbone")
    convert(str(tmp_path / "kh"), output_dir=str(tmp_path / "back"))
    back = formats.load(str(tmp_path / "back"))
    assert type(back.model) is type(model)
    assert_same_weights(model, back.model, skip=("sop_head",))
    if kind == "pretrainer":  # keras-hub has no SOP head
        assert notes == ["keras-hub's AlbertMaskedLM has no SOP head: sop_head is not written"]
        assert not np.any(back.model.sop_head.kernel.numpy())


def test_original_round_trip_is_exact_and_ships_the_vocabulary(tmp_path, toy_spm):
    model, ours = our_dir(tmp_path, "pretrainer", toy_spm)
    convert(ours, output_dir=str(tmp_path / "tf1"), output_format="original")
    assert formats.detect(str(tmp_path / "tf1")) == "original"
    assert sorted(os.listdir(tmp_path / "tf1")) == [
        "albert_config.json",
        "checkpoint",
        "model.ckpt.data-00000-of-00001",
        "model.ckpt.index",
        "spm.model",
        "tokenizer.json",
    ]
    convert(str(tmp_path / "tf1"), output_dir=str(tmp_path / "back"))
    back = formats.load(str(tmp_path / "back"))
    assert_same_weights(model, back.model)
    assert back.spm_model_file == str(tmp_path / "back" / "spm.model")


def test_embedding_equal_to_hidden_size_writes_an_identity_projection(tmp_path):
    model = build("backbone", tiny_config(embedding_size=64))
    os.makedirs(tmp_path / "hf")
    hf.save_hf_dir(model, str(tmp_path / "hf"))
    tensors = load_file(str(tmp_path / "hf" / "model.safetensors"))
    np.testing.assert_array_equal(tensors["encoder.embedding_hidden_mapping_in.weight"], np.eye(64))
    back, _ = hf.load_hf_dir(str(tmp_path / "hf"))
    assert_same_weights(model, back)
    tensors["encoder.embedding_hidden_mapping_in.weight"][0, 1] = 0.5
    save_file(tensors, str(tmp_path / "hf" / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="embedding_hidden_mapping_in.weight is not the identity"):
        hf.load_hf_dir(str(tmp_path / "hf"))


def test_detection_of_each_format(tmp_path, toy_spm):
    _, ours = our_dir(tmp_path, "backbone", toy_spm)
    assert formats.detect(ours) == "albert_tf"
    prefix = original.save_original_checkpoint(build("backbone"), str(tmp_path / "g" / "model.ckpt"))
    assert formats.detect(prefix) == "original"
    (tmp_path / "empty").mkdir()
    assert formats.detect(str(tmp_path / "empty")) is None
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text('{"model_type": "bert"}')
    assert formats.detect(str(tmp_path / "bert")) == "hf"
    with pytest.raises(ConfigError, match="field 'model_type' is 'bert', not 'albert'"):
        formats.load(str(tmp_path / "bert"))


def _hf_dir(tmp_path, kind="pretrainer"):
    model = build(kind)
    directory = tmp_path / f"hf_{kind}"
    directory.mkdir()
    hf.save_hf_dir(model, str(directory))
    return model, directory


def test_every_bad_tensor_is_listed_in_one_error(tmp_path):
    _, directory = _hf_dir(tmp_path)
    tensors = load_file(str(directory / "model.safetensors"))
    del tensors["albert.pooler.bias"]
    tensors["albert.extra.weight"] = np.zeros((3,), np.float32)
    tensors["predictions.dense.weight"] = np.zeros((32, 65), np.float32)
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError) as error:
        hf.load_hf_dir(str(directory))
    message = str(error.value)
    assert "(3 problem(s))" in message
    assert "tensor albert.extra.weight [3] matches no weight of the model" in message
    assert "has no tensor albert.pooler.bias [64]" in message
    assert "tensor predictions.dense.weight has shape [32, 65], the model expects [32, 64]" in message


def test_tied_decoder_is_accepted_when_tied_and_refused_when_not(tmp_path):
    model, directory = _hf_dir(tmp_path)
    tensors = load_file(str(directory / "model.safetensors"))
    tensors["predictions.decoder.weight"] = tensors["albert.embeddings.word_embeddings.weight"]
    tensors["predictions.decoder.bias"] = tensors["predictions.bias"]
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    back, _ = hf.load_hf_dir(str(directory))
    assert_same_weights(model, back)
    tensors["predictions.decoder.bias"] = tensors["predictions.bias"] + 1
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="predictions.decoder.bias differs from predictions.bias"):
        hf.load_hf_dir(str(directory))


def test_hf_config_fields(tmp_path):
    _, directory = _hf_dir(tmp_path, "backbone")
    config = json.loads((directory / "config.json").read_text())
    config_path = str(directory / "config.json")
    assert hf.read_hf_config(config_path)[0] == tiny_config()
    for field, value, message in (
        ("hidden_act", "gelu", None),
        ("hidden_act", "silu", "'silu' is not supported"),
        ("layer_norm_eps", 1e-5, "1e-05 is not supported"),
        ("architectures", ["AlbertForXYZ"], "has no albert_tf model"),
    ):
        (directory / "config.json").write_text(json.dumps({**config, field: value}))
        if message is None:  # HF's `gelu` is the exact erf GELU
            assert hf.read_hf_config(config_path)[0].hidden_act == "gelu_exact"
        else:
            with pytest.raises(ConfigError, match=f"field '{field}': .*{message}"):
                hf.read_hf_config(config_path)


def test_keras_hub_bad_shape_and_inexpressible_configs(tmp_path):
    model = build("backbone")
    directory = tmp_path / "kh"
    directory.mkdir()
    keras_hub.save_preset(model, str(directory))
    values = keras_hub.read_h5(str(directory / "model.weights.h5"))
    values["layers/dense_1/vars/1"] = np.zeros((7,), np.float32)
    keras_hub.write_h5(str(directory / "model.weights.h5"), values, {}, "albert_backbone")
    with pytest.raises(CheckpointError, match=r"layers/dense_1/vars/1 has shape \[7\], the model expects \[64\]"):
        keras_hub.load_preset(str(directory))
    with pytest.raises(ConfigError, match="keras-hub's ALBERT has only the tanh GELU"):
        keras_hub.backbone_config(tiny_config(hidden_act="relu"))
    with pytest.raises(ConfigError, match="not divisible by num_hidden_groups=3"):
        keras_hub.backbone_config(tiny_config(num_hidden_groups=3))


def test_models_without_a_peer_equivalent_are_refused(tmp_path, toy_spm):
    _, ours = our_dir(tmp_path, "span_qa", toy_spm)
    with pytest.raises(CheckpointError, match="AlbertSpanQA has no keras-hub equivalent"):
        convert(ours, output_dir=str(tmp_path / "kh"), output_format="keras_hub")
    with pytest.raises(CheckpointError, match="TF1 layout here covers the encoder and the pretraining heads"):
        convert(ours, output_dir=str(tmp_path / "tf1"), output_format="original")
    assert not (tmp_path / "kh").exists() and not (tmp_path / "tf1").exists()


def _cli(monkeypatch, *args):
    monkeypatch.chdir(REPO)
    return run_command("albert_tf.convert_checkpoint", args)


def test_cli_refuses_pytorch_pickles_and_writes_nothing(tmp_path, monkeypatch):
    _, directory = _hf_dir(tmp_path, "backbone")
    os.replace(directory / "model.safetensors", directory / "pytorch_model.bin")
    out = tmp_path / "out"
    result = _cli(monkeypatch, f"--input={directory}", f"--output_dir={out}")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    [line] = [l for l in result.stderr.splitlines() if l.startswith("error:")]
    assert "pytorch_model.bin: a PyTorch pickle" in line and "save_pretrained" in line
    assert not out.exists() and not [p for p in os.listdir(tmp_path) if p.startswith(".staging-")]


def test_cli_converts_and_prints_what_it_wrote(tmp_path, monkeypatch, toy_spm):
    _, ours = our_dir(tmp_path, "pretrainer", toy_spm)
    result = _cli(monkeypatch, f"--input={ours}", f"--output_dir={tmp_path / 'kh'}", "--output_format=keras_hub")
    assert result.returncode == 0, result.stderr
    assert "note: keras-hub's AlbertMaskedLM has no SOP head" in result.stdout
    assert f"wrote {tmp_path / 'kh' / 'model.weights.h5'}" in result.stdout
    assert formats.detect(str(tmp_path / "kh")) == "keras_hub"
    with pytest.raises(CheckpointError, match="--to_original contradicts --output_format=hf"):
        convert(ours, output_dir=str(tmp_path / "x"), to_original=True, output_format="hf")


# ---- the Format interface: a new format is one module plus one registration ----------------------
class ToyFormat(formats.Format):
    """A format as a newcomer would add it: weights as one .npz, the config beside it, nothing else."""

    name = "toy_npz"

    def claims(self, path):
        return os.path.isfile(os.path.join(path, "weights.npz"))

    def load(self, path, albert_config_file=None, tokenizer=None, do_lower_case=None):
        from albert_tf import AlbertBackbone

        backbone = AlbertBackbone.from_albert_config(os.path.join(path, "albert_config.json"))
        values = np.load(os.path.join(path, "weights.npz"))
        backbone.set_weights([values[f"w{i}"] for i in range(len(backbone.weights))])
        return formats.LoadedModel(backbone, path, tokenizer, format=self.name)

    def save(self, model, directory, tokenizer=None):
        model.albert_config.to_json_file(os.path.join(directory, "albert_config.json"))
        np.savez(os.path.join(directory, "weights.npz"), **{f"w{i}": w for i, w in enumerate(model.get_weights())})

    def unwritten(self, model):
        return [] if model is formats.backbone_of(model) else [f"{self.name} holds the encoder only"]


def test_a_new_format_is_one_class_and_one_registration(tmp_path, monkeypatch, toy_spm):
    monkeypatch.setattr(formats, "REGISTRY", dict(formats.REGISTRY))  # the registration ends with the test
    formats.register(ToyFormat())
    assert "toy_npz" in formats.names()
    model, ours = our_dir(tmp_path, "backbone", toy_spm)
    notes = []
    convert(ours, output_dir=str(tmp_path / "toy"), output_format="toy_npz", notes=notes)
    assert formats.detect(str(tmp_path / "toy")) == "toy_npz"
    assert any("holds no vocabulary" in note for note in notes) is False  # ours had spm.model
    back = formats.load(str(tmp_path / "toy"), tokenizer=load_tokenizer(toy_spm))
    assert back.format == "toy_npz" and back.tokenizer is not None
    assert_same_weights(model, back.model)
    convert(str(tmp_path / "toy"), output_dir=str(tmp_path / "again"))  # and out again, through ours
    assert_same_weights(model, formats.load(str(tmp_path / "again")).model)
    assert formats.unwritten(build("pretrainer"), "toy_npz") == ["toy_npz holds the encoder only"]
    with pytest.raises(ValueError, match="taken"):
        formats.register(ToyFormat())


def test_the_formats_package_never_branches_on_a_format_name():
    source = (REPO / "albert_tf" / "formats" / "__init__.py").read_text()
    code = source[source.index('"""', 3) + 3 :]  # the docstring's table names them, the code does not
    for name in ("hf.", "keras_hub.", "native.NAME", "original.NAME", "run_dir.NAME", '"albert_tf"'):
        assert f"== {name}" not in code and f"in ({name}" not in code, name


def test_a_conversion_without_a_vocabulary_says_so(tmp_path, monkeypatch):
    model = build("pretrainer")
    os.makedirs(tmp_path / "hf")
    hf.save_hf_dir(model, str(tmp_path / "hf"))  # no spiece.model
    notes = []
    convert(str(tmp_path / "hf"), output_dir=str(tmp_path / "ours"), notes=notes)
    assert f"{tmp_path / 'hf'}: holds no vocabulary; the model comes without a tokenizer" in notes
    result = _cli(
        monkeypatch,
        "--input",
        str(tmp_path / "hf"),
        "--output_dir",
        str(tmp_path / "kh"),
        "--output_format",
        "keras_hub",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "note: " + f"{tmp_path / 'hf'}: holds no vocabulary" in result.stdout


@pytest.mark.parametrize(
    "config_text, expected",
    [
        (None, r"has model.weights.h5 but no config.json; a keras-hub preset needs both"),
        ('{"registered_name": ', r"config.json: not valid JSON \(line 1, column \d+: Expecting value\)"),
        ("[1, 2]", r"config.json: expected a JSON object, got list"),
        ("null", r"config.json: expected a JSON object, got NoneType"),
        ('{"name": "x"}', r"config.json: has neither 'registered_name' \(a keras-hub preset\) nor 'model_type'"),
    ],
    ids=["no-config", "broken-json", "not-an-object", "null", "no-marker"],
)
def test_a_preset_without_or_with_a_broken_config_is_named(tmp_path, config_text, expected):
    directory = tmp_path / "kh"
    os.makedirs(directory)
    keras_hub.save_preset(build("backbone"), str(directory))
    if config_text is None:
        os.remove(directory / "config.json")
    else:
        (directory / "config.json").write_text(config_text)
    with pytest.raises(formats.ModelFileError, match=expected) as error:
        formats.load(str(directory))
    assert "holds no model" in str(error.value) and "\n" not in str(error.value)


def test_hf_weights_without_their_config_are_named(tmp_path):
    directory = tmp_path / "hf"
    os.makedirs(directory)
    hf.save_hf_dir(build("backbone"), str(directory))
    os.remove(directory / "config.json")
    with pytest.raises(formats.ModelFileError, match="has model.safetensors but no config.json"):
        formats.load(str(directory))


def test_converting_into_a_directory_holding_another_model_is_refused(tmp_path, monkeypatch, toy_spm):
    """Issue 41 defect 6: the old model.keras stayed beside the new weights and predict loaded it."""
    _, classifier_dir = our_dir(tmp_path, "classifier", toy_spm)
    _, backbone_dir = our_dir(tmp_path, "backbone", toy_spm)
    out = tmp_path / "out"
    convert(classifier_dir, output_dir=str(out))
    before = sorted(os.listdir(out))
    with pytest.raises(
        CheckpointError,
        match=rf"--output_dir {out}: already holds another model \(albert_tf\); its model.keras would stay",
    ):
        convert(backbone_dir, output_dir=str(out))
    assert sorted(os.listdir(out)) == before  # nothing written
    assert type(formats.load(str(out)).model).__name__ == "AlbertClassifier"
    convert(classifier_dir, output_dir=str(out))  # the same conversion again replaces every file: fine
    result = _cli(monkeypatch, "--input", backbone_dir, "--output_dir", str(out))
    assert result.returncode == 1 and result.stderr.strip().splitlines() == [
        f"error: --output_dir {out}: already holds another model (albert_tf); its model.keras would stay beside "
        "the new files and the two would mix. Give a new or empty directory"
    ]
    assert sorted(os.listdir(out)) == before  # no settings.json claiming a conversion either
