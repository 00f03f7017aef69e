"""Benchmark: data_prep on Beam's DaskRunner (a local dask.distributed cluster) against the DirectRunner.

Corpus: 10x the bytes of tests/test_data_prep_dask.py's (6,000 lines of tinyshakespeare,
156 KB): all of tinyshakespeare, then WikiText-2 valid articles (one sentence per line) up to
1.56 MB, in 8 files. A 4,000-piece vocabulary from WikiText-2 valid (the tests'), length 128,
dupe_factor 2, 3 shards, as the test. Starts a scheduler and `--workers` single-threaded worker
processes on 127.0.0.1, runs the same command line on both runners, checks the bytes are equal,
and reports wall time and peak RSS: per Dask worker, of the scheduler, and of the launching
process (sampled every 20 ms). Stops every process it started. Prints JSON.

    python bench/dask_data_prep.py [--data ../shared/data] [--workers 2] [--npartitions 4]
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time

from _common import REPO

# isort: split
import psutil

from data_prep.documents import read_documents
from data_prep.train_sentencepiece import corpus_sentences, train_sentencepiece

TEST_BYTES = 156_299  # the test's corpus: tinyshakespeare's first 6,000 lines


class PeakRss:
    """Samples the RSS of some processes every 20 ms in a thread; `peaks` in MB."""

    def __init__(self, pids):
        self.processes = {pid: psutil.Process(pid) for pid in pids}
        self.peaks = dict.fromkeys(pids, 0)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self):
        while not self.done.is_set():
            for pid, process in self.processes.items():
                try:
                    self.peaks[pid] = max(self.peaks[pid], process.memory_info().rss)
                except psutil.Error:
                    pass
            time.sleep(0.02)

    def stop(self):
        self.done.set()
        self.thread.join()
        return {pid: round(v / 2**20, 1) for pid, v in self.peaks.items()}


def write_corpus(data: pathlib.Path, directory: pathlib.Path, files: int = 8) -> int:
    lines = (data / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8").splitlines()
    for document in read_documents(str(data / "wikitext2" / "valid.txt"), "wikitext"):
        lines += document + [""]
        if sum(len(line) + 1 for line in lines) >= 10 * TEST_BYTES:
            break
    per_file = -(-len(lines) // files)
    total = 0
    for index in range(files):
        text = "\n".join(lines[index * per_file : (index + 1) * per_file]) + "\n"
        (directory / f"part{index}.txt").write_text(text, encoding="utf-8")
        total += len(text.encode("utf-8"))
    return total


def run_data_prep(args):
    process = subprocess.Popen(
        [sys.executable, "-m", "data_prep.create_pretraining_data"] + args,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    sampler = PeakRss([process.pid])
    start = time.perf_counter()
    _, err = process.communicate()
    seconds = time.perf_counter() - start
    peak = sampler.stop()[process.pid]
    if process.returncode:
        raise SystemExit(f"data_prep failed: {err[-2000:]}")
    return seconds, peak


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=os.environ.get("ALBERT_TF_DATA", str(REPO.parent / "shared" / "data")))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--npartitions", type=int, default=4)
    args = parser.parse_args()
    data = pathlib.Path(args.data)
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench_dask_data_prep_"))
    corpus = work / "corpus"
    corpus.mkdir()
    corpus_bytes = write_corpus(data, corpus)
    sentences = corpus_sentences([str(data / "wikitext2" / "valid.txt")], "wikitext", lower=True)
    spm = train_sentencepiece(sentences, str(work / "wikitext4k"), vocab_size=4000)
    common = [
        f"--input_file={corpus}/part*.txt",
        f"--spm_model_file={spm}",
        "--max_seq_length=128",
        "--dupe_factor=2",
        "--num_shards=3",
    ]
    direct_seconds, direct_peak = run_data_prep(common + [f"--output_dir={work / 'direct'}"])

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    scheduler_file = work / "scheduler.json"
    started = []
    try:
        started.append(
            subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host=127.0.0.1", "--port=0"]
                + ["--no-dashboard", f"--scheduler-file={scheduler_file}"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        while not scheduler_file.exists():
            time.sleep(0.1)
        for _ in range(args.workers):
            started.append(
                subprocess.Popen(
                    [sys.executable, "-m", "distributed.cli.dask_worker", f"--scheduler-file={scheduler_file}"]
                    + ["--nthreads=1", "--host=127.0.0.1", "--no-nanny", "--no-dashboard", "--memory-limit=0"],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        from distributed import Client

        with Client(scheduler_file=str(scheduler_file), timeout=60) as client:
            client.wait_for_workers(args.workers, timeout=120)
            idle = PeakRss([p.pid for p in started])
            time.sleep(1)
            idle_peaks = idle.stop()
            cluster = PeakRss([p.pid for p in started])
            address = json.loads(scheduler_file.read_text())["address"]
            dask_seconds, dask_launcher_peak = run_data_prep(
                common
                + [f"--output_dir={work / 'dask'}", "--runner=DaskRunner", f"--dask_client_address={address}"]
                + [f"--dask_npartitions={args.npartitions}"]
            )
            peaks = cluster.stop()
    finally:
        for process in started:
            process.terminate()
        for process in started:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()

    def files(directory):
        found = {p: (directory / p).read_bytes() for p in sorted(os.listdir(directory))}
        metadata = json.loads(found.pop("metadata.json"))
        metadata["settings"].pop("output_dir")
        return found, metadata

    direct, dask_output = files(work / "direct"), files(work / "dask")
    workers = [p.pid for p in started[1:]]
    print(
        json.dumps(
            {
                "corpus_bytes": corpus_bytes,
                "corpus_vs_test": round(corpus_bytes / TEST_BYTES, 1),
                "instances": direct[1]["num_instances"],
                "identical_bytes": direct == dask_output,
                "direct_runner": {"seconds": round(direct_seconds, 1), "peak_rss_mb": direct_peak},
                "dask_runner": {
                    "workers": args.workers,
                    "npartitions": args.npartitions,
                    "seconds": round(dask_seconds, 1),
                    "launcher_peak_rss_mb": dask_launcher_peak,
                    "scheduler_peak_rss_mb": peaks[started[0].pid],
                    "worker_peak_rss_mb": [peaks[pid] for pid in workers],
                    "worker_idle_rss_mb": [idle_peaks[pid] for pid in workers],
                },
                "cpu": {"count": os.cpu_count()},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
