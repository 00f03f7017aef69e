"""TFLite files for phones: float32, float16, dynamic-range int8 or full-integer int8, builtin ops only.

`<output_dir>/albert_<variant>.tflite`, inputs of shape [1, max_seq_length];
beside it the config, the vocabulary and `tokenizer_test_vectors.json` (texts
with the ids the app's tokenizer must produce: TFLite has no op for ALBERT's
NFKD preprocessing, so apps tokenise). Written aside, checked against the
Keras model, then moved into place. Out-of-range ids, segments, mask values
or positions are refused (`albert_tf.export.input_checks`): in the file by
GATHER's bounds check, and by `run_tflite` before invoking, naming the input.
"""

import json
import os
import tempfile
from typing import Dict, List, Optional

import keras
import numpy as np
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.export.common import (
    ExportError,
    check_tokenizer_fits,
    compare_outputs,
    random_inputs,
    remove_stale_staging,
)
from albert_tf.export.full_integer import quantize_full_integer
from albert_tf.export.input_checks import MLM_POSITIONS, check_tflite_inputs, tflite_tensors
from albert_tf.export.representative import DEFAULT_SAMPLES, read_texts, representative_samples
from albert_tf.formats.table import backbone_of
from albert_tf.inputs.packing import pack_segments
from albert_tf.locking import OutputDirLock
from albert_tf.publish import staged_files

QUANTIZATIONS = ("none", "float16", "dynamic_int8", "full_int8")
TFLITE_NAMES = {
    "none": "albert_float32.tflite",
    "float16": "albert_float16.tflite",
    "dynamic_int8": "albert_dynamic_int8.tflite",
    "full_int8": "albert_full_int8.tflite",
}
TEST_VECTOR_TEXTS = (
    "Hello, World! ALBERT is a lite BERT.",
    "  multiple   spaces\tand\ttabs\n",
    "Café déjà vu — naïve façade, résumé.",
    "1,000,000 people in 2,019; 3.14 and 42,",
    "中文字符 and 한국어 텍스트",
    "ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ ①②",
    "emoji 🙂 and symbols ©®™",
    "",
)


def converter_options(quantize: str) -> Dict:
    options = {"target_spec": {"supported_ops": [tf.lite.OpsSet.TFLITE_BUILTINS]}}
    if quantize in ("float16", "dynamic_int8"):
        options["optimizations"] = [tf.lite.Optimize.DEFAULT]
    if quantize == "float16":
        options["target_spec"]["supported_types"] = [tf.float16]
    return options


def tflite_input_signature(model, max_seq_length: int, max_predictions_per_seq: int):
    """Batch 1, fixed lengths (what phone delegates want)."""
    specs = {}
    for name, tensor in model.input.items():
        last = max_predictions_per_seq if name == MLM_POSITIONS else max_seq_length
        specs[name] = tf.TensorSpec([1] + list(tensor.shape[1:-1]) + [last], tf.int32, name=name)
    return [specs]


def run_tflite(model_file: str, inputs: Dict[str, np.ndarray], config=None) -> Dict[str, np.ndarray]:
    """Runs a .tflite file's `serving_default` signature (LiteRT's interpreter).

    The inputs are checked first (`check_tflite_inputs`: names, shapes, value
    ranges), against `config` or the `albert_config.json` beside the file: the
    file itself refuses bad values only with GATHER's "index out of bounds".
    """
    from ai_edge_litert.interpreter import Interpreter  # the runtime loads only to run a file

    if config is None:
        config = AlbertConfig.from_json_file(
            os.path.join(os.path.dirname(os.path.abspath(model_file)), "albert_config.json")
        )
    runner = Interpreter(model_path=model_file).get_signature_runner("serving_default")
    shapes = {name: tuple(int(d) for d in detail["shape"]) for name, detail in runner.get_input_details().items()}
    check_tflite_inputs(inputs, config, shapes)
    return runner(**inputs)


def convert_to_tflite(model, input_signature, quantize: str, samples=None, **full_integer_options) -> bytes:
    """The model's call, behind `tflite_tensors` (bad values refused in-graph), as TFLite bytes.

    Keras' own `export(format="litert")` path (ExportArchive, then the SavedModel
    converter), with the input guard in front of the model. `full_int8` needs
    `samples`, the representative inputs; `full_integer_options` go to
    `albert_tf.export.full_integer.quantize_full_integer`.
    """
    config = backbone_of(model).albert_config

    def guarded(inputs):
        return model(tflite_tensors(inputs, config), training=False)

    with tempfile.TemporaryDirectory() as saved_model_dir:
        archive = keras.export.ExportArchive()
        archive.track(model)
        archive.add_endpoint("serve", guarded, input_signature=input_signature)
        archive.write_out(saved_model_dir, verbose=False)
        converter = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir)
        converter.experimental_enable_resource_variables = True
        options = converter_options(quantize)
        for name, value in options.pop("target_spec").items():
            setattr(converter.target_spec, name, value)
        for name, value in options.items():
            setattr(converter, name, value)
        if quantize == "full_int8":
            if not samples:
                raise ExportError("--quantize full_int8: needs representative samples to calibrate on")
            return quantize_full_integer(converter, samples, **full_integer_options)
        return converter.convert()


