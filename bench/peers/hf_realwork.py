"""HF transformers (and engines fed the HF model) on real GLUE text, the same spm ids as ours.

  finetune  `Trainer` with its defaults (random batches, each padded to its longest by the default
            collator; `--group_by_length 1`: `train_sampling_strategy="group_by_length"`, v4's
            `group_by_length=True`), batch 32,
            dropout 0.1 as ALBERT's config; examples/s over the steps after `--warmup` (a callback).
  classify  SST-2 dev, batch 32, tokenization included, each batch padded to its longest:
            `--engine eager` / `compile` (torch.compile) / `ort` (ONNX Runtime fp32) / `ort-int8`
            (dynamic int8 quantization) / `ov-onnx` (OpenVINO on the same ONNX graph).
  request   the median-length SST-2 dev sentence, batch 1, real length (same engines).
The ONNX graph is `torch.onnx.export` of `AlbertForSequenceClassification` with dynamic batch and
length, cached under bench/out/realwork/. albert_base shapes, random weights (seed 0), 2 threads.
"""

import argparse
import os
import sys
import time

T0 = time.perf_counter()
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import realwork_data as rd  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--work", choices=["finetune", "classify", "request"], required=True)
p.add_argument("--engine", choices=["eager", "compile", "ort", "ort-int8", "ov-onnx"], default="eager")
p.add_argument("--task", default="SST-2")
p.add_argument("--group_by_length", type=int, choices=[0, 1], default=0)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--threads", type=int, default=2)
p.add_argument(
    "--spin",
    type=int,
    choices=[0, 1],
    default=1,
    help="ONNX Runtime / OpenVINO worker spinning (both spin by default: idle waiting counts as CPU use; 0 tells"
    " useful CPU from spinning); for torch set OMP_WAIT_POLICY=PASSIVE in the environment",
)
p.add_argument("--limit", type=int, default=0, help="classify: the first N dev texts only (0: all 872)")
p.add_argument("--tag", default="")
p.add_argument("--precision", default="float32")
args, _ = p.parse_known_args()

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(args.threads)
import transformers  # noqa: E402
from transformers import AlbertConfig, AlbertForSequenceClassification  # noqa: E402

MAX_LEN = 128


def build_model(num_labels=2):
    torch.manual_seed(0)
    cfg = AlbertConfig(
        vocab_size=rd.vocab_size(),
        embedding_size=128,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        hidden_act="gelu_new",
        max_position_embeddings=512,
        num_labels=num_labels,
    )
    return AlbertForSequenceClassification(cfg)


def padded(encoded, length):
    ids = np.zeros((len(encoded), length), np.int64)
    seg = np.zeros_like(ids)
    for r, (a, s) in enumerate(encoded):
        ids[r, : len(a)] = a
        seg[r, : len(s)] = s
    return {"input_ids": ids, "attention_mask": (ids != 0).astype(np.int64), "token_type_ids": seg}


def finetune():
    from transformers import Trainer, TrainerCallback, TrainingArguments

    sp = rd.processor()
    rows = rd.load(args.task, "train")
    encoded = rd.encode(sp, rows, MAX_LEN)
    data = [
        {"input_ids": a, "token_type_ids": s, "attention_mask": [1] * len(a), "labels": r[2]}
        for (a, s), r in zip(encoded, rows)
    ]
    meter = rd.Meter()

    class Clock(TrainerCallback):
        def on_step_end(self, targs, state, control, **kw):
            if state.global_step == args.warmup:
                meter.start()

    out = os.path.join(rd.OUT, "hf_trainer")
    targs = TrainingArguments(
        output_dir=out,
        per_device_train_batch_size=args.batch,
        max_steps=args.warmup + args.steps,
        # transformers 5 spells TrainingArguments(group_by_length=True) this way.
        train_sampling_strategy="group_by_length" if args.group_by_length else "random",
        save_strategy="no",
        report_to=[],
        logging_strategy="no",
        use_cpu=True,
        dataloader_num_workers=0,
        seed=0,
    )

    batches = []  # (rows, real tokens, computed tokens) of each batch, in step order (no loader workers)

    class Pad:  # the default collator pads with a tokenizer; ours has pad id 0
        def __call__(self, feats):
            n = max(len(f["input_ids"]) for f in feats)
            batches.append((len(feats), sum(len(f["input_ids"]) for f in feats), n * len(feats)))
            b = padded([(f["input_ids"], f["token_type_ids"]) for f in feats], n)
            b = {k: torch.from_numpy(v) for k, v in b.items()}
            b["labels"] = torch.tensor([f["labels"] for f in feats])
            return b

    trainer = Trainer(model=build_model(), args=targs, train_dataset=data, data_collator=Pad(), callbacks=[Clock()])
    trainer.train()
    rec = meter.record()
    # group_by_length sorts each megabatch longest first: a window inside one is not the epoch's mix.
    timed = batches[args.warmup : args.warmup + args.steps]
    rate = round(args.steps * args.batch / rec["wall_s"], 3)
    return dict(rec, examples_per_s=rate, **rd.token_fields(timed, rec["wall_s"]))


