"""Exports any albert_tf model: a SavedModel for TF Serving, or TFLite files for phones.

    python -m albert_tf.export --model_dir runs/base/final --output_dir exports/albert \
        --format saved_model [--version 3] [--max_seq_length 128]
    python -m albert_tf.export --model_dir runs/base/final --output_dir exports/tflite \
        --format tflite --quantize {none,float16,dynamic_int8}

`--model_dir` takes whatever `albert_tf.model_files.load_model` does (our
model dirs, run_pretraining output, a `.keras` task model, Google's TF1
checkpoints). Every export is written aside, loaded back and compared with
the Keras model, then moved into place: a failed export leaves nothing behind.

SavedModel: `<output_dir>/<version>/` (TF Serving's layout) with the signatures
of `albert_tf.serving`, the config, the vocabulary (`spm.model` or `vocab.txt`) and `serving_config.json` as
assets, and TF Serving's warm-up requests in `assets.extra/`.

TFLite: `<output_dir>/albert_<variant>.tflite`, builtin ops only, inputs of
shape [1, max_seq_length]; beside it the config, the vocabulary and
`tokenizer_test_vectors.json` (texts with the ids the app's tokenizer must
produce: TFLite has no op for ALBERT's NFKD preprocessing, so apps tokenise).

Example:

>>> import tempfile
>>> from albert_tf import AlbertBackbone
>>> backbone = AlbertBackbone.from_albert_config("configs/albert_tiny.json")
>>> path = export_saved_model(backbone, tempfile.mkdtemp(), version=1)
>>> loaded = tf.saved_model.load(path)
>>> sorted(loaded.signatures["serving_default"].structured_outputs)
['pooled_output', 'sequence_output']
"""

import json
import os
import shutil
import sys
import tempfile
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from albert_tf.serving import MLM_POSITIONS, ServingEndpoints

QUANTIZATIONS = ("none", "float16", "dynamic_int8")
TFLITE_NAMES = {"none": "albert_float32.tflite", "float16": "albert_float16.tflite",
                "dynamic_int8": "albert_dynamic_int8.tflite"}
WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
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
VERIFY_TEXTS = ("The quick brown fox jumps over the lazy dog.", "Café déjà vu, 1,000 times",
                "", "a " * 300)


class ExportError(RuntimeError):
    """An export that cannot be made or does not match its model; nothing was written."""


def _backbone(model):
    return getattr(model, "backbone", model)


def _python_tokenizer(spm_model_file: Optional[str], vocab_file: Optional[str], do_lower_case: bool):
    """The tokenizer of the given vocabulary, or None when there is none (ids-only export)."""
    from albert_tf.tokenization import load_tokenizer

    if spm_model_file is None and vocab_file is None:
        return None
    return load_tokenizer(spm_model_file, vocab_file, do_lower_case)