def tokenizer_test_vectors(python_tokenizer, max_seq_length: int) -> List[Dict]:
    """Texts with the preprocessed text, pieces and packed ids an app's tokenizer must reproduce."""
    vectors = []
    for text in TEST_VECTOR_TEXTS:
        ids, _ = pack_segments(
            python_tokenizer.encode(text), None, max_seq_length, python_tokenizer.cls_id, python_tokenizer.sep_id
        )
        vectors.append(
            {
                "text": text,
                "preprocessed": python_tokenizer.preprocess(text),
                "pieces": python_tokenizer.tokenize(text),
                "input_ids": ids,
            }
        )
    return vectors


def export_tflite(
    model,
    output_dir: str,
    quantize: str = "none",
    max_seq_length: int = 128,
    max_predictions_per_seq: int = 20,
    tokenizer=None,
    representative_data: Optional[str] = None,
    representative_task: Optional[str] = None,
    representative_samples_count: int = DEFAULT_SAMPLES,
) -> str:
    """Writes `output_dir/albert_<variant>.tflite` (builtin ops only) and its side files; returns its path.

    The float32 file must match the Keras model within 1e-4; quantized files
    must give finite outputs (their accuracy is measured by the tests and
    `bench/export.py`). `full_int8` calibrates on the first
    `representative_samples_count` texts of `representative_data` (a text file,
    or a GLUE TSV of `representative_task`), tokenised by the model's tokenizer.
    """
    if quantize not in QUANTIZATIONS:
        raise ExportError(f"--quantize {quantize}: expected one of {', '.join(QUANTIZATIONS)}")
    config = backbone_of(model).albert_config
    if max_seq_length > config.max_position_embeddings or max_seq_length < 3:
        raise ExportError(
            f"--max_seq_length {max_seq_length}: must be in [3, max_position_embeddings="
            f"{config.max_position_embeddings}]"
        )
    if max_predictions_per_seq < 1 or max_predictions_per_seq > max_seq_length:
        raise ExportError(f"--max_predictions_per_seq {max_predictions_per_seq}: must be in [1, --max_seq_length]")
    check_tokenizer_fits(model, tokenizer)
    signature = tflite_input_signature(model, max_seq_length, max_predictions_per_seq)
    samples = None
    if representative_data and quantize != "full_int8":
        raise ExportError(f"--representative_data: only --quantize full_int8 calibrates (got --quantize {quantize})")
    if quantize == "full_int8":
        texts = read_texts(representative_data, representative_task, representative_samples_count)
        if tokenizer is None:
            raise ExportError(
                "--quantize full_int8: needs the model's tokenizer (a vocabulary flag or one saved with it)"
            )
        samples = representative_samples(texts, tokenizer, list(signature[0]), max_seq_length, max_predictions_per_seq)
    with OutputDirLock(output_dir):
        remove_stale_staging(output_dir)
        path = _write(model, output_dir, quantize, signature, samples, tokenizer, config)
    return path


def _write(model, output_dir, quantize, signature, samples, tokenizer, config) -> str:
    max_seq_length = signature[0]["input_ids"].shape[-1]
    with staged_files(output_dir) as staging:
        staged = os.path.join(staging, TFLITE_NAMES[quantize])
        try:
            flatbuffer = convert_to_tflite(model, signature, quantize, samples)
        except Exception as error:  # noqa: BLE001  (the converter's ConverterError lives in private modules)
            raise ExportError(f"TFLite conversion failed: {str(error).splitlines()[0]}") from None
        with open(staged, "wb") as f:
            f.write(flatbuffer)
        max_predictions_per_seq = signature[0][MLM_POSITIONS].shape[-1] if MLM_POSITIONS in signature[0] else 3
        inputs = {
            name: np.resize(value, signature[0][name].shape)
            for name, value in random_inputs(model, 1, max_seq_length, max_predictions_per_seq).items()
        }
        got = run_tflite(staged, inputs, config)
        if quantize == "none":
            compare_outputs(model(inputs, training=False), got, 1e-4, staged)
        elif not all(np.isfinite(v).all() for v in got.values()):
            raise ExportError(f"{staged}: non-finite outputs")
        config.to_json_file(os.path.join(staging, "albert_config.json"))
        if tokenizer is not None:
            tokenizer.save(staging)
            with open(os.path.join(staging, "tokenizer_test_vectors.json"), "w") as f:
                json.dump(
                    {
                        "vocab_type": tokenizer.kind,
                        "do_lower_case": tokenizer.do_lower_case,
                        "max_seq_length": max_seq_length,
                        "vectors": tokenizer_test_vectors(tokenizer, max_seq_length),
                    },
                    f,
                    ensure_ascii=False,
                    indent=1,
                )
    return os.path.join(output_dir, TFLITE_NAMES[quantize])
