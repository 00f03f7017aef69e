"""One fine-tuning step at a fixed batch width, ours (TF) or HF's (torch): ms per step and GFLOP/s.

Takes the sampler out of the fine-tuning comparison: both sides train the same albert_base-shaped
classifier (random weights, fp32, AdamW, clip 1.0, batch 32) on random ids of exactly `--widths`
tokens, so a step's work is the same on both sides and the ratio of step times is the per-token gap.

  python bench/peers/ft_step_probe.py --fw tf [--inter 1]   # the TF venv
  python bench/peers/ft_step_probe.py --fw torch            # the torch venv

Prints one line `RESULT {json}`: per width, the median ms of `--reps` steps after `--warmup` and the
model's GEMM rate (forward + backward: 6 × params-in-GEMMs × tokens, per second).
"""

import argparse
import dataclasses
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import realwork_data as rd  # noqa: E402  (emit: the RESULT line with the CPU kind)

ap = argparse.ArgumentParser()
ap.add_argument("--fw", choices=["tf", "torch"], required=True)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--inter", type=int, default=0, help="tf: inter-op threads (0: TF's default)")
ap.add_argument("--batch", type=int, default=32)
ap.add_argument("--widths", default="16,32,64")
ap.add_argument("--warmup", type=int, default=3)
ap.add_argument("--reps", type=int, default=7)
args = ap.parse_args()

VOCAB, HIDDEN, FFN, LAYERS = 30000, 768, 3072, 12
# Multiply-adds per token in the encoder's GEMMs: q, k, v, o (4·H²) and the FFN (2·H·F), per layer.
MACS_PER_TOKEN = LAYERS * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * FFN)


def tf_step():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    if args.inter:
        tf.config.threading.set_inter_op_parallelism_threads(args.inter)
    sys.path.insert(0, os.environ.get("ALBERT_TF_REPO", os.path.dirname(os.path.dirname(HERE))))
    from albert_tf import AlbertBackbone, optimization
    from albert_tf.config import AlbertConfig
    from albert_tf.models.classifier import AlbertClassifier

    base = AlbertConfig.from_json_file(os.path.join(sys.path[0], "configs", "albert_base_v2.json"))
    cfg = dataclasses.replace(base, vocab_size=VOCAB)
    keras.utils.set_random_seed(0)
    model = AlbertClassifier(AlbertBackbone.from_albert_config(cfg), 2)
    model.compile(
        optimizer=optimization.create_optimizer("adamw", 2e-5, 1000, 100, clip_norm=1.0),
        loss={"logits": lambda y, z: keras.losses.sparse_categorical_crossentropy(y, z, from_logits=True)},
    )
    rng = np.random.default_rng(0)

    def make(width):
        ids = rng.integers(5, VOCAB, (args.batch, width)).astype(np.int32)
        x = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
        y = {"logits": rng.integers(0, 2, (args.batch,)).astype(np.int32)}
        return lambda: model.train_on_batch(x, y)

    return make, f"tensorflow {tf.__version__}, keras {keras.__version__}"


def torch_step():
    import torch
    import transformers
    from transformers import AlbertConfig, AlbertForSequenceClassification

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = AlbertConfig(
        vocab_size=VOCAB, embedding_size=128, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=12,
        intermediate_size=FFN, hidden_act="gelu_new", num_labels=2,
    )  # fmt: skip
    model = AlbertForSequenceClassification(cfg).train()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5)  # Trainer's optimizer

    def make(width):
        ids = torch.randint(5, VOCAB, (args.batch, width))
        batch = dict(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids))
        labels = torch.randint(0, 2, (args.batch,))

        def step():  # Trainer's step: forward, backward, clip 1.0, update
            loss = model(**batch, labels=labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()

        return step

    return make, f"torch {torch.__version__}, transformers {transformers.__version__}"


make, version = (tf_step if args.fw == "tf" else torch_step)()
per_width = {}
for width in (int(w) for w in args.widths.split(",")):
    step = make(width)
    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    seconds = statistics.median(times)
    per_width[width] = dict(
        ms=round(1000 * seconds, 1),
        gemm_gflops=round(6 * MACS_PER_TOKEN * args.batch * width / seconds / 1e9, 1),
    )
rd.emit(
    dict(
        fw=args.fw,
        version=version,
        threads=args.threads,
        inter_op=args.inter or "default",
        batch=args.batch,
        steps=per_width,
        loadavg=[round(x, 2) for x in os.getloadavg()],
    )
)
