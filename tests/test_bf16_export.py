"""The bf16 serving export (`export --precision bfloat16`): same weights, bf16 compute, the same answers."""

import json
import pathlib

import numpy as np
import pytest

from albert_tf import AlbertBackbone
from albert_tf.export.common import ExportError
from albert_tf.export.precision import with_precision
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.tokenization import load_tokenizer

CONFIGS = pathlib.Path(__file__).resolve().parent.parent / "configs"


def test_bfloat16_copy_keeps_the_weights_and_computes_in_bf16_with_float32_islands():
    model = AlbertPretrainer(AlbertBackbone.from_albert_config(str(CONFIGS / "albert_tiny.json")))
    copy = with_precision(model, "bfloat16")
    assert with_precision(model, "float32") is model
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), copy.get_weights()))
    backbone = copy.backbone
    assert backbone.embedding_projection.compute_dtype == "bfloat16"
    assert backbone.embedding_projection.kernel.dtype == "float32"
    assert backbone.embeddings.layer_norm.compute_dtype == "float32"
    with pytest.raises(ExportError, match="--precision float16: expected one of float32, bfloat16"):
        with_precision(model, "float16")


@pytest.mark.slow
@pytest.mark.realdata
def test_bf16_saved_model_agrees_with_the_float32_model_on_sst2_dev(real_data, sst2_run, pretrained_tiny, tmp_path):
    import tensorflow as tf

    from albert_tf import formats
    from albert_tf.export import export_saved_model
    from albert_tf.tasks import glue
    from albert_tf.tokenization import SentencePieceTokenizer

    output_dir, _ = sst2_run
    loaded = formats.load(
        str(output_dir / "best"), tokenizer=load_tokenizer(str(pretrained_tiny / "final" / "spm.model"))
    )
    examples, _ = glue.read_examples(glue.TASKS["sst-2"], str(real_data / "glue" / "SST-2" / "dev.tsv"), "dev")
    features = glue.encode_examples(examples, SentencePieceTokenizer(loaded.spm_model_file), 64)
    expected = loaded.model.predict(features, batch_size=128, verbose=0)["logits"]
    path = export_saved_model(
        loaded.model, str(tmp_path / "serving"), tokenizer=loaded.tokenizer, max_seq_length=64,
        precision="bfloat16",
    )  # fmt: skip
    served = tf.saved_model.load(path).signatures["serving_default"](**{k: tf.constant(v) for k, v in features.items()})
    got = served["logits"].numpy()
    assert served["logits"].dtype == tf.float32
    assert (got.argmax(-1) == expected.argmax(-1)).mean() >= 0.99
    # bf16 compute, not the float32 model again: the logits move, a little.
    assert 0 < np.abs(got - expected).max() < 0.5
    config = json.loads((pathlib.Path(path) / "assets" / "serving_config.json").read_text())
    assert config["precision"] == "bfloat16"


def test_cli_refuses_bf16_tflite_in_one_line(tmp_path, monkeypatch):
    from command_helpers import run_command

    monkeypatch.chdir(CONFIGS.parent)
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    args = ["--model_dir", str(tmp_path / "m"), "--output_dir", str(tmp_path / "x"), "--format", "tflite"]
    result = run_command("albert_tf.export", [*args, "--precision", "bfloat16"])
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == (
        "error: --precision bfloat16: TFLite has no bf16 kernels; use --quantize for TFLite"
    )
    assert "Traceback" not in result.stderr
