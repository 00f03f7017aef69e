"""Benchmark: data_prep.create_pretraining_data throughput and peak memory.

The issue's job: WikiText-2 valid+test converted to BERT format (one sentence
per line, blank line between articles), an 8,000-piece vocabulary, sequence
length 128, dupe_factor 5; once with 1 and once with 2 DirectRunner workers.
Peak memory is the largest sum of RSS over the process tree (driver + Beam
workers), sampled every 20 ms. Prints JSON.

    python bench/data_prep.py [--data ../shared/data] [--workers 1,2]
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from _common import REPO

# isort: split
import psutil

from data_prep.documents import read_documents
from data_prep.train_sentencepiece import corpus_sentences, train_sentencepiece


def peak_tree_rss(process: subprocess.Popen) -> float:
    """Runs until `process` ends; returns the peak summed RSS (MB) of it and its children."""
    root = psutil.Process(process.pid)
    peak = 0
    while process.poll() is None:
        try:
            members = [root] + root.children(recursive=True)
            peak = max(peak, sum(p.memory_info().rss for p in members if p.is_running()))
        except psutil.Error:
            pass
        time.sleep(0.02)
    return peak / 2**20


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=os.environ.get("ALBERT_TF_DATA", str(REPO.parent / "shared" / "data")))
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--dupe_factor", type=int, default=5)
    args = parser.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench_data_prep_"))
    inputs = []
    for split in ("valid", "test"):
        path = work / f"wikitext2_{split}.txt"
        with open(path, "w", encoding="utf-8") as out:
            for document in read_documents(os.path.join(args.data, "wikitext2", f"{split}.txt"), "wikitext"):
                out.write("\n".join(document) + "\n\n")
        inputs.append(str(path))
    start = time.perf_counter()
    model = train_sentencepiece(corpus_sentences(inputs, "bert", lower=True), str(work / "spm8k"), vocab_size=8000)
    spm_seconds = time.perf_counter() - start
    results = {
        "job": "wikitext2 valid+test, bert format, vocab 8000, seq 128",
        "dupe_factor": args.dupe_factor,
        "cpu_count": os.cpu_count(),
        "train_sentencepiece_s": round(spm_seconds, 2),
        "runs": [],
    }
    for workers in [int(w) for w in args.workers.split(",")]:
        out = work / f"out_w{workers}"
        command = [
            sys.executable,
            "-m",
            "data_prep.create_pretraining_data",
            f"--input_file={','.join(inputs)}",
            f"--output_dir={out}",
            f"--spm_model_file={model}",
            "--max_seq_length=128",
            f"--dupe_factor={args.dupe_factor}",
            "--num_shards=10",
            f"--direct_num_workers={workers}",
        ]
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        peak = peak_tree_rss(process)
        seconds = time.perf_counter() - start
        _, stderr = process.communicate()
        if process.returncode:
            sys.exit(stderr.decode()[-3000:])
        metadata = json.loads((out / "metadata.json").read_text())
        n = metadata["num_instances"]
        results["runs"].append(
            {
                "workers": workers,
                "instances": n,
                "wall_s": round(seconds, 2),
                "instances_per_s": round(n / seconds, 1),
                "peak_rss_mb_all_processes": round(peak, 1),
            }
        )
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
