"""The early-exit signature of an `AlbertEarlyExitClassifier`'s SavedModel: `serve_early_exit`.

Inputs: the ids (`input_ids`, `input_mask`, `segment_ids` int32 `[B, S]`),
`patience` (int32 scalar: how many consecutive classifiers must agree; the
number of layers gives the full-depth answer) and `threshold` (float32
scalar, regression only: the largest change between consecutive scores that
still counts as agreeing). Outputs: `logits` (each row's answer),
`layers_used` (int32 `[B]`), and for classification `probabilities` and
`label`. The layers run in a while loop that stops once every row has
exited (`albert_tf.models.early_exit.PatientInference`).

`serving_default` and the text signatures stay as for every model: the
full-depth answer.
"""

import numpy as np
import tensorflow as tf

from albert_tf.export.common import ExportError, compare_outputs, random_inputs
from albert_tf.export.signatures import ServingEndpoints
from albert_tf.models.early_exit import AlbertEarlyExitClassifier, PatientInference

SIGNATURE = "serve_early_exit"


class EarlyExitEndpoints(ServingEndpoints):
    """`ServingEndpoints` plus `serve_early_exit`."""

    def __init__(self, model, *args, **kwargs):
        super().__init__(model, *args, **kwargs)
        self.inference = PatientInference(model)

    def signatures(self):
        result = super().signatures()
        patience = tf.TensorSpec([], tf.int32, name="patience")
        threshold = tf.TensorSpec([], tf.float32, name="threshold")
        result[SIGNATURE] = (self._serve_early_exit, [self.input_specs, patience, threshold])
        return result

    def _serve_early_exit(self, inputs, patience, threshold):
        outputs = self.inference(inputs, patience=patience, threshold=threshold)
        if self.inference.num_classes > 1:
            outputs["probabilities"] = tf.nn.softmax(outputs["logits"], axis=-1)
            outputs["label"] = tf.argmax(outputs["logits"], axis=-1, output_type=tf.int32)
        return outputs


def endpoints_class(model):
    """The serving endpoints of `model`: with `serve_early_exit` for an early-exit classifier."""
    return EarlyExitEndpoints if isinstance(model, AlbertEarlyExitClassifier) else ServingEndpoints


def warmup_request(model, max_seq_length: int) -> dict:
    """A batch-1 `serve_early_exit` request at full depth (every layer runs once)."""
    return {
        **random_inputs(model, 1, max_seq_length),
        "patience": np.array(model.num_exits, "int32"),
        "threshold": np.array(0.0, "float32"),
    }


def verify_saved_model(model, path: str):
    """`serve_early_exit` at every patience gives what `PatientInference` gives on the Keras model."""
    if not isinstance(model, AlbertEarlyExitClassifier):
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
