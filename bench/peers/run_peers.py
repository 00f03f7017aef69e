#!/usr/bin/env python3
"""Run the peer ALBERT benchmarks in interleaved rounds and print a table.

Each case is one fresh process of a peer script (ours_albert.py, mg_albert.py,
kh_albert.py, hf_albert.py). Every round runs every selected case once in each
selected precision (--precision float32,bfloat16), in an order rotated by one
position per round, so slow drift of the shared machine spreads over all cases.
Per run we keep the peer's JSON line plus the process's peak RSS as reported
by wait4 (covers the whole process, incl. compilation).

The table shows, per case, the median over rounds of the per-run median step
time, the spread (min..max of those per-run medians), throughput, and the
speed ratio against a baseline case computed per round (paired) and then
summarised by median and range; one table per CPU kind found in the records
(timings of different kinds are never compared). A bfloat16 run is listed as
`<case> bf16`.

  python3 bench/peers/run_peers.py --suite train --rounds 3 --precision float32,bfloat16 \
      --tf-python .venv/bin/python --torch-python /path/to/torch-venv/bin/python --out train.jsonl
  python3 bench/peers/run_peers.py --table train.jsonl

Stdlib only.
"""

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))  # bench/peers/ -> repository root
sys.path.insert(0, HERE)
from cpu_kind import cpu_kind  # noqa: E402

PRECISIONS = ("float32", "bfloat16")

TRAIN = ["--mode", "train", "--batch", "8", "--seq", "128", "--masked", "20", "--steps", "5", "--warmup", "2"]


def infer(b, steps, warmup):
    return ["--mode", "infer", "--batch", str(b), "--seq", "128", "--steps", str(steps), "--warmup", str(warmup)]


def build_cases():
    """name -> (runtime, script, args). runtime is 'tf' or 'torch'."""
    c = {}
    for model in ("albert", "bert"):
        for jit, tag in ((0, "graph"), (1, "xla")):
            c[f"mg-{model}-{tag}"] = ("tf", "mg_albert.py", TRAIN + ["--model", model, "--jit", str(jit)])
            c[f"kh-{model}-{tag}"] = ("tf", "kh_albert.py", TRAIN + ["--model", model, "--jit", str(jit)])
            c[f"ours-{model}-{tag}"] = ("tf", "ours_albert.py", TRAIN + ["--model", model, "--jit", str(jit)])
        for jit, tag in ((0, "eager"), (1, "compile")):
            c[f"hf-{model}-{tag}"] = ("torch", "hf_albert.py", TRAIN + ["--model", model, "--jit", str(jit)])
    # Variants that isolate one factor.
    for jit, tag in ((0, "graph"), (1, "xla")):
        c[f"mg-albert-{tag}-adamw"] = ("tf", "mg_albert.py", TRAIN + ["--jit", str(jit), "--opt", "adamw"])
        c[f"kh-albert-{tag}-adamw"] = ("tf", "kh_albert.py", TRAIN + ["--jit", str(jit), "--opt", "adamw"])
    c["hf-albert-eager-stockhead"] = ("torch", "hf_albert.py", TRAIN + ["--stock-head"])
    c["hf-albert-eager-drop0.1"] = ("torch", "hf_albert.py", TRAIN + ["--dropout", "0.1"])
    c["hf-bert-eager-drop0.1"] = ("torch", "hf_albert.py", TRAIN + ["--model", "bert", "--dropout", "0.1"])
    # Inference: encoder forward only.
    for b, steps, warm in ((1, 20, 3), (32, 3, 2)):
        for jit, tag in ((0, "graph"), (1, "xla")):
            c[f"infer-b{b}-mg-albert-{tag}"] = ("tf", "mg_albert.py", infer(b, steps, warm) + ["--jit", str(jit)])
            c[f"infer-b{b}-kh-albert-{tag}"] = ("tf", "kh_albert.py", infer(b, steps, warm) + ["--jit", str(jit)])
            c[f"infer-b{b}-ours-albert-{tag}"] = ("tf", "ours_albert.py", infer(b, steps, warm) + ["--jit", str(jit)])
        for jit, tag in ((0, "eager"), (1, "compile")):
            c[f"infer-b{b}-hf-albert-{tag}"] = ("torch", "hf_albert.py", infer(b, steps, warm) + ["--jit", str(jit)])
        c[f"infer-b{b}-hf-bert-eager"] = ("torch", "hf_albert.py", infer(b, steps, warm) + ["--model", "bert"])
    c.update(realwork_cases())
    return c


