"""TF Serving's warm-up requests (`assets.extra/tf_serving_warmup_requests`): one per signature."""

import os
from typing import Dict, List

import numpy as np
import tensorflow as tf

from albert_tf.export import early_exit
from albert_tf.export.common import random_inputs

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")


def text_request(signature: str) -> Dict[str, np.ndarray]:
    texts = {"text_a": np.array([b"ALBERT is a lite BERT."])}
    if signature == "serve_text_pair":
        texts["text_b"] = np.array([b"It shares parameters across layers."])
    return texts


def write_warmup_requests(saved_model_dir: str, model, signatures: List[str], max_seq_length: int):
    """One PredictionLog per signature (batch 1, full length), as TF Serving's warm-up expects."""
    # tensorflow-serving-api only where warm-up requests are written.
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    os.makedirs(os.path.join(saved_model_dir, "assets.extra"), exist_ok=True)
    with tf.io.TFRecordWriter(os.path.join(saved_model_dir, WARMUP_FILE)) as writer:
        for signature in signatures:
            if signature == "serving_default":
                inputs = random_inputs(model, 1, max_seq_length)
            elif signature in early_exit.SIGNATURES:
                inputs = early_exit.warmup_request(model, signature, max_seq_length)
            else:
                inputs = text_request(signature)
            request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(signature_name=signature))
            for name, value in inputs.items():
                request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
            log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())
