"""Before/after of a model change beside the peers, in one interleaved run.

Runs the peer harness' scripts (`bench/peers/`: `ours_albert.py`,
`kh_albert.py`, `mg_albert.py`, `hf_albert.py`), each case a fresh process, in
rounds whose order rotates; `ours` runs once per checkout named in `--trees`
(its `ALBERT_TF_REPO`), so the two trees and the peers share the machine's drift.
Prints JSON: per case the median over rounds of the per-process median step, and
each case's ratio to the best peer (latency for `--mode infer`, seq/s for train).

    python bench/ab_trees.py --trees before=/work/main,after=. --mode infer --batch 1 \\
        --cases ours-graph,ours-xla,kh-xla,kh-graph,mg-xla [--rounds 2] [--steps 20 --warmup 3]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

from _common import PEERS, REPO, cpu_kind

SCRIPTS = {"ours": "ours_albert.py", "kh": "kh_albert.py", "mg": "mg_albert.py", "hf": "hf_albert.py"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer_bench", default=str(PEERS), help="the peer scripts' directory")
    parser.add_argument("--trees", required=True, help="name=checkout,... (ours runs once per tree)")
    parser.add_argument("--cases", required=True, help="impl-graph|impl-xla,... (impl: ours, kh, mg, hf)")
    parser.add_argument("--mode", choices=["infer", "train"], default="infer")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--first_round", type=int, default=0, help="rotate as if this many rounds ran before")
    parser.add_argument("--tf_python", default=sys.executable)
    parser.add_argument("--torch_python", default="/tmp/torchvenv/bin/python")
    parser.add_argument("--timeout", type=float, default=420)
    args = parser.parse_args()

    trees = dict(item.split("=", 1) for item in args.trees.split(","))
    cases = []
    for case in args.cases.split(","):
        impl, mode = case.split("-")
        for tree in trees if impl == "ours" else [None]:
            cases.append((f"{impl}[{tree}]-{mode}" if tree else case, impl, mode, tree))
    times = {name: [] for name, *_ in cases}
    for round_index in range(args.first_round, args.first_round + args.rounds):
        shift = round_index % len(cases)
        for name, impl, mode, tree in cases[shift:] + cases[:shift]:
            python = args.torch_python if impl == "hf" else args.tf_python
            cmd = [python, os.path.join(args.peer_bench, SCRIPTS[impl]), "--mode", args.mode]
            cmd += ["--batch", str(args.batch), "--seq", str(args.seq), "--steps", str(args.steps)]
            cmd += ["--warmup", str(args.warmup), "--jit", "1" if mode in ("xla", "compile") else "0"]
            env = dict(os.environ, ALBERT_TF_REPO=os.path.abspath(trees[tree]) if tree else str(REPO))
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
                output = done.stdout + done.stderr
            except subprocess.TimeoutExpired:
                output = "timeout"
            lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
            if not lines:
                print(f"[round {round_index}] {name}: FAILED {output[-600:]}", file=sys.stderr, flush=True)
                continue
            result = json.loads(lines[-1][len("RESULT ") :])
            times[name].append(result["step_median_ms"])
            print(
                f"[round {round_index}] {name}: {result['step_median_ms']:.1f} ms "
                f"util {result.get('timed_cpu_util')} rss {result.get('peak_rss_mb')} MB",
                file=sys.stderr,
                flush=True,
            )
    ms = {name: round(statistics.median(t), 1) for name, t in times.items() if t}
    peers = {name: v for name, v in ms.items() if not name.startswith("ours")}
    best_peer = min(peers, key=peers.get) if peers else None
    summary = {}
    for name, value in ms.items():
        row = {"ms": value, "seq_per_s": round(args.batch * 1000 / value, 2), "runs_ms": times[name]}
        if best_peer:
            row["latency_over_best_peer"] = round(value / peers[best_peer], 3)
            row["speed_over_best_peer"] = round(peers[best_peer] / value, 3)
        summary[name] = row
    print(
        json.dumps(
            {
                "mode": args.mode,
                "batch": args.batch,
                "seq": args.seq,
                "rounds": args.rounds,
                **cpu_kind(),
                "best_peer": best_peer,
                "results": summary,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
