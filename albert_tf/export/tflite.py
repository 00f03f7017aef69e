"""TFLite files for phones: float32, float16, dynamic-range int8 or full-integer int8, builtin ops only.

`<output_dir>/albert_<variant>.tflite`, inputs of shape [1, S] for any
sequence length S in [1, max_seq_length] (a dynamic dimension: an app resizes
the inputs to its text's length, `resize_tensor_input` then `allocate_tensors`,
and pays for no padding); the file records its `max_seq_length` (metadata
`MAX_SEQ_LENGTH_METADATA`) and refuses longer inputs, and a classifier's class
names (`LABELS_METADATA`, a JSON list) when it was fine-tuned with them. Beside it the config,
the vocabulary and `tokenizer_test_vectors.json` (texts with the ids the
app's tokenizer must produce: TFLite has no op for ALBERT's NFKD
preprocessing, so apps tokenise). Written aside, checked against the
Keras model, then moved into place. Out-of-range ids, segments, mask values
or positions are refused (`albert_tf.export.input_checks`): in the file by
GATHER's bounds check, and by `run_tflite` before invoking, naming the input.
"""

import json
import os
import tempfile
from typing import Dict, List, Optional, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

from albert_tf.export.common import (
    QUANTIZATIONS,
    ExportError,
    check_tokenizer_fits,
    compare_outputs,
    random_inputs,
)
from albert_tf.export.full_integer import quantize_full_integer
from albert_tf.export.input_checks import MLM_POSITIONS, tflite_tensors
from albert_tf.export.representative import check_calibration_texts, representative_samples
from albert_tf.formats.table import backbone_of
from albert_tf.json_records import write_json
from albert_tf.locking import OutputDirLock
from albert_tf.models.task_base import label_names
from albert_tf.publish import remove_stale_staging, staged_files
from albert_tf.tflite_file import LABELS_METADATA, MAX_SEQ_LENGTH_METADATA, run_tflite
from albert_tf.tokenization.packing import pack_segments

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


def tflite_input_signature(model):
    """Batch 1, any sequence length (and any number of masked positions): `[1, None]`, `[1, C, None]`."""
    specs = {}
    for name, tensor in model.input.items():
        specs[name] = tf.TensorSpec([1] + list(tensor.shape[1:-1]) + [None], tf.int32, name=name)
    return [specs]