def realwork_cases():
    """Real GLUE text, one shared spm (ours_realwork.py, hf_realwork.py, kh_realwork.py); runtime 'bench' is the
    venv with bench/requirements-bench.txt (ONNX Runtime, OpenVINO)."""
    c = {}
    for task in ("SST-2", "CoLA", "MRPC"):
        ft = ["--work", "finetune", "--task", task]
        c[f"rw-ft-{task}-ours-grouped"] = ("tf", "ours_realwork.py", ft + ["--length_grouping", "1"])
        c[f"rw-ft-{task}-ours-fixed128"] = ("tf", "ours_realwork.py", ft + ["--length_grouping", "0"])
        # The A/B for a floor of 8 (no batch cut narrower), as the library had it before 2026-11-26 session 7.
        floor8 = ",".join(str(width) for width in range(8, 129))
        c[f"rw-ft-{task}-ours-floor8"] = ("tf", "ours_realwork.py", ft + ["--buckets", floor8])
        c[f"rw-ft-{task}-hf-default"] = ("torch", "hf_realwork.py", ft)
        c[f"rw-ft-{task}-hf-grouped"] = ("torch", "hf_realwork.py", ft + ["--group_by_length", "1"])
        c[f"rw-ft-{task}-kh-512"] = ("tf", "kh_realwork.py", ft)
        c[f"rw-ft-{task}-kh-128"] = ("tf", "kh_realwork.py", ft + ["--sequence_length", "128"])
    for work in ("classify", "request"):
        w, tag = ["--work", work], "cls" if work == "classify" else "req"
        c[f"rw-{tag}-ours-savedmodel"] = ("tf", "ours_realwork.py", w + ["--engine", "savedmodel"])
        c[f"rw-{tag}-ours-openvino"] = ("bench", "ours_realwork.py", w + ["--engine", "openvino"])
        for engine in ("eager", "compile", "ort", "ort-int8", "ov-onnx"):
            runtime = "torch" if engine in ("eager", "compile") else "bench"
            c[f"rw-{tag}-hf-{engine}"] = (runtime, "hf_realwork.py", w + ["--engine", engine])
    c["rw-cls-ours-keras"] = ("tf", "ours_realwork.py", ["--work", "classify", "--engine", "keras"])
    c["rw-cls-ours-predict"] = ("tf", "ours_realwork.py", ["--work", "classify", "--engine", "predict"])
    for work, tag in (("classify", "cls"), ("request", "req")):
        for quantize in ("none", "dynamic_int8"):
            tflite = ["--work", work, "--engine", "tflite", "--quantize", quantize]
            variant = "float32" if quantize == "none" else quantize
            c[f"rw-{tag}-ours-tflite-{variant}"] = ("tf", "ours_realwork.py", tflite)
    c["rw-cls-kh-512"] = ("tf", "kh_realwork.py", ["--work", "classify"])
    c["rw-cls-kh-128"] = ("tf", "kh_realwork.py", ["--work", "classify", "--sequence_length", "128"])
    return c


SUITES = {
    "train": [
        "ours-albert-graph",
        "ours-albert-xla",
        "mg-albert-graph",
        "mg-albert-xla",
        "kh-albert-graph",
        "kh-albert-xla",
        "hf-albert-eager",
        "hf-albert-compile",
    ],
    "bert": ["mg-bert-graph", "mg-bert-xla", "kh-bert-graph", "kh-bert-xla", "hf-bert-eager", "hf-bert-compile"],
    "extra": [
        "mg-albert-graph-adamw",
        "mg-albert-xla-adamw",
        "kh-albert-graph-adamw",
        "kh-albert-xla-adamw",
        "hf-albert-eager-stockhead",
        "hf-albert-eager-drop0.1",
        "hf-bert-eager-drop0.1",
    ],
    "infer1": [n for n in build_cases() if n.startswith("infer-b1-")],
    "infer32": [n for n in build_cases() if n.startswith("infer-b32-")],
}
SUITES["infer"] = SUITES["infer1"] + SUITES["infer32"]
for _tag in ("ft", "cls", "req"):
    SUITES[f"rw-{_tag}"] = [n for n in realwork_cases() if n.startswith(f"rw-{_tag}-")]
SUITES["rw-ft-SST-2"] = [n for n in SUITES["rw-ft"] if n.startswith("rw-ft-SST-2-")]
SUITES["realwork"] = SUITES["rw-ft"] + SUITES["rw-cls"] + SUITES["rw-req"]
SUITES["all"] = SUITES["train"] + SUITES["bert"] + SUITES["infer"]