def onnx_path(int8=False):
    path = os.path.join(rd.OUT, "hf_albert.onnx")
    if not os.path.exists(path):
        model = build_model().eval()
        x = {k: torch.from_numpy(v) for k, v in padded([([2, 5, 6, 3], [0, 0, 0, 0])] * 2, 4).items()}
        dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
        dyn["token_type_ids"] = dyn["input_ids"]
        torch.onnx.export(
            model,
            (),
            path,
            kwargs=x,
            input_names=list(x),
            output_names=["logits"],
            dynamic_axes=dyn,
            dynamo=False,
            opset_version=17,
        )
    if not int8:
        return path
    q = os.path.join(rd.OUT, "hf_albert.int8.onnx")
    if not os.path.exists(q):
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(path, q, weight_type=QuantType.QInt8)
    return q


def engine():
    """features (numpy dict) -> logits numpy."""
    if args.engine in ("eager", "compile"):
        model = build_model().eval()
        fwd = torch.compile(model, dynamic=True) if args.engine == "compile" else model

        def infer(f):
            with torch.inference_mode():
                return fwd(**{k: torch.from_numpy(v) for k, v in f.items()}).logits.numpy()

        return infer
    if args.engine.startswith("ort"):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        so.add_session_config_entry("session.intra_op.allow_spinning", str(args.spin))
        sess = ort.InferenceSession(onnx_path(args.engine == "ort-int8"), so, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        return lambda f: sess.run(["logits"], {n: f[n] for n in names})[0]
    import openvino as ov

    core = ov.Core()
    core.set_property("CPU", {"INFERENCE_NUM_THREADS": args.threads})
    compiled = core.compile_model(core.read_model(onnx_path()), "CPU")
    names = [i.get_any_name() for i in compiled.inputs]
    return lambda f: compiled({n: f[n] for n in names})[compiled.output(0)]


def classify():
    sp = rd.processor()
    rows = rd.load("SST-2", "dev")[: args.limit or None]
    infer = engine()
    chunks = [rows[s : s + args.batch] for s in range(0, len(rows), args.batch)]

    def one_pass():
        out = []
        for c in chunks:
            enc = rd.encode(sp, c, MAX_LEN)
            out.append(infer(padded(enc, max(len(e[0]) for e in enc))))
        return np.concatenate(out)

    for _ in range(max(1, args.warmup)):
        one_pass()
    meter = rd.Meter()
    for _ in range(args.steps):
        logits = one_pass()
    rec = meter.record()
    return dict(
        rec, texts_per_s=round(args.steps * len(rows) / rec["wall_s"], 3), logits_checksum=float(np.abs(logits).sum())
    )


def request():
    sp = rd.processor()
    rows = rd.load("SST-2", "dev")
    _, row = rd.median_row(rows, rd.encode(sp, rows, MAX_LEN))
    enc = rd.encode(sp, [row], MAX_LEN)
    f = padded(enc, len(enc[0][0]))
    infer = engine()
    for _ in range(max(1, args.warmup)):
        infer(f)
    times = []
    meter = rd.Meter()
    for _ in range(args.steps):
        t = time.perf_counter()
        infer(f)
        times.append(time.perf_counter() - t)
    rec = meter.record()
    times.sort()
    return dict(rec, median_ms=round(1000 * times[len(times) // 2], 3), pieces=len(enc[0][0]))


def main():
    rec = {"finetune": finetune, "classify": classify, "request": request}[args.work]()
    rd.emit(
        dict(
            rec,
            peer="hf",
            tag=args.tag,
            work=args.work,
            engine=args.engine,
            task=args.task,
            group_by_length=args.group_by_length,
            batch=args.batch,
            steps=args.steps,
            threads=args.threads,
            spin=args.spin,
            omp_wait_policy=os.environ.get("OMP_WAIT_POLICY", ""),
            torch=torch.__version__,
            transformers=transformers.__version__,
            process_s=round(time.perf_counter() - T0, 1),
        )
    )


if __name__ == "__main__":
    main()
