"""PL-BERT's training step, ours beside the reference's model, in real phonemes per second.

The rows are real: WikiText-2 lines (valid + test) phonemized by `data_prep.create_pretraining_data --objective plbert`
(espeak-ng), one window a row (`padded`, as the reference reads its rows) and packed (`packed`, several
windows a row); each case is fed the same batches in the same order. Real phonemes are the non-padding
positions of a batch.

- `ours_padded` / `ours_packed`: the step `run_pretraining --backend jax` runs on PL-BERT data
  (`JaxTrainStep` with the PL-BERT objective: phoneme MLM + the word head's chunked cross-entropy).
- `reference`: the reference's model in torch (HF `AlbertModel` + `Linear(hidden, 178)` +
  `Linear(hidden, words)`, as yl4579/PL-BERT's `MultiTaskModel`), both cross-entropies over full logits
  as its train.ipynb computes them, AdamW, bf16 autocast; `torch.compile` on a GPU (eager on a CPU).

Each case runs in a fresh process, cases interleaved over rounds (`--smoke`: all in this process, a tiny
model on CPU; the suite runs it). Prints JSON: per case step time, real phonemes/s, and the ratios.

    python bench/plbert_step.py [--batch 192] [--seq 512] [--rounds 2] [--steps 10] [--lines 3000]
        [--torch_python /path/to/python] [--batches DIR]

`--batches DIR` keeps the masked batches in DIR: made there when it has none (this needs TensorFlow and
espeak-ng), read from there when it has them. Make them on a machine with TensorFlow (`--rounds 0`: only
that), carry DIR to a GPU machine without it, and run the same command there.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

from _common import REPO

# The reference's Configs/config.yml model_params (dropout off: timing only).
REFERENCE = dict(hidden=768, layers=12, heads=12, intermediate=2048, embed=128, max_pos=512, words=30000)
SMOKE = dict(hidden=32, layers=2, heads=4, intermediate=64, embed=16, max_pos=64, words=200)
CASES = ("ours_padded", "ours_packed", "reference")


def make_rows(args, work: str) -> dict:
    """{padded, packed}: numpy rows of PL-BERT data made from the first `--lines` lines of WikiText-2.

    Each line (a paragraph) is a document, as each article is the reference's: its windows are rows, the
    last one short and padded (`padded`) unless packing fills it with others (`packed`).
    """
    data = os.environ.get("ALBERT_TF_DATA", os.path.join(REPO, "..", "shared", "data"))
    text = os.path.join(work, "corpus.txt")
    lines = []
    for split in ("valid.txt", "test.txt"):
        with open(os.path.join(data, "wikitext2", split), encoding="utf-8") as source:
            lines += [line for line in source.read().splitlines() if line.strip() and not line.startswith(" =")]
    with open(text, "w", encoding="utf-8") as corpus:
        corpus.write("\n\n".join(lines[: args.lines]) + "\n")  # blank-line separated: one document a paragraph
    rows = {}
    for layout, per_row in (("padded", 1), ("packed", 8)):
        out = os.path.join(work, layout)
        command = [sys.executable, "-m", "data_prep.create_pretraining_data", "--objective=plbert"]
        command += [f"--input_file={text}", f"--output_dir={out}", f"--max_seq_length={args.seq}"]
        command += [f"--word_vocab_size={args.cfg['words']}", f"--max_instances_per_row={per_row}"]
        subprocess.run(command, check=True, cwd=REPO, capture_output=True)
        rows[layout] = read_rows(out)
    return rows


def read_rows(directory: str) -> dict:
    import numpy as np
    import tensorflow as tf

    from albert_tf.inputs.shard_reader import data_feature_description, resolve_input

    data = resolve_input(directory)
    spec = data_feature_description(data.data)
    records = tf.data.TFRecordDataset(data.files).batch(1 << 20).get_single_element()
    parsed = tf.io.parse_example(records, spec)
    return {name: np.asarray(value, dtype="int32") for name, value in parsed.items()}


def masked_batches(rows: dict, batch: int, count: int):
    """`count` batches of `batch` rows (cycled), masked as the loop masks them (`plbert_masking`)."""
    import numpy as np
    import tensorflow as tf

    from albert_tf.pretraining.plbert_masking import mask_dataset

    total = len(rows["input_ids"])
    order = np.arange(batch * count) % total
    chosen = {k: v[order] for k, v in rows.items()}
    dataset = mask_dataset(tf.data.Dataset.from_tensor_slices(chosen), seed=0).batch(batch)
    return [
        ({k: np.asarray(v) for k, v in features.items()}, {k: np.asarray(v) for k, v in labels.items()})
        for features, labels in dataset
    ]


def run_ours(args, batches) -> dict:
    os.environ["KERAS_BACKEND"] = "jax"
    import jax
    import keras

    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.plbert import PlbertPretrainer, plbert_config
    from albert_tf.optimization import create_optimizer
    from albert_tf.pretraining import plbert_objective
    from albert_tf.pretraining.jax_step import JaxTrainStep

    keras.utils.set_random_seed(0)
    cfg = args.cfg
    config = plbert_config(
        hidden_size=cfg["hidden"],
        num_hidden_layers=cfg["layers"],
        num_attention_heads=cfg["heads"],
        intermediate_size=cfg["intermediate"],
        embedding_size=cfg["embed"],
        max_position_embeddings=cfg["max_pos"],
        dropout=0.0,
    )
    policy = "float32" if args.smoke else "mixed_bfloat16"
    backbone = AlbertBackbone.from_albert_config(config, dtype=policy)
    model = PlbertPretrainer(backbone, cfg["words"], packed_rows=args.case == "ours_packed")
    optimizer = create_optimizer("adamw", 1e-4, num_train_steps=1000, num_warmup_steps=0)
    optimizer.build(model.trainable_variables)
    # The objective's loss functions, as the loop's PL-BERT objective calls them (this module needs no TensorFlow).
    step = JaxTrainStep(model, optimizer, objective=plbert_objective)
    return timed(args, batches, lambda inputs, labels: step(inputs, labels)["loss"], str(jax.devices()[0]))


def run_reference(args, batches) -> dict:
    import torch
    import torch.nn.functional as F
    from transformers import AlbertConfig, AlbertModel

    cfg = args.cfg
    device = "cuda" if torch.cuda.is_available() and not args.smoke else "cpu"
    config = AlbertConfig(
        vocab_size=178,
        hidden_size=cfg["hidden"],
        num_attention_heads=cfg["heads"],
        intermediate_size=cfg["intermediate"],
        max_position_embeddings=cfg["max_pos"],
        num_hidden_layers=cfg["layers"],
        embedding_size=cfg["embed"],
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    encoder = AlbertModel(config).to(device).train()
    phoneme_head = torch.nn.Linear(cfg["hidden"], 178).to(device)
    word_head = torch.nn.Linear(cfg["hidden"], cfg["words"]).to(device)
    parameters = [*encoder.parameters(), *phoneme_head.parameters(), *word_head.parameters()]
    optimizer = torch.optim.AdamW(parameters, lr=1e-4, fused=device == "cuda")

    def compute_loss(ids, mask, phoneme_labels, phoneme_weights, word_labels):
        with torch.autocast(device, dtype=torch.bfloat16, enabled=not args.smoke):
            hidden = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
            phonemes = phoneme_head(hidden).float()
            words = word_head(hidden).float()
        # Weighted means, not boolean indexing: static shapes, so torch.compile traces once.
        phoneme_nll = F.cross_entropy(phonemes.transpose(1, 2), phoneme_labels, reduction="none")
        word_nll = F.cross_entropy(words.transpose(1, 2), word_labels, reduction="none")
        real = mask.float()
        phoneme_loss = (phoneme_nll * phoneme_weights).sum() / phoneme_weights.sum().clamp(min=1.0)
        return phoneme_loss + (word_nll * real).sum() / real.sum()

    # torch.compile on the GPU, as the reference's users would; on a CPU eager (inductor's C++ build takes minutes).
    loss_fn = torch.compile(compute_loss) if device == "cuda" else compute_loss

    def one_step(inputs, labels):
        tensors = [
            torch.from_numpy(inputs["input_ids"]).long().to(device),
            torch.from_numpy((inputs["input_mask"] > 0).astype("int64")).to(device),
            torch.from_numpy(labels["phoneme_labels"]).long().to(device),
            torch.from_numpy(labels["phoneme_weights"]).to(device),
            torch.from_numpy(labels["word_labels"]).long().to(device),
        ]
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(*tensors)
        loss.backward()
        optimizer.step()
        return loss

    return timed(args, batches, one_step, device)


def timed(args, batches, one_step, device) -> dict:
    times, real = [], []
    for index in range(args.warmup + args.steps):
        inputs, labels = batches[index % len(batches)]
        start = time.perf_counter()
        loss = float(one_step(inputs, labels))  # reading the loss waits for the step
        if index >= args.warmup:
            times.append(time.perf_counter() - start)
            real.append(int((inputs["input_mask"] > 0).sum()))
    step_s = statistics.median(times)
    return {"device": device, "loss": loss, "step_s": step_s, "real_phonemes_per_step": statistics.mean(real)}


def run_case(args, case: str, work: str) -> dict:
    if args.smoke:
        worker = argparse.Namespace(**{**vars(args), "case": case})
        try:
            return run_worker(worker, work)
        except Exception:  # noqa: BLE001  (recorded as the case's failure, as a worker's would be)
            return {"error": traceback.format_exc()[-1500:]}
    python = args.torch_python if case == "reference" else sys.executable
    command = [python, os.path.abspath(__file__), "--case", case, "--work", work]
    command += [f"--{name}={getattr(args, name)}" for name in ("batch", "seq", "warmup", "steps", "lines")]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(lines[-1][7:]) if lines else {"error": (done.stdout + done.stderr)[-1500:]}


def run_worker(args, work: str) -> dict:
    """One case on the batches the parent masked (workers import no TensorFlow: a GPU machine may lack it)."""
    import numpy as np

    layout = "packed" if args.case == "ours_packed" else "padded"
    stored = np.load(os.path.join(work, f"{layout}.npz"))
    count = len({name.split("/")[0] for name in stored.files})
    batches = [
        tuple(
            {name.split("/")[2]: stored[name] for name in stored.files if name.startswith(f"{i}/{part}/")}
            for part in ("x", "y")
        )
        for i in range(count)
    ]
    return run_reference(args, batches) if args.case == "reference" else run_ours(args, batches)


def shape_of(args) -> dict:
    return {"batch": args.batch, "seq": args.seq, "lines": args.lines, "words": args.cfg["words"]}


def kept_batches(args, work: str) -> None:
    """`padded.npz` and `packed.npz` in `work`: made unless `work` holds them for this shape already."""
    import numpy as np

    shape = shape_of(args)
    record = os.path.join(work, "batches.json")
    if os.path.isfile(record):
        with open(record, encoding="utf-8") as f:
            kept = json.load(f)
        if kept != shape:
            sys.exit(f"--batches {work}: holds batches of {kept}, this run asks for {shape}; give another directory")
        return
    os.makedirs(work, exist_ok=True)
    with tempfile.TemporaryDirectory() as data_dir:  # the corpus and its shards: not kept
        made = make_rows(args, data_dir)
    for layout, rows in made.items():
        batches = masked_batches(rows, args.batch, max(1, min(8, args.warmup + args.steps)))
        arrays = {
            f"{i}/{part}/{name}": value
            for i, pair in enumerate(batches)
            for part, tree in zip(("x", "y"), pair)
            for name, value in tree.items()
        }
        np.savez_compressed(os.path.join(work, f"{layout}.npz"), **arrays)
    with open(record, "w", encoding="utf-8") as f:
        json.dump(shape, f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--batch", type=int, default=192, help="the reference's batch_size")
    parser.add_argument("--seq", type=int, default=512, help="the reference's max_mel_length")
    parser.add_argument("--lines", type=int, default=3000, help="WikiText-2 lines phonemized into rows")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--torch_python", default=sys.executable)
    parser.add_argument("--smoke", action="store_true", help="a tiny model on CPU, one process: checks the script")
    parser.add_argument("--batches", help="directory of the masked batches: made when absent, read when present")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.cfg = dict(SMOKE if args.smoke else REFERENCE)
    if args.smoke:
        os.environ["KERAS_BACKEND"] = "jax"  # every case in this process: before any case imports Keras
        args.batch, args.seq, args.lines, args.warmup, args.steps, args.rounds = 4, 64, 40, 1, 2, 1
    if args.case:  # worker
        print("RESULT " + json.dumps(run_worker(args, args.work)), flush=True)
        return
    with tempfile.TemporaryDirectory() as scratch:
        work = args.batches or scratch
        kept_batches(args, work)
        if args.rounds == 0:  # `--batches DIR --rounds 0`: make the batches only (on a machine with TensorFlow)
            print(json.dumps({"batches": work, "shape": shape_of(args)}))
            return
        cases = args.cases.split(",")
        runs = {case: [] for case in cases}
        for round_index in range(args.rounds):
            for case in cases[round_index % len(cases) :] + cases[: round_index % len(cases)]:
                result = run_case(args, case, work)
                print(f"[round {round_index}] {case}: {json.dumps(result)}", file=sys.stderr, flush=True)
                runs[case].append(result)
    summary = {}
    for case, results in runs.items():
        ok = [r for r in results if "step_s" in r]
        if not ok:
            summary[case] = {"failed": results[0].get("error")}
            continue
        step_s = statistics.median(r["step_s"] for r in ok)
        real = statistics.mean(r["real_phonemes_per_step"] for r in ok)
        summary[case] = {
            "step_s": round(step_s, 4),
            "real_phonemes_per_step": round(real),
            "real_phonemes_per_s": round(real / step_s),
            "device": ok[0]["device"],
        }
    ratios = {
        f"{ours}/reference": round(
            summary[ours]["real_phonemes_per_s"] / summary["reference"]["real_phonemes_per_s"], 3
        )
        for ours in ("ours_padded", "ours_packed")
        if "real_phonemes_per_s" in summary.get(ours, {}) and "real_phonemes_per_s" in summary.get("reference", {})
    }
    shape = {"batch": args.batch, "seq": args.seq, "precision": "float32" if args.smoke else "bf16"}
    print(json.dumps({"shape": shape, "model": args.cfg, "summary": summary, "ratios": ratios}, indent=2))
    if any("failed" in case for case in summary.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