def run_case(name, case, py, timeout_s, passthrough, precision="float32"):
    runtime, script, cargs = case
    cmd = [py[runtime], os.path.join(HERE, script)] + cargs + ["--tag", name, "--precision", precision] + passthrough
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    out_chunks = []
    reader = threading.Thread(target=lambda: out_chunks.append(p.stdout.read()))
    reader.start()
    killed = []

    def _kill():
        killed.append(True)
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout_s, _kill)
    timer.start()
    _, status, ru = os.wait4(p.pid, 0)
    timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    reader.join()
    out = "".join(out_chunks)
    wall = time.perf_counter() - t0
    rec = None
    for line in out.splitlines():
        if line.startswith("RESULT "):
            rec = json.loads(line[len("RESULT ") :])
    base = dict(
        case=name,
        precision=precision,
        rc=p.returncode,
        timed_out=bool(killed),
        wall_s=round(wall, 1),
        wait4_maxrss_mb=round(ru.ru_maxrss / 1024.0, 1),
        cmd=" ".join([os.path.relpath(cmd[1], REPO)] + cmd[2:]),
    )
    if rec is None:
        base.update(cpu_kind())
        base["error_tail"] = out[-1500:]
        return base
    rec.update(base)
    return rec


def realwork_figure(r):
    for key, unit in (("examples_per_s", "examples/s"), ("texts_per_s", "texts/s"), ("median_ms", "ms")):
        if key in r:
            return r[key], unit
    return None, ""


def realwork_line(r):
    value, unit = realwork_figure(r)
    return f"{value} {unit}, cpu use {r.get('cpu_use')}, load {r.get('loadavg')}, rss {r['wait4_maxrss_mb']:.0f} MB"


def realwork_table(recs):
    """Real-work runs: median over rounds of each case's figure, its range, CPU use, load; per CPU kind."""
    out = []
    for kind in sorted({r.get("cpu_kind", "?") for r in recs}):
        out.append(f"CPU kind: {kind}\n")
        out.append("| case | figure (median over rounds) | range | unit | cpu use | load (1 min) | rounds |")
        out.append("|---|---|---|---|---|---|---|")
        by_case = {}
        for r in recs:
            if r.get("cpu_kind", "?") == kind:
                by_case.setdefault(r["case"], []).append(r)
        for case, runs in by_case.items():
            vals = [realwork_figure(r)[0] for r in runs]
            unit = realwork_figure(runs[0])[1]
            use = statistics.median(r["cpu_use"] for r in runs)
            load_1 = statistics.median(r["loadavg"][0] for r in runs)
            out.append(
                f"| {case} | {statistics.median(vals):.3g} | {fmt_range(vals)} | {unit} | {use:.2f} | {load_1:.1f} "
                f"| {len(runs)} |"
            )
        out.append("")
    return "\n".join(out)


def load(paths):
    recs = []
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if line:
                    recs.append(json.loads(line))
    return recs


def fmt_range(vals, nd=2):
    if not vals:
        return "-"
    if len(vals) == 1:
        return f"{vals[0]:.{nd}f}"
    return f"{min(vals):.{nd}f}..{max(vals):.{nd}f}"


def is_contended(r, best_util, min_util, util_frac):
    u = r.get("timed_cpu_util", 2.0)
    return u < min_util or u < util_frac * best_util.get(r["case"], u)


def label(rec):
    """The table's name for a run: the case, plus ' bf16' for a bfloat16 one."""
    return rec["case"] + ("" if rec.get("precision", "float32") == "float32" else " bf16")


def tables(recs, baseline=None, order=None, **kw):
    """One table per CPU kind in the records (a heading line before each)."""
    kinds = []
    for r in recs:
        if r.get("cpu_kind", "unknown") not in kinds:
            kinds.append(r.get("cpu_kind", "unknown"))
    out = []
    for kind in kinds:
        mine = [dict(r, case=label(r)) for r in recs if r.get("cpu_kind", "unknown") == kind]
        flags = next((r["cpu_flags"] for r in mine if "cpu_flags" in r), [])
        days = sorted({r["date"] for r in mine if r.get("date")})
        out.append(f"CPU kind: {kind}; flags: {' '.join(flags) or '?'}; runs on {', '.join(days) or '?'}\n")
        out.append(table(mine, baseline, order, **kw))
        out.append("")
    return "\n".join(out)


