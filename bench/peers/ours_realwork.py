"""albert_tf on real GLUE text: fine-tuning throughput, batch classification, one request.

A thin adapter over our public entry points, easy to re-point when the library moves:
  finetune  the keras `compile` + `fit` path `run_classifier` trains with (AlbertClassifier, our
            optimizer, clip 1.0), batches from `albert_tf.finetuning.datasets.train_dataset`:
            `--length_grouping 1` as run_classifier (sorted pools, each batch cut to its longest row;
            `--buckets` cuts to those widths instead), 0: fixed 128.
  classify  SST-2 dev, batch 32, tokenization included: `--engine keras` (our model, per-batch padding,
            one tf.function), `predict` (the library: `albert_tf.inference.Predictor`), `savedmodel` (the
            exported SavedModel's `serve_text`), `openvino` (OpenVINO
            reading that SavedModel's `serving_default`; spm tokenization in Python), `tflite` (the library's
            `TFLitePredictor` on our exported file, `--quantize none|dynamic_int8`: one text at a time at its
            own length, as a phone runs it).
  request   the median-length SST-2 dev sentence, batch 1, real length: `savedmodel` (ids signature),
            `openvino` or `tflite` (`--quantize`).
albert_base shapes, random weights (seed 0), 2 threads. Prints `RESULT {json}` with cpu_use and the load.

  python bench/peers/ours_realwork.py --work finetune --task SST-2 --length_grouping 1 --steps 5
"""

import argparse
import json
import os
import sys
import time

T0 = time.perf_counter()
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.environ.get("ALBERT_TF_REPO", REPO))
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import realwork_data as rd  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--work", choices=["finetune", "classify", "request"], required=True)
p.add_argument("--engine", choices=["keras", "predict", "savedmodel", "openvino", "tflite"], default="keras")
p.add_argument(
    "--quantize", choices=["none", "dynamic_int8"], default="none", help="--engine tflite: the exported file's variant"
)
p.add_argument("--task", default="SST-2")
p.add_argument("--length_grouping", type=int, choices=[0, 1], default=1)


