"""The early-exit signature of an early-exit model's SavedModel: `serve_early_exit`.

Inputs: the model's ids (`input_ids`, `input_mask`, `segment_ids` int32 `[B, S]`;
`[B, C, S]` for multiple choice),
`patience` (int32 scalar in [1, L]: how many consecutive classifiers must
agree; L, the number of layer applications, gives the full-depth answer;
anything else, a vector included, is refused as `predict --patience` refuses
it: `albert_tf.export.input_checks.serving_patience`) and `threshold`
(float32 scalar, regression only: the largest change between consecutive
scores that still counts as agreeing). Outputs: `logits` (each row's answer),
`layers_used` (int32 `[B]`), and for classification `probabilities` and
`label`. Bad ids are refused as `serving_default` refuses them
(`albert_tf.export.input_checks`). The layers run in a while loop that stops once every row has
exited (`albert_tf.models.early_exit.PatientInference`). With a tokenizer,
`serve_early_exit_text` (`text_a`) and `serve_early_exit_text_pair`
(`text_a`, `text_b`) take text, packed as `serve_text`/`serve_text_pair`, and
also return the packed ids.

`serving_default` and the text signatures stay as for every model: the
full-depth answer.

`export_early_exit_tflite` writes the same signature to a TFLite file (batch
1, any sequence length up to `max_seq_length`, builtin ops only: the loop is
TFLite's WHILE; layers that do not share one weight set gather theirs from
stacked constants, GATHER), beside the full-depth file `albert_tf.export.tflite`
writes, with the same side files (`albert_config.json`, the tokenizer and its
test vectors), so `predict --model_dir <file> --patience N` runs it. The file refuses bad ids, a length
past `max_seq_length` and a patience outside [1, L] as the other TFLite files refuse bad ids (GATHER's
bounds check); `run_early_exit_tflite` names the input first.
"""

import os
import shutil
import tempfile

import keras
import numpy as np
import tensorflow as tf

from albert_tf.export.common import ExportError, check_tokenizer_fits, compare_outputs, random_inputs
from albert_tf.export.input_checks import serving_patience, serving_tensors, tflite_patience, tflite_tensors
from albert_tf.export.signatures import TOKEN_INPUTS, ServingEndpoints
from albert_tf.export.tflite import finished_flatbuffer, tflite_input_signature, verify_lengths, write_side_files
from albert_tf.export.verify import VERIFY_TEXTS, reference_text_inputs
from albert_tf.formats.table import backbone_of
from albert_tf.locking import OutputDirLock
from albert_tf.models.early_exit import AlbertEarlyExitClassifier, AlbertEarlyExitMultipleChoice, PatientInference
from albert_tf.models.task_base import label_names
from albert_tf.publish import staged_files
from albert_tf.tflite_file import EARLY_EXIT_SIGNATURE, EARLY_EXIT_TFLITE_NAME, TFLiteRunner

SIGNATURE = EARLY_EXIT_SIGNATURE
TEXT_SIGNATURE = "serve_early_exit_text"
TEXT_PAIR_SIGNATURE = "serve_early_exit_text_pair"
SIGNATURES = (SIGNATURE, TEXT_SIGNATURE, TEXT_PAIR_SIGNATURE)
EARLY_EXIT_MODELS = (AlbertEarlyExitClassifier, AlbertEarlyExitMultipleChoice)
TFLITE_NAME = EARLY_EXIT_TFLITE_NAME
# Any shape in the SavedModel (its assertions refuse all but a scalar; a [] placeholder is not checked
# at run time by a C++ server, so a vector would be taken); scalars in the TFLite file.
PATIENCE_SPEC = tf.TensorSpec(None, tf.int32, name="patience")
THRESHOLD_SPEC = tf.TensorSpec(None, tf.float32, name="threshold")
TFLITE_PATIENCE_SPEC = tf.TensorSpec([], tf.int32, name="patience")
TFLITE_THRESHOLD_SPEC = tf.TensorSpec([], tf.float32, name="threshold")