def table(recs, baseline=None, order=None, min_util=1.5, util_frac=0.93):
    """Markdown table. cpu util = process CPU s / wall s of the timed phase
    (2.0 = both cores busy). A run that got fewer than min_util cores, or less
    than util_frac of the best util seen for the same case, was slowed by
    other load on the shared machine: it is counted but left out of every
    statistic (and of the paired ratios)."""
    best_util = {}
    for r in recs:
        if "step_median_ms" in r:
            best_util[r["case"]] = max(best_util.get(r["case"], 0.0), r.get("timed_cpu_util", 2.0))
    ok = [r for r in recs if "step_median_ms" in r and not is_contended(r, best_util, min_util, util_frac)]
    contended = {}
    for r in recs:
        if "step_median_ms" in r and is_contended(r, best_util, min_util, util_frac):
            contended[r["case"]] = contended.get(r["case"], 0) + 1
    bad = [r for r in recs if "step_median_ms" not in r]
    names = []
    for r in ok:
        if r["case"] not in names:
            names.append(r["case"])
    if order:
        names.sort(key=lambda n: order.index(n) if n in order else len(order))
    if baseline is None and names:
        baseline = names[0]
    by_round = {}
    for r in ok:
        by_round.setdefault((r.get("session"), r.get("round", 0)), {})[r["case"]] = r
    lines = []
    hdr = (
        "| case | runs (contended, left out) | step ms median (min..max of run medians) | "
        f"seq/s | speed vs {baseline} (paired median, range) | first step s | "
        "peak RSS MB | cpu util |"
    )
    lines.append(hdr)
    lines.append("|" + "---|" * 8)
    for n in names:
        rs = [r for r in ok if r["case"] == n]
        meds = [r["step_median_ms"] for r in rs]
        med = statistics.median(meds)
        batch = rs[0]["batch"]
        ratios = []
        for rd in by_round.values():
            if n in rd and baseline in rd:
                ratios.append(rd[baseline]["step_median_ms"] / rd[n]["step_median_ms"])
        ratio_s = f"{statistics.median(ratios):.2f}x ({fmt_range(ratios)})" if ratios else "-"
        first = [r["first_step_s"] for r in rs]
        rss = [max(r.get("wait4_maxrss_mb", 0), r.get("peak_rss_mb", 0)) for r in rs]
        util = [r.get("timed_cpu_util", float("nan")) for r in rs]
        lines.append(
            f"| {n} | {len(rs)} ({contended.get(n, 0)}) | {med:.0f} ({min(meds):.0f}..{max(meds):.0f}) | "
            f"{batch / (med / 1000):.2f} | {ratio_s} | {statistics.median(first):.1f} | "
            f"{statistics.median(rss):.0f} | {statistics.median(util):.2f} |"
        )
    for r in bad:
        lines.append(f"| {r['case']} | FAILED rc={r.get('rc')} timed_out={r.get('timed_out')} | | | | | | |")
    pair_lines = pairs(names, by_round)
    if pair_lines:
        lines += [
            "",
            "| pair (A vs B, same round) | rounds | speed A/B = ms(B)/ms(A): median (range) |",
            "|---|---|---|",
        ] + pair_lines
    return "\n".join(lines)


