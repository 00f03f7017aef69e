# ruff: noqa: E402  (the thread settings and sys.path come before TensorFlow and the library load)
"""Where `Predictor.predict`'s time goes on SST-2 dev (320 texts, b32, albert_base shapes, random weights).

Times, in one process, the whole call, its tokenization alone, and the model calls alone on the same
length-sorted batches cut to their longest row; prints wall seconds and cores busy (median of 3).
Needs `bench/out/realwork/albert_base_spm.json` (written by any `ours_realwork.py` run).

  INTER=1 python bench/peers/predict_probe.py   # TF inter-op threads (default 2)
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["KERAS_BACKEND"] = "tensorflow"
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(2)
tf.config.threading.set_inter_op_parallelism_threads(int(os.environ.get("INTER", "2")))
import keras
import realwork_data as rd

from albert_tf.inference import Predictor, pad_batch
from albert_tf.inputs import length_batching
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.tokenization import SentencePieceTokenizer

keras.utils.set_random_seed(0)
model = AlbertClassifier(AlbertBackbone.from_albert_config(os.path.join(rd.OUT, "albert_base_spm.json")), 2)
tok = SentencePieceTokenizer(rd.spm_path())
texts = [r[0] for r in rd.load("SST-2", "dev")][:320]
pred = Predictor(model, tok, max_seq_length=128)


def cpu():
    t = os.times()
    return t.user + t.system


def timed(fn):
    w, c = time.perf_counter(), cpu()
    out = fn()
    w = time.perf_counter() - w
    return w, (cpu() - c) / w, out


pred.predict(texts, batch_size=32)  # warm
rows = [r for _, _, rs in pred._batches(texts, None, 32 * 50, False, "line") for r in rs]
features = pad_batch(rows)
buckets = length_batching.cut_lengths(features["input_ids"].shape[1], compiled=False)
batches = [b for _, b in length_batching.eval_batches(features, 32, buckets=buckets)]
fn = length_batching._inference_function(model, features, length_batching.SEQUENCE_FEATURES)
tensors = [{k: tf.constant(v) for k, v in b.items()} for b in batches]
res = {"total": [], "tokenize": [], "calls": [], "calls_numpy": []}
for _ in range(3):
    res["total"].append(timed(lambda: pred.predict(texts, batch_size=32))[:2])
    res["tokenize"].append(
        timed(lambda: [r for _, _, rs in pred._batches(texts, None, 1600, False, "line") for r in rs])[:2]
    )
    res["calls"].append(timed(lambda: [fn(t)["logits"].numpy() for t in tensors])[:2])
    res["calls_numpy"].append(timed(lambda: [fn(b)["logits"].numpy() for b in batches])[:2])
tokens = sum(b["input_ids"].size for b in batches)
for k, v in res.items():
    v.sort()
    print(k, "wall %.2f s, cores %.2f" % v[1])
print("widths", [b["input_ids"].shape[1] for b in batches], "tokens", tokens, "inter", os.environ.get("INTER", "2"))
