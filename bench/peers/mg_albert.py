"""Peer 1: TensorFlow Model Garden (tf-models-official) AlbertEncoder / BertEncoder.

tf-keras (Keras 2) models, our own train step in tf.function, optionally
jit_compile=True (XLA). Pretraining head: Model Garden's BertPretrainer
(MaskedLM layer with the word-embedding table tied, applied only at the
gathered masked positions, plus its Classification network on the pooled
output used as the 2-class sentence-order head).

--precision bfloat16: the encoder is built under tf_keras' `mixed_bfloat16`
policy. Model Garden's MaskedLM fails to build under it (its bias is autocast
while the tied embedding table is not), so the pretraining heads stay float32
(as bench/train_step.py does); the RESULT line says so in `heads_dtype`.

  python bench/peers/mg_albert.py --mode train --batch 8 --seq 128 --jit 1
  python bench/peers/mg_albert.py --mode infer --batch 32 --seq 128 --jit 0 --precision bfloat16

Prints one line `RESULT {json}`.
"""

import os
import sys
import time

T0 = time.perf_counter()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

args = common.parse_args("mg", default_opt="lamb")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(args.threads)
import official  # noqa: E402,F401
import tf_keras  # noqa: E402
from official.modeling import activations  # noqa: E402
from official.modeling.optimization import lamb as mg_lamb  # noqa: E402
from official.nlp.modeling import models, networks  # noqa: E402

try:
    from importlib.metadata import version as _v

    MG_VERSION = _v("tf-models-official")
except ImportError:  # pragma: no cover
    MG_VERSION = "?"

tf.random.set_seed(args.seed)
cfg = common.model_config(args.model)
init = tf_keras.initializers.TruncatedNormal(stddev=0.02)

t_build = time.perf_counter()
policy = "mixed_bfloat16" if args.precision == "bfloat16" else "float32"
tf_keras.mixed_precision.set_global_policy(policy)
if args.model == "albert":
    encoder = networks.AlbertEncoder(
        vocab_size=cfg["vocab"],
        embedding_width=cfg["embed"],
        hidden_size=cfg["hidden"],
        num_layers=cfg["layers"],
        num_attention_heads=cfg["heads"],
        max_sequence_length=cfg["max_pos"],
        type_vocab_size=cfg["type_vocab"],
        intermediate_size=cfg["intermediate"],
        activation=activations.gelu,
        dropout_rate=args.dropout,
        attention_dropout_rate=args.dropout,
        initializer=init,
    )
else:
    encoder = networks.BertEncoder(
        vocab_size=cfg["vocab"],
        hidden_size=cfg["hidden"],
        num_layers=cfg["layers"],
        num_attention_heads=cfg["heads"],
        max_sequence_length=cfg["max_pos"],
        type_vocab_size=cfg["type_vocab"],
        inner_dim=cfg["intermediate"],
        inner_activation=activations.gelu,
        output_dropout=args.dropout,
        attention_dropout=args.dropout,
        initializer=init,
        dict_outputs=False,
    )

data = common.make_batch_np(np, args, cfg)
enc_inputs = [tf.constant(data["word_ids"]), tf.constant(data["mask"]), tf.constant(data["type_ids"])]
tf_keras.mixed_precision.set_global_policy("float32")  # the heads: see the docstring
extra = dict(
    dtype_policy=policy,
    compute_dtype=encoder.compute_dtype,
    mg_version=MG_VERSION,
    tf_version=tf.__version__,
    tf_keras_version=tf_keras.__version__,
    onednn=os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default(on)"),
    encoder_params=int(encoder.count_params()),
)

if args.mode == "train":
    pretrainer = models.BertPretrainer(
        network=encoder,
        num_classes=2,
        num_token_predictions=args.masked,
        activation=activations.gelu,
        initializer=init,
        output="logits",
    )
    inputs = enc_inputs + [tf.constant(data["positions"])]
    mlm_labels = tf.constant(data["mlm_labels"])
    sop_labels = tf.constant(data["sop_labels"])
    variables = pretrainer.trainable_variables
    excl = ["LayerNorm", "layer_norm", "bias"]
    if args.opt == "lamb":
        # Model Garden's own LAMB (official.modeling.optimization.lamb.LAMB).
        opt = mg_lamb.LAMB(
            learning_rate=1e-4,
            weight_decay_rate=0.01,
            exclude_from_weight_decay=excl,
            exclude_from_layer_adaptation=excl,
        )
        opt._create_all_weights(variables)
        opt_name = "official.modeling.optimization.lamb.LAMB"
    else:
        opt = tf_keras.optimizers.AdamW(learning_rate=1e-4, weight_decay=0.01, jit_compile=False)
        opt.exclude_from_weight_decay(var_names=excl)
        opt.build(variables)
        opt_name = "tf_keras.optimizers.AdamW"

    @tf.function(jit_compile=bool(args.jit))
    def train_step(x, y_mlm, y_sop):
        with tf.GradientTape() as tape:
            out = pretrainer(x, training=True)
            mlm = tf_keras.losses.sparse_categorical_crossentropy(y_mlm, out["masked_lm"], from_logits=True)
            sop = tf_keras.losses.sparse_categorical_crossentropy(y_sop, out["classification"], from_logits=True)
            loss = tf.reduce_mean(tf.cast(mlm, tf.float32)) + tf.reduce_mean(tf.cast(sop, tf.float32))
        grads = tape.gradient(loss, variables)
        opt.apply_gradients(zip(grads, variables))
        return loss

    losses = []

    def step():
        losses.append(float(train_step(inputs, mlm_labels, sop_labels).numpy()))

    extra.update(heads_dtype=pretrainer.compute_dtype, optimizer=opt_name, total_params=int(pretrainer.count_params()))
else:

    @tf.function(jit_compile=bool(args.jit))
    def forward(x):
        seq_out, pooled = encoder(x, training=False)
        return seq_out, pooled

    losses = []

    def step():
        seq_out, pooled = forward(enc_inputs)
        pooled.numpy()


extra["build_s"] = round(time.perf_counter() - t_build, 2)
warm, timed, info = common.run_steps(step, args.warmup, args.steps, args.max_seconds)
if losses:
    extra.update(loss_first=round(losses[0], 4), loss_last=round(losses[-1], 4))
common.emit(args, "mg", extra, warm, timed, info, T0)
