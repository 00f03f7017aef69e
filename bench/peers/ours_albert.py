"""This project: albert_tf's AlbertBackbone + AlbertPretrainer (Keras 3, TF backend).

Same step as mg_albert.py: forward (MLM at the gathered masked positions + SOP),
backward, global-norm clip 1.0 and the project's own LAMB (or AdamW) inside one
tf.function (jit_compile=bool(--jit)). Imports albert_tf from ALBERT_TF_REPO
(default: the checkout this script is in). --precision bfloat16 builds the model
under Keras' `mixed_bfloat16` policy (LayerNorm, softmax and logits stay float32
in our layers).

  python bench/peers/ours_albert.py --mode train --jit 0 --precision bfloat16

Prints one line `RESULT {json}`.
"""

import os
import sys
import time

T0 = time.perf_counter()
os.environ["KERAS_BACKEND"] = os.environ.get("OURS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.environ.get("ALBERT_TF_REPO", REPO))
import common  # noqa: E402

args = common.parse_args("ours", default_opt="lamb")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(args.threads)
import keras  # noqa: E402

from albert_tf import AlbertBackbone, AlbertPretrainer  # noqa: E402
from albert_tf.config import AlbertConfig  # noqa: E402
from albert_tf.optimization import AdamWeightDecay, Lamb  # noqa: E402
from albert_tf.pretraining.objective import masked_lm_loss, sentence_order_loss  # noqa: E402

keras.utils.set_random_seed(args.seed)
c = common.model_config(args.model)
cfg = AlbertConfig.from_dict(
    dict(
        vocab_size=c["vocab"],
        embedding_size=c["embed"],
        hidden_size=c["hidden"],
        num_hidden_layers=c["layers"],
        num_hidden_groups=1 if args.model == "albert" else c["layers"],
        inner_group_num=1,
        num_attention_heads=c["heads"],
        intermediate_size=c["intermediate"],
        hidden_act="gelu",
        hidden_dropout_prob=args.dropout,
        attention_probs_dropout_prob=args.dropout,
        max_position_embeddings=c["max_pos"],
        type_vocab_size=c["type_vocab"],
        initializer_range=0.02,
    )
)
policy = "mixed_bfloat16" if args.precision == "bfloat16" else "float32"
t_build = time.perf_counter()
backbone = AlbertBackbone.from_albert_config(cfg, dtype=policy)
data = common.make_batch_np(np, args, c)
feats = {
    "input_ids": data["word_ids"],
    "input_mask": data["mask"],
    "segment_ids": data["type_ids"],
    "masked_lm_positions": data["positions"],
}
feats = {k: tf.constant(v) for k, v in feats.items()}
extra = dict(
    keras_version=keras.__version__,
    tf_version=tf.__version__,
    backend=keras.backend.backend(),
    dtype_policy=policy,
    layer_compute_dtypes=sorted({layer.compute_dtype for layer in backbone.layers}),
    encoder_params=int(backbone.count_params()),
)
losses = []
if args.mode == "train":
    model = AlbertPretrainer(backbone)
    opt = (Lamb if args.opt == "lamb" else AdamWeightDecay)(learning_rate=1e-4)
    ids, w = tf.constant(data["mlm_labels"]), tf.ones(data["mlm_labels"].shape, tf.float32)
    sop = tf.constant(data["sop_labels"][:, None])

    @tf.function(jit_compile=bool(args.jit))
    def train(x):
        with tf.GradientTape() as tape:
            out = model(x, training=True)
            loss = masked_lm_loss(out["mlm_logits"], ids, w) + sentence_order_loss(out["sop_logits"], sop)
        grads = tape.gradient(loss, model.trainable_variables)
        grads, _ = tf.clip_by_global_norm(grads, 1.0)
        opt.apply(grads, model.trainable_variables)
        return loss

    def step():
        losses.append(float(train(feats)))

    extra.update(optimizer=type(opt).__name__, total_params=int(model.count_params()))
else:
    enc = {k: feats[k] for k in ("input_ids", "input_mask", "segment_ids")}

    @tf.function(jit_compile=bool(args.jit))
    def forward(x):
        o = backbone(x, training=False)
        return o["sequence_output"], o["pooled_output"]

    def step():
        forward(enc)[1].numpy()


extra["build_s"] = round(time.perf_counter() - t_build, 2)
warm, timed, info = common.run_steps(step, args.warmup, args.steps, args.max_seconds)
if losses:
    extra.update(loss_first=round(losses[0], 4), loss_last=round(losses[-1], 4))
common.emit(args, "ours", extra, warm, timed, info, T0)