class EarlyExitEndpoints(ServingEndpoints):
    """`ServingEndpoints` plus `serve_early_exit`."""

    def __init__(self, model, *args, **kwargs):
        super().__init__(model, *args, **kwargs)
        self.inference = PatientInference(model)

    def signatures(self):
        result = super().signatures()
        result[SIGNATURE] = (self._serve_early_exit, [self.input_specs, PATIENCE_SPEC, THRESHOLD_SPEC])
        if self.takes_text:
            text = tf.TensorSpec([None], tf.string, name="text_a")
            pair = tf.TensorSpec([None], tf.string, name="text_b")
            result[TEXT_SIGNATURE] = (self._serve_early_exit_text, [text, PATIENCE_SPEC, THRESHOLD_SPEC])
            result[TEXT_PAIR_SIGNATURE] = (
                self._serve_early_exit_text_pair,
                [text, pair, PATIENCE_SPEC, THRESHOLD_SPEC],
            )
        return result

    def _serve_early_exit(self, inputs, patience, threshold):
        # Bad ids are refused naming the input, as serving_default refuses them.
        return self._early_exit_outputs(
            serving_tensors(inputs, backbone_of(self.model).albert_config, len(self.model.input["input_ids"].shape)),
            patience,
            threshold,
        )

    def _early_exit_outputs(self, inputs, patience, threshold):
        patience = serving_patience(patience, self.inference.num_exits)
        scalar = tf.debugging.assert_rank(threshold, 0, message="threshold: must be a scalar")
        with tf.control_dependencies([scalar]):
            threshold = tf.reshape(threshold, [])
        outputs = self.inference(inputs, patience=patience, threshold=threshold)
        if not self.inference.is_regression:
            outputs["probabilities"] = tf.nn.softmax(outputs["logits"], axis=-1)
            outputs["label"] = tf.argmax(outputs["logits"], axis=-1, output_type=tf.int32)
        return outputs

    def _serve_early_exit_text(self, text_a, patience, threshold):
        return self._early_exit_segments([text_a], patience, threshold)

    def _serve_early_exit_text_pair(self, text_a, text_b, patience, threshold):
        return self._early_exit_segments(self._pair(text_a, text_b, TEXT_PAIR_SIGNATURE), patience, threshold)

    def _early_exit_segments(self, texts, patience, threshold):
        inputs = self._packed(texts)  # as the text signatures pack
        outputs = self._early_exit_outputs(inputs, patience, threshold)
        outputs.update(inputs)
        return outputs


def endpoints_class(model):
    """The serving endpoints of `model`: with `serve_early_exit` for an early-exit classifier."""
    return EarlyExitEndpoints if isinstance(model, EARLY_EXIT_MODELS) else ServingEndpoints


def warmup_request(model, signature: str, max_seq_length: int) -> dict:
    """A batch-1 request of an early-exit `signature` at full depth (every layer runs once)."""
    full_depth = {"patience": np.array(model.num_exits, "int32"), "threshold": np.array(0.0, "float32")}
    if signature == SIGNATURE:
        return {**random_inputs(model, 1, max_seq_length), **full_depth}
    texts = {"text_a": np.array([b"ALBERT is a lite BERT."])}
    if signature == TEXT_PAIR_SIGNATURE:
        texts["text_b"] = np.array([b"It shares parameters across layers."])
    return {**texts, **full_depth}


def verify_saved_model(model, path: str, tokenizer=None, max_seq_length: int = 128):
    """The early-exit signatures at every patience give what `PatientInference` gives on the Keras model."""
    if not isinstance(model, EARLY_EXIT_MODELS):
        return
    loaded = tf.saved_model.load(path)
    signature = loaded.signatures[SIGNATURE]
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
    if TEXT_PAIR_SIGNATURE not in loaded.signatures:
        return
    texts_a, texts_b = list(VERIFY_TEXTS), list(reversed(VERIFY_TEXTS))
    for texts_b_or_none, name in ((None, TEXT_SIGNATURE), (texts_b, TEXT_PAIR_SIGNATURE)):
        expected_inputs = reference_text_inputs(tokenizer, texts_a, texts_b_or_none, max_seq_length, False)
        request = {"text_a": tf.constant(texts_a), "patience": tf.constant(2), "threshold": tf.constant(threshold)}
        if texts_b_or_none is not None:
            request["text_b"] = tf.constant(texts_b_or_none)
        got = loaded.signatures[name](**request)
        compare_outputs(expected_inputs, got, 0, f"{path} {name} tokenisation")
        expected = inference(expected_inputs, patience=2, threshold=threshold)
        if not np.array_equal(np.asarray(expected["layers_used"]), got["layers_used"].numpy()):
            raise ExportError(f"{path} {name}: layers_used differs from the Keras model")
        compare_outputs({"logits": expected["logits"]}, got, 1e-5, f"{path} {name}")