def pairs(names, by_round):
    """Automatic paired comparisons: ALBERT vs BERT for the same peer/mode,
    compiled (xla/compile) vs not (graph/eager) for the same peer/model, and
    one-factor variants (-adamw, -stockhead, -drop0.1) vs their base case."""
    cand = []
    for n in names:
        if "-albert-" in n:
            cand.append((n, n.replace("-albert-", "-bert-")))
    for n in names:
        for a, b in (("-xla", "-graph"), ("-compile", "-eager")):
            if a in n:
                cand.append((n, n.replace(a, b)))
    for n in names:  # bf16 vs float32 of the same case
        if n.endswith(" bf16"):
            cand.append((n, n[: -len(" bf16")]))
    for n in names:  # one-factor variants vs their base case
        for suffix in ("-adamw", "-stockhead", "-drop0.1"):
            if n.endswith(suffix):
                cand.append((n, n[: -len(suffix)]))
    out = []
    for a, b in cand:
        if b not in names:
            continue
        rs = [rd[b]["step_median_ms"] / rd[a]["step_median_ms"] for rd in by_round.values() if a in rd and b in rd]
        if rs:
            out.append(f"| {a} vs {b} | {len(rs)} | {statistics.median(rs):.2f}x ({fmt_range(rs)}) |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default="train", help="comma list of: " + ", ".join(SUITES))
    ap.add_argument("--cases", default="", help="comma list of case names (overrides --suite)")
    ap.add_argument("--only", default="", help="regex filter on case names")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--precision",
        default="float32",
        help="comma list of " + ", ".join(PRECISIONS) + "; each case runs once per precision per round",
    )
    ap.add_argument(
        "--first-round",
        type=int,
        default=0,
        help="number of the first round (also sets the starting rotation), to continue a series",
    )
    ap.add_argument(
        "--session",
        default=None,
        help="name of the series (default: the start time); runs of several invocations with the same session "
        "and round are paired, e.g. one precision per invocation",
    )
    ap.add_argument(
        "--min-util", type=float, default=1.5, help="table: leave out runs whose timed phase got fewer cores than this"
    )
    ap.add_argument(
        "--util-frac",
        type=float,
        default=0.93,
        help="table: ... or less than this fraction of the best util of the same case",
    )
    ap.add_argument(
        "--tf-python",
        default=os.environ.get("BENCH_TF_PYTHON", "python"),
        help="python of the TF venv (tensorflow, tf-models-official, keras-hub)",
    )
    ap.add_argument(
        "--torch-python",
        default=os.environ.get("BENCH_TORCH_PYTHON", "python"),
        help="python of the torch venv (torch, transformers)",
    )
    ap.add_argument(
        "--bench-python",
        default=os.environ.get("BENCH_ENGINE_PYTHON", "/work/benchvenv/bin/python"),
        help="python of the venv with bench/requirements-bench.txt (ONNX Runtime, OpenVINO) for the rw-* engine cases",
    )
    ap.add_argument("--timeout", type=float, default=420.0, help="per-process limit, seconds")
    ap.add_argument("--out", default="", help="append JSON lines here")
    ap.add_argument("--baseline", default=None, help="case the speed ratios refer to")
    ap.add_argument("--table", nargs="*", default=None, help="only print the table of these JSONL files")
    ap.add_argument("--list", action="store_true", help="list cases and exit")
    ap.add_argument("passthrough", nargs="*", help="extra flags for every peer script, after --")
    a = ap.parse_args()

    cases = build_cases()
    if a.list:
        for n, (rt, s, ca) in cases.items():
            print(f"{n:32s} {rt:5s} {s} {' '.join(ca)}")
        return
    if a.table is not None:
        recs = [r for r in load(a.table) if not a.only or re.search(a.only, r["case"])]
        if any("work" in r for r in recs):
            print(realwork_table([r for r in recs if "work" in r]))
            recs = [r for r in recs if "work" not in r]
        print(tables(recs, a.baseline, min_util=a.min_util, util_frac=a.util_frac))
        return
    if a.cases:
        names = a.cases.split(",")
    else:
        names = []
        for s in a.suite.split(","):
            names += [n for n in SUITES[s] if n not in names]
    if a.only:
        names = [n for n in names if re.search(a.only, n)]
    unknown = [n for n in names if n not in cases]
    if unknown:
        sys.exit(f"unknown cases: {unknown}")
    precisions = a.precision.split(",")
    if any(p not in PRECISIONS for p in precisions):
        sys.exit(f"--precision {a.precision}: expected a comma list of {', '.join(PRECISIONS)}")
    runs = [(n, p) for p in precisions for n in names]
    py = {"tf": a.tf_python, "torch": a.torch_python, "bench": a.bench_python}
    recs = []
    session = a.session or time.strftime("%Y%m%d-%H%M%S")
    out = open(a.out, "a") if a.out else None
    for rnd in range(a.first_round, a.first_round + a.rounds):
        k = rnd % len(runs)
        for n, precision in runs[k:] + runs[:k]:
            r = run_case(n, cases[n], py, a.timeout, a.passthrough, precision)
            r["round"] = rnd
            r["session"] = session
            r["date"], r["finished"] = time.strftime("%Y-%m-%d"), time.strftime("%H:%M:%S")
            recs.append(r)
            msg = f"[round {rnd}] {label(r)}: " + (
                f"{r['step_median_ms']:.0f} ms/step, {r['seq_per_s']:.2f} seq/s, "
                f"first {r['first_step_s']:.1f}s, rss {r['wait4_maxrss_mb']:.0f} MB, "
                f"util {r.get('timed_cpu_util')}"
                if "step_median_ms" in r
                else realwork_line(r)
                if "work" in r
                else f"FAILED rc={r['rc']}\n{r.get('error_tail', '')}"
            )
            print(msg, flush=True)
            if out:
                out.write(json.dumps(r, sort_keys=True) + "\n")
                out.flush()
    print()
    if any("work" in r for r in recs):
        print(realwork_table([r for r in recs if "work" in r]))
        recs = [r for r in recs if "work" not in r]
    order = [n + ("" if p == "float32" else " bf16") for n in names for p in precisions]
    print(tables(recs, a.baseline, order, min_util=a.min_util, util_frac=a.util_frac))


if __name__ == "__main__":
    main()
