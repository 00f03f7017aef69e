"""Real GLUE text for the real-work cases, and the ONE SentencePiece model every peer tokenizes with.

`spm_path()` trains a ~30k-piece unigram model on WikiText-2 + the GLUE training text once and caches it
under bench/out/realwork/ (gitignored); every peer loads that same file, so all compute the same ids.
`load(task, split)` reads SST-2 / CoLA / MRPC rows as (text_a, text_b or None, label).

Needs only the stdlib and `sentencepiece` (in every bench venv).

  python bench/peers/realwork_data.py          # trains (≈1–2 min) and prints length stats
"""

import csv
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATA = os.environ.get("ALBERT_TF_DATA", os.path.join(os.path.dirname(REPO), "shared", "data"))
if not os.path.isdir(DATA):
    DATA = "/work/shared/data"
OUT = os.path.join(REPO, "bench", "out", "realwork")
VOCAB = 30000
TASKS = ("SST-2", "CoLA", "MRPC")
# Special pieces at the ids ALBERT's spm.model has them: <pad> 0, <unk> 1, [CLS] 2, [SEP] 3, [MASK] 4.
PAD, CLS, SEP = 0, 2, 3


def load(task, split):
    """[(text_a, text_b or None, label int)] of GLUE `task`'s `split` ("train" or "dev")."""
    path = os.path.join(DATA, "glue", task, f"{split}.tsv")
    rows = []
    with open(path, encoding="utf-8-sig") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        if task == "SST-2":
            next(reader)
            rows = [(r[0], None, int(r[1])) for r in reader]
        elif task == "CoLA":
            rows = [(r[3], None, int(r[1])) for r in reader]
        elif task == "MRPC":
            next(reader)
            rows = [(r[3], r[4], int(r[0])) for r in reader]
        else:
            raise SystemExit(f"task {task!r}: not one of {TASKS}")
    return rows


def spm_path():
    """The shared SentencePiece model file, trained on first use."""
    model = os.path.join(OUT, "spm30k.model")
    if os.path.exists(model):
        return model
    import sentencepiece as spm

    os.makedirs(OUT, exist_ok=True)
    corpus = os.path.join(OUT, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as out:
        for name in ("wiki.train.tokens", "train.txt", "valid.txt", "test.txt"):
            path = os.path.join(DATA, "wikitext2", name)
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    out.writelines(line for line in f if line.strip() and not line.startswith(" ="))
        for task in TASKS:
            for a, b, _ in load(task, "train"):
                out.write(a + "\n" + (b + "\n" if b else ""))
    spm.SentencePieceTrainer.train(
        input=corpus,
        model_prefix=model[: -len(".model")],
        vocab_size=VOCAB,
        model_type="unigram",
        hard_vocab_limit=False,  # a small corpus may hold fewer pieces
        pad_id=PAD,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],  # as ALBERT's spm.model
        input_sentence_size=2_000_000,
        shuffle_input_sentence=True,
        num_threads=2,
        minloglevel=2,
    )
    return model


def vocab_size():
    """The shared spm's piece count: every peer's embedding table has this many rows (our export refuses
    a config whose vocab_size differs from its spm)."""
    return processor().get_piece_size()


def processor():
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_file=spm_path())


def encode(sp, rows, max_len=128):
    """[CLS] a [SEP] (b [SEP]) ids per row, truncated to `max_len` (longest-first), unpadded."""
    out = []
    for a, b, _ in rows:
        ia = sp.encode(a)
        ib = sp.encode(b) if b else []
        budget = max_len - (3 if b else 2)
        while len(ia) + len(ib) > budget:
            if len(ia) >= len(ib):
                ia.pop()
            else:
                ib.pop()
        ids = [CLS] + ia + [SEP] + ((ib + [SEP]) if b else [])
        out.append((ids, [0] * (len(ia) + 2) + [1] * (len(ib) + 1 if b else 0)))
    return out


def median_row(rows, encoded):
    """(index, row) of the median-length row (by pieces)."""
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][0]))
    i = order[len(order) // 2]
    return i, rows[i]


def main():
    sp = processor()
    print("spm:", spm_path(), "pieces:", sp.get_piece_size())
    for task in TASKS:
        for split in ("train", "dev"):
            rows = load(task, split)
            lens = [len(ids) for ids, _ in encode(sp, rows)]
            mean, median = statistics.mean(lens), statistics.median(lens)
            print(f"{task} {split}: {len(rows)} rows, mean {mean:.1f}, median {median}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


class Meter:
    """Wall and process CPU time of a timed phase; `record()` adds CPU use (cores busy) and the load."""

    def __init__(self):
        self.start()

    def start(self):
        self.wall0, self.cpu0 = _now()
        self.ticks0 = _cpu_ticks()

    def record(self, **fields):
        wall1, cpu1 = _now()
        wall = wall1 - self.wall0
        ticks1 = _cpu_ticks()
        return dict(
            fields,
            wall_s=round(wall, 3),
            # The hypervisor's share of the machine's CPU time while timed: a run with a high one is not a speed.
            cpu_steal=_steal_share(self.ticks0, ticks1),
            cpu_use=round((cpu1 - self.cpu0) / wall, 2) if wall > 0 else None,
            timed_cpu_util=round((cpu1 - self.cpu0) / wall, 2) if wall > 0 else None,
            loadavg=[round(x, 2) for x in os.getloadavg()],
        )


def token_fields(timed_batches, wall_s):
    """What the timed fine-tuning steps computed: [(rows, real tokens, computed tokens)] per batch -> fields.

    Examples/s compare cases only when their timed batches hold the same mix of lengths; these say whether
    they do (`timed_mean_pieces` against the set's mean) and give the rate per token.
    """
    rows = sum(b[0] for b in timed_batches)
    real = sum(b[1] for b in timed_batches)
    computed = sum(b[2] for b in timed_batches)
    return dict(
        timed_mean_pieces=round(real / rows, 2) if rows else None,
        tokens_computed_per_real=round(computed / real, 3) if real else None,
        real_tokens_per_s=round(real / wall_s, 1) if wall_s else None,
        computed_tokens_per_s=round(computed / wall_s, 1) if wall_s else None,
    )


def _cpu_ticks():
    """(steal, total) jiffies of all CPUs from /proc/stat; None where there is no /proc."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return fields[7] if len(fields) > 7 else 0, sum(fields[:8])


def _steal_share(before, after):
    if before is None or after is None or after[1] == before[1]:
        return None
    return round((after[0] - before[0]) / (after[1] - before[1]), 3)


def _now():
    import time

    t = os.times()
    return time.perf_counter(), t.user + t.system


def emit(record):
    """The RESULT line run_peers.py reads, with the CPU kind."""
    import json
    import platform

    sys.path.insert(0, HERE)
    from cpu_kind import cpu_kind

    record = dict(record, **cpu_kind(), python=platform.python_version())  # cpu_kind, cpu_model, cpu_flags
    print("RESULT " + json.dumps(record), flush=True)
