"""Requests an exported model must refuse (albert_tf/export/input_checks.py): values out of range, other shapes.

Each test feeds what a hostile or careless user would to the SavedModel's `serving_default` or a TFLite
file, and checks the refusal names the input and the model goes on answering good requests.
"""

import numpy as np
import pytest
import tensorflow as tf

from toy_inputs import SEQ, VOCAB, good_request, tiny_pretrainer

PREDICTIONS = 2


def with_value(request, name, value):
    changed = {k: v.copy() for k, v in request.items()}
    changed[name][0, 1] = value
    return changed


# Values the model would misread: Keras' take wraps negatives, TF broadcasts batch 1.
BAD_VALUES = [
    ("input_ids", -7),
    ("input_ids", VOCAB),
    ("segment_ids", -1),
    ("segment_ids", 2),
    ("input_mask", -1),
    ("input_mask", 2),
    ("masked_lm_positions", -1),
    ("masked_lm_positions", SEQ),
]


@pytest.fixture(scope="module")
def pretrainer():
    return tiny_pretrainer()


@pytest.fixture(scope="module")
def served(pretrainer, tmp_path_factory):
    from albert_tf.export import export_saved_model

    path = export_saved_model(pretrainer, str(tmp_path_factory.mktemp("served")), warmup=False, max_seq_length=16)
    return tf.saved_model.load(path).signatures["serving_default"]


def call(signature, request):
    return signature(**{name: tf.constant(value) for name, value in request.items()})


@pytest.mark.parametrize("name,value", BAD_VALUES)
def test_serving_default_refuses_values_out_of_range_and_keeps_serving(pretrainer, served, name, value):
    request = good_request(2)
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"{name}: every value must be in"):
        call(served, with_value(request, name, value))
    expected = pretrainer(request, training=False)["mlm_logits"]
    np.testing.assert_allclose(call(served, request)["mlm_logits"], expected, atol=1e-5)


@pytest.mark.parametrize(
    "name,shape",
    [
        ("input_mask", (1, SEQ)),
        ("segment_ids", (1, SEQ)),
        ("input_mask", (2, SEQ - 3)),
        ("masked_lm_positions", (1, 2)),
    ],
)
def test_serving_default_refuses_mismatched_batch_and_length(served, name, shape):
    request = good_request(2)
    request[name] = request[name][: shape[0], : shape[1]]
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"{name} must have the (shape|batch size) of input_ids"):
        call(served, request)


@pytest.mark.parametrize("length", [0, 129])
def test_serving_default_refuses_lengths_outside_the_position_table(served, length):
    request = {name: np.resize(value, (2, length)) for name, value in good_request(2).items()}
    request["masked_lm_positions"] = np.zeros((2, 0), "int32")
    with pytest.raises(tf.errors.InvalidArgumentError, match="input_ids: the sequence length must be in \\[1, max_pos"):
        call(served, request)


@pytest.fixture(scope="module")
def tflite_file(pretrainer, tmp_path_factory):
    from albert_tf.export import export_tflite

    return export_tflite(
        pretrainer, str(tmp_path_factory.mktemp("tflite")), max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS
    )


@pytest.mark.parametrize("name,value", BAD_VALUES)
def test_tflite_file_refuses_values_out_of_range(pretrainer, tflite_file, name, value):
    from ai_edge_litert.interpreter import Interpreter

    from albert_tf.export import run_tflite
    from albert_tf.export.input_checks import ServingInputError

    request = good_request(1)
    bad = with_value(request, name, value)
    # The file alone (an app's interpreter): builtin GATHER's bounds check refuses it.
    runner = Interpreter(model_path=tflite_file).get_signature_runner("serving_default")
    with pytest.raises(RuntimeError, match="gather index out of bounds"):
        runner(**bad)
    # Our runner names the input before invoking.
    with pytest.raises(ServingInputError, match=f"^{name}: {value} at \\[0, 1\\] is outside"):
        run_tflite(tflite_file, bad)
    # Valid values are unchanged by the guard.
    expected = pretrainer(request, training=False)["mlm_logits"]
    np.testing.assert_allclose(runner(**request)["mlm_logits"], expected, atol=1e-4)


def test_run_tflite_refuses_other_shapes_naming_the_input(tflite_file):
    from albert_tf.export import run_tflite
    from albert_tf.export.input_checks import ServingInputError

    request = good_request(2)
    with pytest.raises(ServingInputError, match=r"input_ids: shape \(2, 8\), but the file takes \(1, 8\)"):
        run_tflite(tflite_file, request)
    request = good_request(1)
    del request["segment_ids"]
    with pytest.raises(ServingInputError, match=r"missing \['segment_ids'\]"):
        run_tflite(tflite_file, request)
