"""The early-exit signature of an early-exit model's SavedModel: `serve_early_exit`.

Inputs: the model's ids (`input_ids`, `input_mask`, `segment_ids` int32 `[B, S]`;
`[B, C, S]` for multiple choice),
`patience` (int32 scalar: how many consecutive classifiers must agree; the
number of layers gives the full-depth answer) and `threshold` (float32
scalar, regression only: the largest change between consecutive scores that
still counts as agreeing). Outputs: `logits` (each row's answer),
`layers_used` (int32 `[B]`), and for classification `probabilities` and
`label`. The layers run in a while loop that stops once every row has
exited (`albert_tf.models.early_exit.PatientInference`).

`serving_default` and the text signatures stay as for every model: the
full-depth answer.

`export_early_exit_tflite` writes the same signature to a TFLite file (batch
1, builtin ops only: the loop is TFLite's WHILE), beside the full-depth file
`albert_tf.export.tflite` writes.
"""

import os
import shutil
import tempfile

import keras
import numpy as np
import tensorflow as tf

from albert_tf.export.common import ExportError, backbone_of, compare_outputs, random_inputs
from albert_tf.export.signatures import TOKEN_INPUTS, ServingEndpoints
from albert_tf.export.tflite import tflite_input_signature
from albert_tf.locking import OutputDirLock
from albert_tf.models.early_exit import AlbertEarlyExitClassifier, AlbertEarlyExitMultipleChoice, PatientInference
from albert_tf.publish import staged_files

SIGNATURE = "serve_early_exit"
EARLY_EXIT_MODELS = (AlbertEarlyExitClassifier, AlbertEarlyExitMultipleChoice)
TFLITE_NAME = "albert_early_exit_float32.tflite"
PATIENCE_SPEC = tf.TensorSpec([], tf.int32, name="patience")
THRESHOLD_SPEC = tf.TensorSpec([], tf.float32, name="threshold")


class EarlyExitEndpoints(ServingEndpoints):
    """`ServingEndpoints` plus `serve_early_exit`."""

    def __init__(self, model, *args, **kwargs):
        super().__init__(model, *args, **kwargs)
        self.inference = PatientInference(model)

    def signatures(self):
        result = super().signatures()
        result[SIGNATURE] = (self._serve_early_exit, [self.input_specs, PATIENCE_SPEC, THRESHOLD_SPEC])
        return result

    def _serve_early_exit(self, inputs, patience, threshold):
        outputs = self.inference(inputs, patience=patience, threshold=threshold)
        if not self.inference.is_regression:
            outputs["probabilities"] = tf.nn.softmax(outputs["logits"], axis=-1)
            outputs["label"] = tf.argmax(outputs["logits"], axis=-1, output_type=tf.int32)
        return outputs


def endpoints_class(model):
    """The serving endpoints of `model`: with `serve_early_exit` for an early-exit classifier."""
    return EarlyExitEndpoints if isinstance(model, EARLY_EXIT_MODELS) else ServingEndpoints


def warmup_request(model, max_seq_length: int) -> dict:
    """A batch-1 `serve_early_exit` request at full depth (every layer runs once)."""
    return {
        **random_inputs(model, 1, max_seq_length),
        "patience": np.array(model.num_exits, "int32"),
        "threshold": np.array(0.0, "float32"),
    }


def verify_saved_model(model, path: str):
    """`serve_early_exit` at every patience gives what `PatientInference` gives on the Keras model."""
    if not isinstance(model, EARLY_EXIT_MODELS):
        return
    signature = tf.saved_model.load(path).signatures[SIGNATURE]
    inference = PatientInference(model)
    inputs = random_inputs(model, 3, 16)
    threshold = 0.01
    for patience in range(1, model.num_exits + 1):
        expected = inference(inputs, patience=patience, threshold=threshold)
        got = signature(
            **{k: tf.constant(v) for k, v in inputs.items()},
            patience=tf.constant(patience),
            threshold=tf.constant(threshold),
        )
        if not np.array_equal(np.asarray(expected["layers_used"]), got["layers_used"].numpy()):
            raise ExportError(f"{path} {SIGNATURE}: layers_used differs from the Keras model at patience {patience}")
        compare_outputs({"logits": expected["logits"]}, got, 1e-5, f"{path} {SIGNATURE} patience {patience}")


def check_early_exit_model(model):
    if not isinstance(model, EARLY_EXIT_MODELS):
        raise ExportError(
            f"early-exit export: the model is a {type(model).__name__}; fine-tune with --early_exit first"
        )


def export_early_exit_tflite(model, output_dir: str, max_seq_length: int = 128) -> str:
    """Writes `output_dir/albert_early_exit_float32.tflite` (signature `serve_early_exit`); returns its path.

    Inputs `[1, max_seq_length]` ids, `patience` and `threshold`; checked
    against `PatientInference` on the Keras model at every patience.
    """
    check_early_exit_model(model)
    config = backbone_of(model).albert_config
    if max_seq_length > config.max_position_embeddings or max_seq_length < 3:
        raise ExportError(
            f"--max_seq_length {max_seq_length}: must be in [3, max_position_embeddings="
            f"{config.max_position_embeddings}]"
        )
    inference = PatientInference(model)
    ids_spec = tflite_input_signature(model, max_seq_length, 0)[0]
    archive = keras.export.ExportArchive()
    archive.add_endpoint(
        SIGNATURE,
        lambda inputs, patience, threshold: inference(inputs, patience=patience, threshold=threshold),
        [ids_spec, PATIENCE_SPEC, THRESHOLD_SPEC],
    )
    with OutputDirLock(output_dir), staged_files(output_dir) as staging:
        # Through a SavedModel: converting the traced function directly loses the weights read in the loop.
        saved = tempfile.mkdtemp(dir=staging)
        archive.write_out(saved, verbose=False)
        try:
            converter = tf.lite.TFLiteConverter.from_saved_model(saved, signature_keys=[SIGNATURE])
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
            flatbuffer = converter.convert()
        except Exception as error:  # noqa: BLE001  (the converter's ConverterError lives in private modules)
            raise ExportError(f"early-exit TFLite conversion failed: {str(error).splitlines()[0]}") from None
        shutil.rmtree(saved)
        staged = os.path.join(staging, TFLITE_NAME)
        with open(staged, "wb") as f:
            f.write(flatbuffer)
        verify_tflite(model, staged, max_seq_length)
    return os.path.join(output_dir, TFLITE_NAME)


def run_early_exit_tflite(model_file: str, inputs: dict, patience: int, threshold: float = 0.0) -> dict:
    """Runs a file's `serve_early_exit` on one row (LiteRT's interpreter)."""
    from ai_edge_litert.interpreter import Interpreter  # the runtime loads only to run a file

    runner = Interpreter(model_path=model_file).get_signature_runner(SIGNATURE)
    return runner(
        **{name: inputs[name] for name in TOKEN_INPUTS},
        patience=np.array(patience, "int32"),
        threshold=np.array(threshold, "float32"),
    )


def verify_tflite(model, path: str, max_seq_length: int):
    inference = PatientInference(model)
    inputs = random_inputs(model, 1, max_seq_length)
    for patience in range(1, model.num_exits + 1):
        expected = inference(inputs, patience=patience, threshold=0.01)
        got = run_early_exit_tflite(path, inputs, patience, 0.01)
        if not np.array_equal(np.asarray(expected["layers_used"]), got["layers_used"]):
            raise ExportError(f"{path}: layers_used differs from the Keras model at patience {patience}")
        compare_outputs({"logits": expected["logits"]}, got, 1e-4, f"{path} patience {patience}")
