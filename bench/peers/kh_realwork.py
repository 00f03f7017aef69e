"""keras-hub `AlbertTextClassifier` on real GLUE text, tokenized in its preprocessor with the shared spm file.

  finetune  `classifier.fit` on raw text (its preprocessor tokenizes and pads to `--sequence_length`:
            keras-hub's default 512, or 128), batch 32, examples/s over the steps after `--warmup`.
  classify  SST-2 dev, batch 32, `classifier.predict` on raw text (tokenization included).
albert_base shapes, random weights (seed 0), 2 threads.
"""

import argparse
import os
import sys
import time

T0 = time.perf_counter()
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import realwork_data as rd  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--work", choices=["finetune", "classify"], required=True)
p.add_argument("--task", default="SST-2")
p.add_argument("--sequence_length", type=int, default=512, help="keras-hub's preprocessor default is 512")
p.add_argument("--batch", type=int, default=32)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--limit", type=int, default=0, help="classify: the first N dev texts only (0: all 872)")
p.add_argument("--tag", default="")
p.add_argument("--precision", default="float32")
args, _ = p.parse_known_args()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(args.threads)
import keras  # noqa: E402
import keras_hub  # noqa: E402


def build():
    keras.utils.set_random_seed(0)
    tokenizer = keras_hub.models.AlbertTokenizer(proto=rd.spm_path())
    pre = keras_hub.models.AlbertTextClassifierPreprocessor(tokenizer, sequence_length=args.sequence_length)
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=rd.vocab_size(),
        num_layers=12,
        num_heads=12,
        num_groups=1,
        hidden_dim=768,
        embedding_dim=128,
        intermediate_dim=3072,
        dropout=0.1,
        max_sequence_length=512,
    )
    return keras_hub.models.AlbertTextClassifier(backbone, num_classes=2, preprocessor=pre)


def features(rows):
    a = np.array([r[0] for r in rows])
    if rows[0][1] is None:
        return a
    return (a, np.array([r[1] for r in rows]))


def finetune():
    rows = rd.load(args.task, "train")
    labels = np.array([r[2] for r in rows], np.int32)
    need = args.warmup + args.steps
    ds = tf.data.Dataset.from_tensor_slices((features(rows), labels)).shuffle(len(rows), seed=0)
    ds = ds.batch(args.batch, drop_remainder=True).repeat()
    clf = build()
    clf.compile(optimizer=keras.optimizers.AdamW(2e-5, global_clipnorm=1.0))  # its default loss
    meter = rd.Meter()

    class Clock(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch + 1 == args.warmup:
                meter.start()

    clf.fit(ds, steps_per_epoch=need, epochs=1, verbose=0, callbacks=[Clock()])
    rec = meter.record()
    return dict(rec, examples_per_s=round(args.steps * args.batch / rec["wall_s"], 3))


def classify():
    rows = rd.load("SST-2", "dev")[: args.limit or None]
    x = features(rows)
    clf = build()
    for _ in range(max(1, args.warmup)):
        clf.predict(x, batch_size=args.batch, verbose=0)
    meter = rd.Meter()
    for _ in range(args.steps):
        logits = clf.predict(x, batch_size=args.batch, verbose=0)
    rec = meter.record()
    return dict(
        rec, texts_per_s=round(args.steps * len(rows) / rec["wall_s"], 3), logits_checksum=float(np.abs(logits).sum())
    )


def main():
    rec = {"finetune": finetune, "classify": classify}[args.work]()
    rd.emit(
        dict(
            rec,
            peer="keras-hub",
            tag=args.tag,
            work=args.work,
            task=args.task,
            sequence_length=args.sequence_length,
            batch=args.batch,
            steps=args.steps,
            threads=args.threads,
            keras_hub=keras_hub.__version__,
            process_s=round(time.perf_counter() - T0, 1),
        )
    )


if __name__ == "__main__":
    main()
