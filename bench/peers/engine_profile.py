"""Item 5: why OpenVINO runs the HF ONNX graph faster than TF serves our SavedModel, and our SavedModel slower.

One process (the bench venv: TF, torch, ONNX Runtime, OpenVINO), b32 at SST-2 dev-like length 32 and b1 at 26:
  tf-savedmodel    our SavedModel's `serving_default` (input checks included)
  tf-nochecks      the same Keras model in one tf.function (no checks, no signature routing)
  ov-savedmodel    OpenVINO reading our SavedModel
  ov-onnx          OpenVINO reading the HF ONNX graph (hf_realwork.py exports it)
and the op-type counts of the two OpenVINO graphs (graph shape: what each frontend produced).
Needs `ours_realwork.py --work classify --engine savedmodel` and `hf_realwork.py --work request --engine ort`
to have exported once. Prints `RESULT {json}` per variant.
"""

import collections
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.argv += ["--work", "request"]
import numpy as np  # noqa: E402
import openvino as ov  # noqa: E402
import ours_realwork as ours  # noqa: E402  (parses its own flags: --threads)
import realwork_data as rd  # noqa: E402
import tensorflow as tf  # noqa: E402


def timed(fn, feats, reps):
    fn(feats)
    fn(feats)
    t = []
    meter = rd.Meter()
    for _ in range(reps):
        s = time.perf_counter()
        fn(feats)
        t.append(time.perf_counter() - s)
    return dict(meter.record(), median_ms=round(1000 * sorted(t)[len(t) // 2], 2))


def main():
    sm = ours.export_savedmodel()
    serve = tf.saved_model.load(sm).signatures["serving_default"]
    model = ours.build_model()
    raw = tf.function(lambda f: model(f, training=False)["logits"], reduce_retracing=True)
    core = ov.Core()
    core.set_property("CPU", {"INFERENCE_NUM_THREADS": ours.args.threads})
    ov_sm = ov.convert_model(sm)
    onnx = os.path.join(rd.OUT, "hf_albert.onnx")
    graphs = {"ov-savedmodel": ov_sm}
    if os.path.exists(onnx):
        graphs["ov-onnx"] = core.read_model(onnx)
    for name, g in graphs.items():
        counts = collections.Counter(op.get_type_name() for op in g.get_ordered_ops())
        rd.emit({"variant": name, "ops": sum(counts.values()), "op_types": dict(counts.most_common(15))})
    compiled = {k: core.compile_model(g, "CPU") for k, g in graphs.items()}

    def ov_fn(c):
        names = [i.get_any_name() for i in c.inputs]

        def run(f):
            keys = {n: next(k for k in f if k in n or n in k) for n in names}
            return c({n: f[keys[n]] for n in names})

        return run

    for batch, length in ((32, 32), (1, 26)):
        rng = np.random.default_rng(0)
        ids = rng.integers(5, 20000, (batch, length)).astype(np.int32)
        ids[:, 0], ids[:, -1] = 2, 3
        f = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
        hf = {"input_ids": ids.astype(np.int64), "attention_mask": np.ones_like(ids, np.int64)}
        hf["token_type_ids"] = np.zeros_like(ids, np.int64)
        variants = {
            "tf-savedmodel": lambda x: serve(**{k: tf.constant(v) for k, v in x.items()}),
            "tf-nochecks": lambda x: raw(x).numpy(),
            "ov-savedmodel": ov_fn(compiled["ov-savedmodel"]),
        }
        if "ov-onnx" in compiled:
            variants["ov-onnx"] = ov_fn(compiled["ov-onnx"])
        for name, fn in variants.items():
            rec = timed(fn, hf if name == "ov-onnx" else f, 20 if batch == 1 else 5)
            rd.emit(dict(rec, variant=name, batch=batch, length=length))


if __name__ == "__main__":
    main()