def check_early_exit_model(model):
    if not isinstance(model, EARLY_EXIT_MODELS):
        raise ExportError(
            f"early-exit export: the model ({type(model).__name__}) has no internal classifiers; "
            "fine-tune with --early_exit first"
        )


def export_early_exit_tflite(model, output_dir: str, max_seq_length: int = 128, tokenizer=None) -> str:
    """Writes `output_dir/albert_early_exit_float32.tflite` (signature `serve_early_exit`); returns its path.

    Inputs `[1, S]` ids (any S up to `max_seq_length`), `patience` and
    `threshold`; checked against `PatientInference` on the Keras model at every
    patience and several lengths. `albert_config.json` goes beside it
    (`run_early_exit_tflite` reads the value ranges there), and so do the
    `tokenizer`'s files and test vectors, as beside every TFLite file (`predict` reads them).
    """
    check_early_exit_model(model)
    check_tokenizer_fits(model, tokenizer)
    config = backbone_of(model).albert_config
    if max_seq_length > config.max_position_embeddings or max_seq_length < 3:
        raise ExportError(
            f"--max_seq_length {max_seq_length}: must be in [3, max_position_embeddings="
            f"{config.max_position_embeddings}]"
        )
    # Layers with different weights: one loop body with the application's weights gathered from stacks
    # (the converter leaves weights read inside a per-layer switch as variables, which no builtin reads).
    inference = PatientInference(model, gather_weights=True)

    def guarded(inputs, patience, threshold):
        # Bad ids, a length past max_seq_length and a patience outside [1, L] become GATHER indices it refuses.
        return inference(
            tflite_tensors(inputs, config, max_seq_length),
            patience=tflite_patience(patience, model.num_exits),
            threshold=threshold,
        )

    archive = keras.export.ExportArchive()
    archive.add_endpoint(
        SIGNATURE, guarded, [tflite_input_signature(model)[0], TFLITE_PATIENCE_SPEC, TFLITE_THRESHOLD_SPEC]
    )
    with OutputDirLock(output_dir), staged_files(output_dir) as staging:
        # Through a SavedModel: converting the traced function directly loses the weights read in the loop.
        saved = tempfile.mkdtemp(dir=staging)
        archive.write_out(saved, verbose=False)
        try:
            converter = tf.lite.TFLiteConverter.from_saved_model(saved, signature_keys=[SIGNATURE])
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
            flatbuffer = finished_flatbuffer(converter.convert(), max_seq_length, label_names(model))
        except Exception as error:  # noqa: BLE001  (the converter's ConverterError lives in private modules)
            raise ExportError(f"early-exit TFLite conversion failed: {str(error).splitlines()[0]}") from None
        shutil.rmtree(saved)
        staged = os.path.join(staging, TFLITE_NAME)
        with open(staged, "wb") as f:
            f.write(flatbuffer)
        write_side_files(staging, config, tokenizer, max_seq_length)
        verify_tflite(model, staged, max_seq_length, config)
    return os.path.join(output_dir, TFLITE_NAME)


def run_early_exit_tflite(model_file: str, inputs: dict, patience: int, threshold: float = 0.0, config=None) -> dict:
    """Runs a file's `serve_early_exit` on one row (LiteRT's interpreter) at the inputs' length.

    Checked first as `albert_tf.export.run_tflite` checks (names, shapes, value
    ranges, the length, against `config` or the `albert_config.json` beside the
    file) and `patience` a scalar in [1, L], naming the input (`albert_tf.tflite_file.TFLiteRunner`).
    """
    runner = TFLiteRunner(model_file, config)
    if not runner.early_exit:
        raise ExportError(f"{model_file}: has no {SIGNATURE} signature (not an early-exit file)")
    return runner({name: inputs[name] for name in TOKEN_INPUTS if name in inputs}, patience, threshold)


def verify_tflite(model, path: str, max_seq_length: int, config):
    inference = PatientInference(model)
    for length in verify_lengths(max_seq_length):
        inputs = random_inputs(model, 1, length)
        for patience in range(1, model.num_exits + 1):
            expected = inference(inputs, patience=patience, threshold=0.01)
            got = run_early_exit_tflite(path, inputs, patience, 0.01, config)
            if not np.array_equal(np.asarray(expected["layers_used"]), got["layers_used"]):
                raise ExportError(
                    f"{path}: layers_used differs from the Keras model at patience {patience}, length {length}"
                )
            compare_outputs({"logits": expected["logits"]}, got, 1e-4, f"{path} patience {patience} length {length}")