def _random_inputs(model, batch: int, seq: int, predictions: int = 3, seed: int = 0) -> Dict[str, np.ndarray]:
    """Inputs of the model's structure: random ids, a padded tail in row 0."""
    rng = np.random.default_rng(seed)
    vocab = _backbone(model).albert_config.vocab_size
    result = {}
    for name, tensor in model.input.items():
        shape = [batch] + [d for d in tensor.shape[1:-1]] + [predictions if name == MLM_POSITIONS else seq]
        if name == "input_ids":
            result[name] = rng.integers(5, vocab, shape).astype("int32")
        elif name == "input_mask":
            mask = np.ones(shape, "int32")
            mask[0, ..., seq // 2:] = 0
            result[name] = mask
        elif name == "segment_ids":
            result[name] = (np.arange(seq) >= seq // 3).astype("int32") * np.ones(shape, "int32")
        elif name == MLM_POSITIONS:
            result[name] = rng.integers(1, seq // 2, shape).astype("int32")
        else:
            raise ExportError(f"the model has an input {name!r} export does not know how to fill")
    return result


def _compare(expected: Dict, got: Dict, atol: float, what: str):
    for name, value in expected.items():
        value = np.asarray(value)
        other = np.asarray(got[name])
        if value.shape != other.shape or not np.allclose(value, other, atol=atol, rtol=0):
            diff = np.abs(value - other).max() if value.shape == other.shape else f"shape {other.shape}"
            raise ExportError(f"{what}: output {name!r} differs from the Keras model ({diff})")


# ---- SavedModel ------------------------------------------------------------------------
def next_version(export_base: str) -> int:
    """1 + the highest numeric version directory under `export_base` (TF Serving serves the highest)."""
    versions = [int(n) for n in os.listdir(export_base) if n.isdigit()] if os.path.isdir(export_base) else []
    return max(versions, default=0) + 1


def export_saved_model(model, export_base: str, version: Optional[int] = None,
                       spm_model_file: Optional[str] = None, do_lower_case: bool = True,
                       max_seq_length: int = 128, top_k: int = 5, warmup: bool = True,
                       vocab_file: Optional[str] = None, jit_compile: bool = False) -> str:
    """Exports `model` to `export_base/<version>`; returns that path.

    Args:
        model: any albert_tf Keras model (backbone, pretrainer, task model).
        export_base: TF Serving's model base path.
        version: the version directory (default: the next free number).
        spm_model_file: adds the text signatures and the spm asset.
        do_lower_case: the text signatures' lowercasing (as in training).
        vocab_file: a WordPiece vocab.txt instead of `spm_model_file`.
        max_seq_length: the text signatures' truncation length.
        top_k: MLM candidates returned.
        warmup: write TF Serving warm-up requests.
        jit_compile: XLA-compile the model in `serving_default` (see `ServingEndpoints`).

    Raises:
        ExportError: the export does not reproduce the model; nothing is left behind.
    """
    config = _backbone(model).albert_config
    if max_seq_length > config.max_position_embeddings or max_seq_length < 3:
        raise ExportError(f"--max_seq_length {max_seq_length}: must be in [3, max_position_embeddings="
                          f"{config.max_position_embeddings}]")
    tokenizer = special_ids = None
    python_tokenizer = _python_tokenizer(spm_model_file, vocab_file, do_lower_case)  # a bad file: nothing written
    if python_tokenizer is not None:
        from albert_tf.tf_tokenization import tf_tokenizer_for

        tokenizer = tf_tokenizer_for(python_tokenizer)
        special_ids = {"cls": python_tokenizer.cls_id, "sep": python_tokenizer.sep_id,
                       "mask": python_tokenizer.mask_id}
    version = next_version(export_base) if version is None else version
    target = os.path.join(export_base, str(version))
    os.makedirs(export_base, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{version}.staging-", dir=export_base)
    try:
        endpoints = ServingEndpoints(model, tokenizer, special_ids, max_seq_length=max_seq_length, top_k=top_k,
                                     jit_compile=jit_compile)
        signatures = sorted(endpoints.signatures())
        shutil.rmtree(staging)
        endpoints.archive().write_out(staging, verbose=False)
        # Files for clients in assets/ (the graph holds the vocabulary as constants and reads none).
        assets = os.path.join(staging, "assets")
        os.makedirs(assets, exist_ok=True)
        config.to_json_file(os.path.join(assets, "albert_config.json"))
        if python_tokenizer is not None:
            with open(os.path.join(assets, python_tokenizer.asset_name), "wb") as f:
                f.write(python_tokenizer.model_proto)
        with open(os.path.join(assets, "serving_config.json"), "w") as f:
            json.dump({"model_class": type(model).__name__, "signatures": signatures,
                       "vocab_type": python_tokenizer.kind if python_tokenizer else None,
                       "do_lower_case": do_lower_case, "max_seq_length": max_seq_length, "top_k": top_k}, f,
                      indent=2)
        if warmup:
            write_warmup_requests(staging, model, signatures, max_seq_length)
        _verify_saved_model(model, staging, python_tokenizer, max_seq_length)
        if os.path.exists(target):
            shutil.rmtree(target)
        os.rename(staging, target)
        return target
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _text_request(signature: str) -> Dict[str, np.ndarray]:
    texts = {"text_a": np.array([b"ALBERT is a lite BERT."])}
    if signature == "serve_text_pair":
        texts["text_b"] = np.array([b"It shares parameters across layers."])
    return texts


def write_warmup_requests(saved_model_dir: str, model, signatures: List[str], max_seq_length: int):
    """One PredictionLog per signature (batch 1, full length), as TF Serving's warm-up expects."""
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    os.makedirs(os.path.join(saved_model_dir, "assets.extra"), exist_ok=True)
    with tf.io.TFRecordWriter(os.path.join(saved_model_dir, WARMUP_FILE)) as writer:
        for signature in signatures:
            if signature == "serving_default":
                inputs = _random_inputs(model, 1, max_seq_length)
            else:
                inputs = _text_request(signature)
            request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(signature_name=signature))
            for name, value in inputs.items():
                request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
            log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())


def reference_text_inputs(python_tokenizer, texts_a, texts_b, max_seq_length: int, has_mlm: bool):
    """What the text signatures must feed the model, computed in Python (padded to the batch's longest)."""
    from albert_tf.inputs.packing import encode_with_masks, pack_segments

    def encode(text):
        text = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
        return encode_with_masks(python_tokenizer, text) if has_mlm else python_tokenizer.encode(text)

    rows = [pack_segments(encode(a), None if texts_b is None else encode(texts_b[i]), max_seq_length,
                          python_tokenizer.cls_id, python_tokenizer.sep_id) for i, a in enumerate(texts_a)]
    width = max(len(ids) for ids, _ in rows)
    inputs = {"input_ids": np.zeros((len(rows), width), "int32"), "input_mask": np.zeros((len(rows), width), "int32"),
              "segment_ids": np.zeros((len(rows), width), "int32")}
    for i, (ids, segments) in enumerate(rows):
        inputs["input_ids"][i, :len(ids)] = ids
        inputs["input_mask"][i, :len(ids)] = 1
        inputs["segment_ids"][i, :len(ids)] = segments
    if has_mlm:
        positions = [np.flatnonzero(row == python_tokenizer.mask_id) for row in inputs["input_ids"]]
        inputs[MLM_POSITIONS] = np.zeros((len(rows), max(len(p) for p in positions)), "int32")
        for i, p in enumerate(positions):
            inputs[MLM_POSITIONS][i, :len(p)] = p
    return inputs


def _verify_saved_model(model, path: str, tokenizer, max_seq_length: int):
    loaded = tf.saved_model.load(path)
    inputs = _random_inputs(model, 2, min(16, max_seq_length))
    got = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in inputs.items()})
    _compare(model(inputs, training=False), got, 1e-5, f"{path} serving_default")
    if "serve_text_pair" not in loaded.signatures:
        return
    has_mlm = MLM_POSITIONS in model.input
    texts_a = [t + (" [MASK] here" if has_mlm else "") for t in VERIFY_TEXTS]
    texts_b = list(reversed(VERIFY_TEXTS))
    for texts_b_or_none, signature in ((None, "serve_text"), (texts_b, "serve_text_pair")):
        expected = reference_text_inputs(tokenizer, texts_a, texts_b_or_none, max_seq_length, has_mlm)
        request = {"text_a": tf.constant(texts_a)}
        if texts_b_or_none is not None:
            request["text_b"] = tf.constant(texts_b_or_none)
        got = loaded.signatures[signature](**request)
        _compare(expected, got, 0, f"{path} {signature} tokenisation")
        _compare(model(expected, training=False), got, 1e-5, f"{path} {signature}")