def finished_flatbuffer(flatbuffer: bytes, max_seq_length: int, labels=None) -> bytes:
    """`flatbuffer` with its `max_seq_length` (and class names) recorded, intermediate tensors unnamed.

    The records are metadata entries (`max_seq_length_of`, `labels_of`). The dynamic
    length adds shape arithmetic between the ops; their tensors' names (long Keras
    scopes, ~2% of a tiny file) serve no app: the inputs and outputs keep theirs
    (apps look them up).
    """
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(flatbuffer, 0)
    for graph in model.subgraphs:
        named = set(graph.inputs) | set(graph.outputs)
        for index, tensor in enumerate(graph.tensors):
            if index not in named:
                tensor.name = None
    records = {MAX_SEQ_LENGTH_METADATA: str(max_seq_length)}
    if labels:
        records[LABELS_METADATA] = json.dumps(list(labels), ensure_ascii=False)
    model.metadata = list(model.metadata or [])
    for name, text in records.items():
        buffer = schema.BufferT()
        buffer.data = np.frombuffer(text.encode("utf-8"), np.uint8)
        model.buffers.append(buffer)
        entry = schema.MetadataT()
        entry.name = name
        entry.buffer = len(model.buffers) - 1
        model.metadata.append(entry)
    builder = flatbuffers.Builder(len(flatbuffer) + 1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def convert_to_tflite(
    model, input_signature, quantize: str, max_seq_length: int, samples=None, **full_integer_options
) -> bytes:
    """The model's call, behind `tflite_tensors` (bad values refused in-graph), as TFLite bytes.

    Keras' own `export(format="litert")` path (ExportArchive, then the SavedModel
    converter), with the input guard in front of the model. `full_int8` needs
    `samples`, the representative inputs; `full_integer_options` go to
    `albert_tf.export.full_integer.quantize_full_integer`.
    """
    config = backbone_of(model).albert_config

    def guarded(inputs):
        return model(tflite_tensors(inputs, config, max_seq_length), training=False)

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
            flatbuffer = quantize_full_integer(converter, samples, **full_integer_options)
        else:
            flatbuffer = converter.convert()
    return finished_flatbuffer(flatbuffer, max_seq_length, label_names(model))


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
    calibration_texts: Optional[Sequence[Tuple[str, Optional[str]]]] = None,
) -> str:
    """Writes `output_dir/albert_<variant>.tflite` (builtin ops only) and its side files; returns its path.

    The float32 file must match the Keras model within 1e-4; quantized files
    must give finite outputs (their accuracy is measured by the tests and
    `bench/export.py`). `full_int8` calibrates on `calibration_texts` ((text_a,
    text_b) pairs of real text, at least `MIN_SAMPLES`), tokenised by the model's tokenizer.
    """
    if quantize not in QUANTIZATIONS:
        raise ExportError(f"--quantize {quantize}: expected one of {', '.join(QUANTIZATIONS)}")
    config = backbone_of(model).albert_config
    if max_seq_length > config.max_position_embeddings or max_seq_length < 3:
        raise ExportError(
            f"--max_seq_length {max_seq_length}: must be in [3, max_position_embeddings="
            f"{config.max_position_embeddings}]"
        )
    signature = tflite_input_signature(model)
    # Only an MLM model has the masked-positions input this flag sizes.
    takes_positions = MLM_POSITIONS in signature[0]
    if takes_positions and not 1 <= max_predictions_per_seq <= max_seq_length:
        raise ExportError(f"--max_predictions_per_seq {max_predictions_per_seq}: must be in [1, --max_seq_length]")
    check_tokenizer_fits(model, tokenizer)
    samples = None
    check_calibration_texts(calibration_texts, quantize)
    if quantize == "full_int8":
        if tokenizer is None:
            raise ExportError(
                "--quantize full_int8: needs the model's tokenizer (a vocabulary flag or one saved with it)"
            )
        samples = representative_samples(
            calibration_texts, tokenizer, list(signature[0]), max_seq_length, max_predictions_per_seq
        )
    with OutputDirLock(output_dir):
        remove_stale_staging(output_dir)
        path = _write(model, output_dir, quantize, signature, max_seq_length, samples, tokenizer, config)
    return path


def verify_lengths(max_seq_length: int) -> List[int]:
    """The sequence lengths an export is checked at: short, middle and full."""
    # At least 4: `random_inputs` masks positions in the first half and pads row 0's second half.
    return sorted({min(5, max_seq_length), min(max_seq_length, max(4, max_seq_length // 3)), max_seq_length})


def _write(model, output_dir, quantize, signature, max_seq_length, samples, tokenizer, config) -> str:
    with staged_files(output_dir) as staging:
        staged = os.path.join(staging, TFLITE_NAMES[quantize])
        try:
            flatbuffer = convert_to_tflite(model, signature, quantize, max_seq_length, samples)
        except Exception as error:  # noqa: BLE001  (the converter's ConverterError lives in private modules)
            raise ExportError(f"TFLite conversion failed: {str(error).splitlines()[0]}") from None
        with open(staged, "wb") as f:
            f.write(flatbuffer)
        for length in verify_lengths(max_seq_length):
            inputs = random_inputs(model, 1, length, min(3, length - 1))
            got = run_tflite(staged, inputs, config)
            if quantize == "none":
                compare_outputs(model(inputs, training=False), got, 1e-4, f"{staged} at length {length}")
            elif not all(np.isfinite(v).all() for v in got.values()):
                raise ExportError(f"{staged}: non-finite outputs at length {length}")
        config.to_json_file(os.path.join(staging, "albert_config.json"))
        if tokenizer is not None:
            tokenizer.save(staging)
            write_json(
                os.path.join(staging, "tokenizer_test_vectors.json"),
                {
                    "vocab_type": tokenizer.kind,
                    "do_lower_case": tokenizer.do_lower_case,
                    "max_seq_length": max_seq_length,
                    "vectors": tokenizer_test_vectors(tokenizer, max_seq_length),
                },
                ensure_ascii=False,
                indent=1,
            )
    return os.path.join(output_dir, TFLITE_NAMES[quantize])
