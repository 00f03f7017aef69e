"""Peer 3: HuggingFace transformers AlbertForPreTraining / BertForPreTraining on torch CPU.

The models are built from config (random init). The training step uses the
model's own submodules but gathers the masked positions before the MLM head
(as real pretraining does):  encoder -> gather(masked positions) ->
predictions head (decoder tied to the word embeddings) ; pooled -> SOP/NSP
head ; CE + CE ; backward ; torch.optim.AdamW step (torch has no LAMB).
--stock-head instead calls the model's own forward with labels, which
projects all seq positions onto the vocabulary (shows what gathering saves).
--jit 1 wraps the loss function (train) or the encoder (infer) in
torch.compile (inductor); the optimizer step stays eager.
--precision bfloat16 runs the forward (and so the backward) under
torch.autocast("cpu", dtype=torch.bfloat16): float32 weights and optimizer,
bf16 matmuls, LayerNorm/softmax/cross-entropy in float32 (autocast's lists).

  python bench/peers/hf_albert.py --mode train --batch 8 --seq 128 --jit 0 --precision bfloat16

Prints one line `RESULT {json}`.
"""

import os
import sys
import time

T0 = time.perf_counter()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def _extra_args(p):
    p.add_argument(
        "--stock-head",
        action="store_true",
        help="train: use the model's forward(labels=...) (vocab projection at all positions)",
    )
    p.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"], help="transformers attn_implementation")


args = common.parse_args("hf", default_opt="adamw", add_args=_extra_args)
if args.opt != "adamw":
    sys.exit("hf peer: torch has no built-in LAMB; use --opt adamw")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import transformers  # noqa: E402
from transformers import AlbertConfig, AlbertForPreTraining, BertConfig, BertForPreTraining  # noqa: E402

torch.set_num_threads(args.threads)
torch.manual_seed(args.seed)
cfg = common.model_config(args.model)

t_build = time.perf_counter()
if args.model == "albert":
    conf = AlbertConfig(
        vocab_size=cfg["vocab"],
        embedding_size=cfg["embed"],
        hidden_size=cfg["hidden"],
        num_hidden_layers=cfg["layers"],
        num_hidden_groups=1,
        inner_group_num=1,
        num_attention_heads=cfg["heads"],
        intermediate_size=cfg["intermediate"],
        hidden_act="gelu_new",
        hidden_dropout_prob=args.dropout,
        attention_probs_dropout_prob=args.dropout,
        classifier_dropout_prob=args.dropout,
        max_position_embeddings=cfg["max_pos"],
        type_vocab_size=cfg["type_vocab"],
    )
    model = AlbertForPreTraining._from_config(conf, attn_implementation=args.attn)
    base, mlm_head, sop_head = model.albert, model.predictions, model.sop_classifier
else:
    conf = BertConfig(
        vocab_size=cfg["vocab"],
        hidden_size=cfg["hidden"],
        num_hidden_layers=cfg["layers"],
        num_attention_heads=cfg["heads"],
        intermediate_size=cfg["intermediate"],
        hidden_act="gelu_new",
        hidden_dropout_prob=args.dropout,
        attention_probs_dropout_prob=args.dropout,
        max_position_embeddings=cfg["max_pos"],
        type_vocab_size=cfg["type_vocab"],
    )
    model = BertForPreTraining._from_config(conf, attn_implementation=args.attn)
    base, mlm_head, sop_head = (model.bert, model.cls.predictions, model.cls.seq_relationship)

data = common.make_batch_np(np, args, cfg)
t = {k: torch.from_numpy(v).long() for k, v in data.items()}
V = cfg["vocab"]
n_unique = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bfloat16")
extra = dict(
    autocast_dtype="bfloat16" if args.precision == "bfloat16" else None,
    torch_version=torch.__version__,
    transformers_version=transformers.__version__,
    attn_impl=getattr(model.config, "_attn_implementation", args.attn),
    encoder_params=int(sum(p.numel() for p in base.parameters())),
    total_params=int(n_unique),
    mkldnn=bool(torch.backends.mkldnn.is_available()),
    interop_threads=torch.get_num_interop_threads(),
    stock_head=bool(args.stock_head),
)

losses = []
if args.mode == "train":
    model.train()

    def compute_loss(input_ids, attention_mask, token_type_ids, positions, mlm_labels, sop_labels):
        out = base(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        seq_out, pooled = out.last_hidden_state, out.pooler_output
        idx = positions.unsqueeze(-1).expand(-1, -1, seq_out.size(-1))
        gathered = torch.gather(seq_out, 1, idx)  # [B, P, H]
        mlm_logits = mlm_head(gathered)  # [B, P, V]
        sop_logits = sop_head(pooled)  # [B, 2]
        return F.cross_entropy(mlm_logits.reshape(-1, V), mlm_labels.reshape(-1)) + F.cross_entropy(
            sop_logits, sop_labels
        )

    if args.stock_head:
        full = torch.full_like(t["word_ids"], -100)
        full.scatter_(1, t["positions"], t["mlm_labels"])
        label_kw = "sentence_order_label" if args.model == "albert" else "next_sentence_label"

        def compute_loss(
            input_ids,
            attention_mask,
            token_type_ids,
            positions,  # noqa: F811
            mlm_labels,
            sop_labels,
        ):
            return model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
                labels=full,
                **{label_kw: sop_labels},
            ).loss

    loss_fn = torch.compile(compute_loss) if args.jit else compute_loss
    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")
    named = list({id(p): (n, p) for n, p in model.named_parameters()}.values())
    groups = [
        {"params": [p for n, p in named if not n.endswith(no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in named if n.endswith(no_decay)], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=1e-4)
    extra["optimizer"] = "torch.optim.AdamW (default impl)"

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast:
            loss = loss_fn(t["word_ids"], t["mask"], t["type_ids"], t["positions"], t["mlm_labels"], t["sop_labels"])
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
else:
    model.eval()

    def encode(input_ids, attention_mask, token_type_ids):
        out = base(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return out.last_hidden_state, out.pooler_output

    fwd = torch.compile(encode) if args.jit else encode

    def step():
        with torch.inference_mode(), autocast:
            seq_out, pooled = fwd(t["word_ids"], t["mask"], t["type_ids"])
            float(pooled[0, 0])


extra["build_s"] = round(time.perf_counter() - t_build, 2)
warm, timed, info = common.run_steps(step, args.warmup, args.steps, args.max_seconds)
if losses:
    extra.update(loss_first=round(losses[0], 4), loss_last=round(losses[-1], 4))
common.emit(args, "hf", extra, warm, timed, info, T0)