# ---- TFLite ----------------------------------------------------------------------------
def _converter_options(quantize: str) -> Dict:
    options = {"target_spec": {"supported_ops": [tf.lite.OpsSet.TFLITE_BUILTINS]}}
    if quantize != "none":
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


def run_tflite(model_file: str, inputs: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Runs a .tflite file's `serving_default` signature (LiteRT's interpreter)."""
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_path=model_file).get_signature_runner("serving_default")
    return runner(**inputs)


def tokenizer_test_vectors(python_tokenizer, max_seq_length: int) -> List[Dict]:
    """Texts with the preprocessed text, pieces and packed ids an app's tokenizer must reproduce."""
    from albert_tf.inputs.packing import pack_segments

    vectors = []
    for text in TEST_VECTOR_TEXTS:
        ids, _ = pack_segments(python_tokenizer.encode(text), None, max_seq_length,
                               python_tokenizer.cls_id, python_tokenizer.sep_id)
        vectors.append({"text": text, "preprocessed": python_tokenizer.preprocess(text),
                        "pieces": python_tokenizer.tokenize(text), "input_ids": ids})
    return vectors


def export_tflite(model, output_dir: str, quantize: str = "none", max_seq_length: int = 128,
                  max_predictions_per_seq: int = 20, spm_model_file: Optional[str] = None,
                  do_lower_case: bool = True, vocab_file: Optional[str] = None) -> str:
    """Writes `output_dir/albert_<variant>.tflite` (builtin ops only) and its side files; returns its path.

    The float32 file must match the Keras model within 1e-4; quantized files
    must give finite outputs (their accuracy is measured by the tests and
    `bench/export.py`).
    """
    if quantize not in QUANTIZATIONS:
        raise ExportError(f"--quantize {quantize}: expected one of {', '.join(QUANTIZATIONS)}")
    config = _backbone(model).albert_config
    if max_seq_length > config.max_position_embeddings:
        raise ExportError(f"--max_seq_length {max_seq_length} exceeds max_position_embeddings "
                          f"{config.max_position_embeddings}")
    tokenizer = _python_tokenizer(spm_model_file, vocab_file, do_lower_case)  # a bad file: nothing written
    os.makedirs(output_dir, exist_ok=True)
    target = os.path.join(output_dir, TFLITE_NAMES[quantize])
    staging = tempfile.mkdtemp(prefix=".tflite-staging-", dir=output_dir)
    try:
        staged = os.path.join(staging, TFLITE_NAMES[quantize])
        signature = tflite_input_signature(model, max_seq_length, max_predictions_per_seq)
        try:
            model.export(staged, format="litert", input_signature=signature, verbose=False,
                         **_converter_options(quantize))
        except Exception as error:  # the converter raises its own ConverterError
            raise ExportError(f"TFLite conversion failed: {str(error).splitlines()[0]}") from None
        inputs = {name: np.resize(value, signature[0][name].shape) for name, value in
                  _random_inputs(model, 1, max_seq_length, max_predictions_per_seq).items()}
        got = run_tflite(staged, inputs)
        if quantize == "none":
            _compare(model(inputs, training=False), got, 1e-4, staged)
        elif not all(np.isfinite(v).all() for v in got.values()):
            raise ExportError(f"{staged}: non-finite outputs")
        config.to_json_file(os.path.join(staging, "albert_config.json"))
        if tokenizer is not None:
            with open(os.path.join(staging, tokenizer.asset_name), "wb") as f:
                f.write(tokenizer.model_proto)
            with open(os.path.join(staging, "tokenizer_test_vectors.json"), "w") as f:
                json.dump({"vocab_type": tokenizer.kind, "do_lower_case": do_lower_case,
                           "max_seq_length": max_seq_length,
                           "vectors": tokenizer_test_vectors(tokenizer, max_seq_length)}, f,
                          ensure_ascii=False, indent=1)
        for name in os.listdir(staging):
            os.replace(os.path.join(staging, name), os.path.join(output_dir, name))
        return target
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# ---- CLI -------------------------------------------------------------------------------
def define_flags():
    from absl import flags

    flags.DEFINE_string("model_dir", None, "The model: our model dir, a run_pretraining output dir, a .keras "
                        "file (or a dir with model.keras), or Google's TF1 checkpoint.")
    flags.DEFINE_string("output_dir", None, "SavedModel: TF Serving's model base path (versions go under it). "
                        "TFLite: the directory for the .tflite file and its side files.")
    flags.DEFINE_enum("format", "saved_model", ["saved_model", "tflite"], "What to write.")
    flags.DEFINE_enum("quantize", "none", list(QUANTIZATIONS), "TFLite weights: float32, float16 or int8.")
    flags.DEFINE_integer("max_seq_length", 128, "Text signatures' truncation / TFLite input length.")
    flags.DEFINE_integer("max_predictions_per_seq", 20, "TFLite MLM model: masked positions input length.")
    flags.DEFINE_integer("version", None, "SavedModel version directory (default: next free number).")
    flags.DEFINE_string("albert_config_file", None, "Config for a TF1 checkpoint without albert_config.json.")
    flags.DEFINE_string("spm_model_file", None, "SentencePiece model (default: the one beside the weights).")
    flags.DEFINE_string("vocab_file", None, "WordPiece vocab.txt instead (default: one beside the weights).")
    flags.DEFINE_bool("do_lower_case", True, "Lowercase in the text signatures (as in training).")
    flags.DEFINE_integer("top_k", 5, "MLM candidates returned by the SavedModel.")
    flags.DEFINE_bool("jit_compile", False, "SavedModel: XLA-compile the model in serving_default (faster on "
                      "CPU; compiles once per input shape; the server needs XLA's CPU JIT).")
    flags.mark_flags_as_required(["model_dir", "output_dir"])