def widths(text):
    """--buckets' value: rising positive widths, comma-separated."""
    try:
        values = [int(w) for w in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not comma-separated integers") from None
    if any(v < 1 for v in values) or values != sorted(set(values)):
        raise argparse.ArgumentTypeError(f"{text!r}: widths must be positive and rising")
    return values


p.add_argument(
    "--buckets",
    type=widths,
    default=None,
    help="finetune: the widths batches are cut to, comma-separated (default: the library's, as run_classifier)",
)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--steps", type=int, default=10, help="timed steps (finetune) / timed passes over dev (classify)")
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--threads", type=int, default=2, help="intra-op threads")
p.add_argument("--inter", type=int, default=2, help="inter-op threads (TF's default on 2 cores is 2)")
p.add_argument("--config", default=os.path.join(REPO, "configs", "albert_base_v2.json"))
p.add_argument("--limit", type=int, default=0, help="classify: the first N dev texts only (0: all 872)")
p.add_argument("--tag", default="")
p.add_argument("--precision", default="float32")
args, _ = p.parse_known_args()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(args.threads)
tf.config.threading.set_inter_op_parallelism_threads(args.inter)
import keras  # noqa: E402

from albert_tf import optimization  # noqa: E402
from albert_tf.finetuning import datasets  # noqa: E402
from albert_tf.inputs import length_batching  # noqa: E402
from albert_tf.models.backbone import AlbertBackbone  # noqa: E402
from albert_tf.models.classifier import AlbertClassifier  # noqa: E402

MAX_LEN = 128


def build_model(num_classes=2):
    keras.utils.set_random_seed(0)
    config = json.load(open(args.config))
    config["vocab_size"] = rd.vocab_size()
    path = os.path.join(rd.OUT, "albert_base_spm.json")
    with open(path, "w") as f:
        json.dump(config, f)
    backbone = AlbertBackbone.from_albert_config(path)
    return AlbertClassifier(backbone, num_classes)


def padded(encoded, idx, length):
    ids = np.zeros((len(idx), length), np.int32)
    seg = np.zeros_like(ids)
    for r, i in enumerate(idx):
        a, s = encoded[i]
        ids[r, : len(a)] = a
        seg[r, : len(s)] = s
    return {"input_ids": ids, "input_mask": (ids != 0).astype(np.int32), "segment_ids": seg}


def finetune():
    sp = rd.processor()
    rows = rd.load(args.task, "train")
    encoded = rd.encode(sp, rows, MAX_LEN)
    labels = np.array([r[2] for r in rows], np.int32)
    need = args.warmup + args.steps
    features = padded(encoded, range(len(encoded)), MAX_LEN)
    if args.buckets:
        dataset = length_batching.train_dataset(
            features, labels, args.batch, seed=0, length_grouping=args.length_grouping, buckets=args.buckets
        )
    else:  # the library's own batching, as run_classifier trains (no XLA: each batch cut to its longest row)
        dataset = datasets.train_dataset(features, labels, args.batch, seed=0, length_grouping=args.length_grouping)
    # Every iterator of the dataset yields the same batches (the library's stateless epoch order): these are fit's.
    masks = [f["input_mask"].numpy() for f, _ in dataset.take(need)]
    timed = masks[args.warmup :]
    timed_batches = [(m.shape[0], int(m.sum()), m.size) for m in timed]
    # Keras traces the train step once, for a [batch, None] input: a new width costs no tracing (the
    # steps that first met a width are slow because they are wide), so every timed step counts.
    widths = [m.shape[1] for m in masks]
    model = build_model()
    optimizer = optimization.create_optimizer("adamw", 2e-5, 1000, 100, clip_norm=1.0)
    model.compile(
        optimizer=optimizer,
        loss={"logits": lambda y, z: keras.losses.sparse_categorical_crossentropy(y, z, from_logits=True)},
        jit_compile=False,  # as run_classifier's default (Keras' "auto" picks XLA where a GPU is)
    )
    meter = rd.Meter()
    marks = {}

    ends = []

    class Clock(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            ends.append(time.perf_counter())
            if batch + 1 == args.warmup:
                meter.start()
                marks["t0"] = time.perf_counter()

    model.fit(dataset, steps_per_epoch=need, epochs=1, verbose=0, callbacks=[Clock()])
    fit_end_s = time.perf_counter() - ends[-1]
    rec = meter.record()
    durations = {i: ends[i] - ends[i - 1] for i in range(max(args.warmup, 1), need)}
    steps_s = ends[-1] - marks["t0"]
    return dict(
        rec,
        examples_per_s=round(args.steps * args.batch / rec["wall_s"], 3),
        # The timed steps alone, without fit's return (see fit_end_s).
        steps_examples_per_s=round(args.steps * args.batch / steps_s, 3),
        # Some runs' wall exceeds their steps' sum by ~45 s at one core busy: these say where it went.
        fit_end_s=round(fit_end_s, 2),
        longest_step_s=round(max(durations.values()), 2) if durations else None,
        batch_widths=sorted(set(widths)),
        **rd.token_fields(timed_batches, rec["wall_s"]),
        length_grouping=args.length_grouping,
        buckets=args.buckets or "library (cut_lengths)",
    )


def export_savedmodel():
    """Our SavedModel of the random-weight SST-2 classifier (cached), exported by the library."""
    from albert_tf.export.saved_model import export_saved_model
    from albert_tf.tokenization import SentencePieceTokenizer

    base = os.path.join(rd.OUT, "savedmodel")
    path = os.path.join(base, "1")
    if not os.path.exists(os.path.join(path, "saved_model.pb")):
        tokenizer = SentencePieceTokenizer(rd.spm_path(), do_lower_case=False)
        export_saved_model(build_model(), base, version=1, tokenizer=tokenizer, warmup=False)
    return path


def export_tflite_file():
    """Our TFLite file of the random-weight SST-2 classifier (cached per `--quantize`), exported by the library."""
    from albert_tf.export.tflite import TFLITE_NAMES, export_tflite
    from albert_tf.tokenization import SentencePieceTokenizer

    base = os.path.join(rd.OUT, "tflite_" + args.quantize)
    path = os.path.join(base, TFLITE_NAMES[args.quantize])
    if not os.path.exists(path):
        tokenizer = SentencePieceTokenizer(rd.spm_path(), do_lower_case=False)
        path = export_tflite(build_model(), base, quantize=args.quantize, max_seq_length=MAX_LEN, tokenizer=tokenizer)
    return path


def classify():
    sp = rd.processor()
    rows = rd.load("SST-2", "dev")[: args.limit or None]
    texts = [r[0] for r in rows]
    chunks = [range(s, min(s + args.batch, len(texts))) for s in range(0, len(texts), args.batch)]
    if args.engine == "keras":
        model = build_model()
        fn = tf.function(lambda x: model(x, training=False)["logits"], reduce_retracing=True)

        def one_pass():
            out = []
            for c in chunks:
                enc = rd.encode(sp, [rows[i] for i in c], MAX_LEN)
                n = max(len(e[0]) for e in enc)
                out.append(fn(padded(enc, range(len(enc)), n)).numpy())
            return np.concatenate(out)

    elif args.engine == "predict":  # the library's path: albert_tf.inference.Predictor (length-grouped batches)
        from albert_tf.inference import Predictor
        from albert_tf.tokenization import SentencePieceTokenizer

        predictor = Predictor(build_model(), SentencePieceTokenizer(rd.spm_path()), max_seq_length=MAX_LEN)

        def one_pass():
            return predictor.predict(texts, batch_size=args.batch)["logits"]

    elif args.engine == "savedmodel":
        serve = tf.saved_model.load(export_savedmodel()).signatures["serve_text"]
        key = list(serve.structured_input_signature[1])[0]

        def one_pass():
            out = []
            for c in chunks:
                res = serve(**{key: tf.constant([texts[i] for i in c])})
                out.append(res["logits"].numpy())
            return np.concatenate(out)

    elif args.engine == "tflite":
        from albert_tf.inference import TFLitePredictor

        predictor = TFLitePredictor.load(export_tflite_file(), max_seq_length=MAX_LEN)

        def one_pass():
            return predictor.predict(texts)["logits"]

    else:
        infer = openvino_ids()

        def one_pass():
            out = []
            for c in chunks:
                enc = rd.encode(sp, [rows[i] for i in c], MAX_LEN)
                n = max(len(e[0]) for e in enc)
                out.append(infer(padded(enc, range(len(enc)), n)))
            return np.concatenate(out)

    for _ in range(max(1, args.warmup)):
        one_pass()
    meter = rd.Meter()
    for _ in range(args.steps):
        logits = one_pass()
    rec = meter.record()
    return dict(
        rec,
        texts_per_s=round(args.steps * len(texts) / rec["wall_s"], 3),
        logits_checksum=float(np.abs(logits).sum()),
    )


def openvino_ids():
    import openvino as ov

    core = ov.Core()
    core.set_property("CPU", {"INFERENCE_NUM_THREADS": args.threads})
    model = ov.convert_model(export_savedmodel())
    compiled = core.compile_model(model, "CPU")
    names = [i.get_any_name() for i in compiled.inputs]

    def infer(features):
        res = compiled({n: features[next(k for k in features if k in n)] for n in names})
        return next(v for k, v in res.items() if "logits" in k.get_any_name())

    return infer


def request():
    sp = rd.processor()
    rows = rd.load("SST-2", "dev")
    i, row = rd.median_row(rows, rd.encode(sp, rows, MAX_LEN))
    enc = rd.encode(sp, [row], MAX_LEN)
    features = padded(enc, [0], len(enc[0][0]))
    if args.engine == "openvino":
        infer = openvino_ids()
    elif args.engine == "tflite":  # the file at the sentence's own length, as a phone runs it
        from albert_tf.tflite_file import TFLiteRunner

        infer = TFLiteRunner(export_tflite_file())
    else:
        serve = tf.saved_model.load(export_savedmodel()).signatures["serving_default"]

        def infer(f):
            return serve(**{k: tf.constant(v) for k, v in f.items()})

    for _ in range(max(1, args.warmup)):
        infer(features)
    times = []
    meter = rd.Meter()
    for _ in range(args.steps):
        t = time.perf_counter()
        infer(features)
        times.append(time.perf_counter() - t)
    rec = meter.record()
    times.sort()
    return dict(rec, median_ms=round(1000 * times[len(times) // 2], 3), pieces=len(enc[0][0]))


def main():
    rec = {"finetune": finetune, "classify": classify, "request": request}[args.work]()
    rd.emit(
        dict(
            rec,
            peer="ours",
            tag=args.tag,
            work=args.work,
            engine=args.engine,
            quantize=args.quantize if args.engine == "tflite" else None,
            task=args.task,
            batch=args.batch,
            steps=args.steps,
            threads=args.threads,
            inter_op=args.inter,
            tf=tf.__version__,
            process_s=round(time.perf_counter() - T0, 1),
        )
    )


if __name__ == "__main__":
    main()
