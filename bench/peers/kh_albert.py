"""Peer 2: keras-hub AlbertBackbone / BertBackbone under Keras 3, TensorFlow backend.

Training goes through the ordinary Keras 3 path: a functional model
(backbone + keras_hub.layers.MaskedLMHead tied to the token embedding and fed
the masked positions, + a Dense(2) sentence-order head on the pooled output),
model.compile(..., jit_compile=bool(--jit)) and model.train_on_batch.
(On a CPU-only machine Keras' default jit_compile="auto" resolves to False.)
Inference is the backbone called inside tf.function(jit_compile=bool(--jit)).
--precision bfloat16 sets Keras' global dtype policy to `mixed_bfloat16` before
anything is built (keras-hub's own mixed-precision path: its layers pick the
global policy up).

  python bench/peers/kh_albert.py --mode train --batch 8 --seq 128 --jit 1 [--precision bfloat16]

Prints one line `RESULT {json}`.
"""

import os
import sys
import time

T0 = time.perf_counter()
os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ.pop("TF_USE_LEGACY_KERAS", None)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

args = common.parse_args("kh", default_opt="lamb")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(args.threads)
import keras  # noqa: E402
import keras_hub  # noqa: E402

keras.utils.set_random_seed(args.seed)
policy = "mixed_bfloat16" if args.precision == "bfloat16" else "float32"
keras.config.set_dtype_policy(policy)
cfg = common.model_config(args.model)
init = keras.initializers.TruncatedNormal(stddev=0.02)


def gelu_tanh(x):
    return keras.activations.gelu(x, approximate=True)


t_build = time.perf_counter()
if args.model == "albert":
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=cfg["vocab"],
        num_layers=cfg["layers"],
        num_heads=cfg["heads"],
        embedding_dim=cfg["embed"],
        hidden_dim=cfg["hidden"],
        intermediate_dim=cfg["intermediate"],
        num_groups=1,
        num_inner_repetitions=1,
        dropout=args.dropout,
        max_sequence_length=cfg["max_pos"],
        num_segments=cfg["type_vocab"],
    )
else:
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=cfg["vocab"],
        num_layers=cfg["layers"],
        num_heads=cfg["heads"],
        hidden_dim=cfg["hidden"],
        intermediate_dim=cfg["intermediate"],
        dropout=args.dropout,
        max_sequence_length=cfg["max_pos"],
        num_segments=cfg["type_vocab"],
    )

data = common.make_batch_np(np, args, cfg)
x_enc = {"token_ids": data["word_ids"], "segment_ids": data["type_ids"], "padding_mask": data["mask"]}
extra = dict(
    keras_version=keras.__version__,
    keras_hub_version=keras_hub.__version__,
    tf_version=tf.__version__,
    backend=keras.backend.backend(),
    onednn=os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default(on)"),
    dtype_policy=policy,
    compute_dtype=backbone.dtype_policy.compute_dtype,
    encoder_params=int(backbone.count_params()),
)

losses = []
if args.mode == "train":
    enc_in = {
        k: keras.Input(shape=(None,), dtype="int32", name=k) for k in ("token_ids", "segment_ids", "padding_mask")
    }
    pos_in = keras.Input(shape=(None,), dtype="int32", name="mask_positions")
    out = backbone(enc_in)
    mlm_logits = keras_hub.layers.MaskedLMHead(
        vocabulary_size=cfg["vocab"],
        token_embedding=backbone.token_embedding,
        intermediate_activation=gelu_tanh,
        kernel_initializer=init,
        name="mlm",
    )(out["sequence_output"], mask_positions=pos_in)
    sop_logits = keras.layers.Dense(2, kernel_initializer=init, name="sop")(out["pooled_output"])
    model = keras.Model({**enc_in, "mask_positions": pos_in}, {"mlm": mlm_logits, "sop": sop_logits})
    if args.opt == "lamb":
        opt = keras.optimizers.Lamb(learning_rate=1e-4, weight_decay=0.01)
        opt_name = "keras.optimizers.Lamb"
    else:
        opt = keras.optimizers.AdamW(learning_rate=1e-4, weight_decay=0.01)
        opt_name = "keras.optimizers.AdamW"
    opt.exclude_from_weight_decay(var_names=["layer_norm", "bias"])
    model.compile(
        optimizer=opt,
        loss={
            "mlm": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            "sop": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        },
        jit_compile=bool(args.jit),
    )
    x = {**x_enc, "mask_positions": data["positions"]}
    y = {"mlm": data["mlm_labels"], "sop": data["sop_labels"]}
    # Hand tensors over once so no host->tensor conversion is timed per step.
    x = {k: tf.constant(v) for k, v in x.items()}
    y = {k: tf.constant(v) for k, v in y.items()}

    def step():
        logs = model.train_on_batch(x, y, return_dict=True)
        losses.append(float(logs["loss"]))

    extra.update(optimizer=opt_name, total_params=int(model.count_params()))
else:
    x = {k: tf.constant(v) for k, v in x_enc.items()}

    @tf.function(jit_compile=bool(args.jit))
    def forward(inp):
        o = backbone(inp, training=False)
        return o["sequence_output"], o["pooled_output"]

    def step():
        seq_out, pooled = forward(x)
        pooled.numpy()


extra["build_s"] = round(time.perf_counter() - t_build, 2)
warm, timed, info = common.run_steps(step, args.warmup, args.steps, args.max_seconds)
if losses:
    extra.update(loss_first=round(losses[0], 4), loss_last=round(losses[-1], 4))
common.emit(args, "kh", extra, warm, timed, info, T0)