def main(argv):
    from absl import flags

    from albert_tf.checkpoints import CheckpointError
    from albert_tf.config import ConfigError
    from albert_tf.model_files import ModelFileError, load_model
    from albert_tf.tokenization import TokenizerError

    del argv
    FLAGS = flags.FLAGS
    try:
        if FLAGS.spm_model_file and FLAGS.vocab_file:
            raise TokenizerError("give at most one of --spm_model_file and --vocab_file")
        loaded = load_model(FLAGS.model_dir, FLAGS.albert_config_file, FLAGS.spm_model_file, FLAGS.vocab_file)
        if FLAGS.format == "saved_model":
            path = export_saved_model(loaded.model, FLAGS.output_dir, FLAGS.version, loaded.spm_model_file,
                                      FLAGS.do_lower_case, FLAGS.max_seq_length, FLAGS.top_k,
                                      vocab_file=loaded.vocab_file, jit_compile=FLAGS.jit_compile)
        else:
            path = export_tflite(loaded.model, FLAGS.output_dir, FLAGS.quantize, FLAGS.max_seq_length,
                                 FLAGS.max_predictions_per_seq, loaded.spm_model_file, FLAGS.do_lower_case,
                                 vocab_file=loaded.vocab_file)
    except (ModelFileError, CheckpointError, ConfigError, TokenizerError, ExportError) as error:
        sys.exit(f"error: {error}")
    print(json.dumps({"model": loaded.source, "model_class": type(loaded.model).__name__, "export": path,
                      "spm_model_file": loaded.spm_model_file, "vocab_file": loaded.vocab_file}, indent=2))


if __name__ == "__main__":
    from absl import app

    define_flags()
    app.run(main)
