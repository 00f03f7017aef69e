"""Shared, stdlib-only helpers for the peer ALBERT benchmarks.

Every peer script (mg_albert.py, kh_albert.py, hf_albert.py) imports this
module, so it must not depend on TensorFlow or torch: the scripts run in
different virtual environments.
"""

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time

from cpu_kind import cpu_kind

PRECISIONS = ("float32", "bfloat16")
# ALBERT-base as in the ALBERT paper (Lan et al. 2019, table 1) and the
# released albert_base config: factorised embedding 128, one shared layer.
ALBERT_BASE = dict(
    vocab=30000,
    embed=128,
    hidden=768,
    layers=12,
    heads=12,
    intermediate=3072,
    max_pos=512,
    type_vocab=2,
)
# BERT-base (Devlin et al. 2018) for the ALBERT-vs-BERT reference point.
BERT_BASE = dict(
    vocab=30522,
    embed=768,
    hidden=768,
    layers=12,
    heads=12,
    intermediate=3072,
    max_pos=512,
    type_vocab=2,
)


def model_config(name):
    return dict(ALBERT_BASE if name == "albert" else BERT_BASE)


def parse_args(peer, default_opt, argv=None, add_args=None):
    p = argparse.ArgumentParser(description=f"{peer} ALBERT/BERT benchmark")
    if add_args is not None:
        add_args(p)
    p.add_argument("--mode", choices=["train", "infer"], default="train")
    p.add_argument("--model", choices=["albert", "bert"], default="albert")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=5, help="timed steps (train) or forward passes (infer)")
    p.add_argument(
        "--warmup", type=int, default=2, help="untimed steps first; the first one includes tracing/compilation"
    )
    p.add_argument(
        "--jit",
        type=int,
        choices=[0, 1],
        default=0,
        help="TF: tf.function(jit_compile=True) / XLA; torch: torch.compile",
    )
    p.add_argument(
        "--masked", type=int, default=20, help="masked positions per sequence (MLM head is applied only there)"
    )
    p.add_argument("--opt", choices=["lamb", "adamw"], default=default_opt)
    p.add_argument(
        "--dropout", type=float, default=0.0, help="hidden and attention dropout (ALBERT v2 configs use 0.0)"
    )
    p.add_argument("--threads", type=int, default=2, help="intra-op threads (TF) / torch.set_num_threads")
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="float32",
        help="bfloat16: Keras/tf_keras mixed_bfloat16 policy (float32 variables, LayerNorm, "
        "softmax and logits as each implementation keeps them), torch.autocast(bfloat16) for HF",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--max-seconds",
        type=float,
        default=240.0,
        help="stop timing early (keeping >=1 timed step) once this budget is spent",
    )
    p.add_argument("--tag", default="", help="free text copied to the JSON line")
    return p.parse_args(argv)


def _steal_jiffies():
    """Cumulative 'steal' time of this VM (all CPUs), in clock ticks."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8])
    except (OSError, IndexError, ValueError):
        return 0


def _cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_steps(step_fn, warmup, steps, max_seconds):
    """Run warmup then timed steps; step_fn must block until results are ready.

    Returns (warmup step times, timed step times, info) with times in seconds;
    the timed loop stops early once max_seconds have passed since the start
    (>=1 timed step). info holds contention indicators for the timed phase:
    cpu_util = process CPU seconds / wall seconds (2.0 = both cores busy),
    steal_s = hypervisor steal time (all CPUs) during the timed phase."""
    t_start = time.perf_counter()
    warm = []
    for _ in range(max(warmup, 1)):
        t = time.perf_counter()
        step_fn()
        warm.append(time.perf_counter() - t)
    timed = []
    st0, c0, w0 = _steal_jiffies(), _cpu_seconds(), time.perf_counter()
    for _ in range(steps):
        t = time.perf_counter()
        step_fn()
        timed.append(time.perf_counter() - t)
        if time.perf_counter() - t_start > max_seconds:
            break
    wall = time.perf_counter() - w0
    hz = os.sysconf("SC_CLK_TCK")
    info = dict(
        timed_cpu_util=round((_cpu_seconds() - c0) / wall, 2),
        timed_steal_s=round((_steal_jiffies() - st0) / hz, 2),
        timed_wall_s=round(wall, 1),
    )
    return warm, timed, info


def summarize(times):
    s = sorted(times)
    n = len(s)
    q = lambda f: s[min(n - 1, max(0, int(round(f * (n - 1)))))]
    return dict(
        n=n,
        median_ms=1000 * statistics.median(s),
        mean_ms=1000 * statistics.fmean(s),
        min_ms=1000 * s[0],
        max_ms=1000 * s[-1],
        p25_ms=1000 * q(0.25),
        p75_ms=1000 * q(0.75),
    )


def peak_rss_mb():
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def emit(args, peer, extra, warm, timed, info, t_process0):
    st = summarize(timed)
    rec = dict(
        peer=peer,
        model=args.model,
        mode=args.mode,
        batch=args.batch,
        seq=args.seq,
        jit=args.jit,
        opt=args.opt if args.mode == "train" else None,
        masked=args.masked if args.mode == "train" else None,
        dropout=args.dropout,
        threads=args.threads,
        precision=args.precision,
        **{f"step_{k}": round(v, 2) if isinstance(v, float) else v for k, v in st.items()},
        seq_per_s=round(args.batch / (st["median_ms"] / 1000.0), 4),
        first_step_s=round(warm[0], 2),
        warmup_ms=[round(1000 * w, 1) for w in warm],
        steps_ms=[round(1000 * t, 1) for t in timed],
        peak_rss_mb=round(peak_rss_mb(), 1),
        process_s=round(time.perf_counter() - t_process0, 1),
        loadavg_end=os.getloadavg()[0],
        python=platform.python_version(),
        tag=args.tag,
    )
    rec.update(info)
    rec.update(cpu_kind())
    rec.update(extra)
    sys.stdout.write("RESULT " + json.dumps(rec, sort_keys=True) + "\n")
    sys.stdout.flush()
    return rec


def make_batch_np(np, args, cfg):
    """Synthetic pretraining batch (same one reused every step: no input pipeline).

    Full-length sequences (mask all ones), segment ids 0 for the first half and
    1 for the second, `masked` distinct positions per row in [1, seq)."""
    rng = np.random.default_rng(args.seed)
    b, s, m = args.batch, args.seq, args.masked
    word_ids = rng.integers(5, cfg["vocab"], size=(b, s), dtype=np.int32)
    mask = np.ones((b, s), dtype=np.int32)
    type_ids = np.zeros((b, s), dtype=np.int32)
    type_ids[:, s // 2 :] = 1
    pos = np.stack([np.sort(rng.choice(np.arange(1, s), size=m, replace=False)) for _ in range(b)]).astype(np.int32)
    mlm_labels = rng.integers(5, cfg["vocab"], size=(b, m), dtype=np.int32)
    sop_labels = rng.integers(0, 2, size=(b,), dtype=np.int32)
    return dict(
        word_ids=word_ids, mask=mask, type_ids=type_ids, positions=pos, mlm_labels=mlm_labels, sop_labels=sop_labels
    )
