"""data_prep on a distributed engine: Beam's DaskRunner against a dask.distributed cluster of a
scheduler and two worker processes on 127.0.0.1, the same command line as any runner, the same bytes
as the DirectRunner's."""

import json
import os
import re
import subprocess
import sys
import time

import pytest

from albert_tf.tokenization import SentencePieceTokenizer
from data_prep.pipeline import DataPrepError, Settings, run

from paths import REPO

pytestmark = pytest.mark.realdata
WORKERS = 2


def stop(processes):
    """Stops the workers, then the scheduler (`processes[0]`): a worker stopped together with its scheduler
    spent its whole 30 s close timeout trying to say goodbye to it."""
    for group in (processes[1:], processes[:1]):
        for process in group:
            if process.poll() is None:
                process.terminate()
        for process in group:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def dask_cluster(tmp_path):
    """A scheduler and `WORKERS` single-threaded worker processes; yields (address, client, scheduler process);
    stops them all."""
    from distributed import Client

    scheduler_file = tmp_path / "scheduler.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # workers unpickle data_prep's DoFns: this checkout
    cli = [sys.executable, "-m"]
    processes = []
    client = None
    try:
        processes.append(
            subprocess.Popen(
                cli
                + ["distributed.cli.dask_scheduler", "--host=127.0.0.1", "--port=0", "--no-dashboard"]
                + [f"--scheduler-file={scheduler_file}"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        deadline = time.time() + 120
        while not scheduler_file.exists():
            assert processes[0].poll() is None, "the dask scheduler exited"
            assert time.time() < deadline, "the dask scheduler did not start"
            time.sleep(0.1)
        for _ in range(WORKERS):
            processes.append(
                subprocess.Popen(
                    cli
                    + ["distributed.cli.dask_worker", f"--scheduler-file={scheduler_file}", "--nthreads=1"]
                    + ["--host=127.0.0.1", "--no-nanny", "--no-dashboard", "--memory-limit=0"],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        client = Client(scheduler_file=str(scheduler_file), timeout=60)
        client.wait_for_workers(WORKERS, timeout=120)
        yield json.loads(scheduler_file.read_text())["address"], client, processes[0]
    finally:
        if client is not None:
            client.close()
        stop(processes)


def data_prep(args):
    return subprocess.run(
        [sys.executable, "-m", "data_prep.create_pretraining_data"] + args,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


def dataset(directory):
    files = {p: (directory / p).read_bytes() for p in sorted(os.listdir(directory))}
    metadata = json.loads(files.pop("metadata.json"))
    del metadata["settings"]["output_dir"]
    files.pop("settings.json")  # the run's record (its command line, time): not the data
    return files, metadata


@pytest.mark.slow
def test_dask_runner_on_a_two_worker_cluster_writes_the_direct_runners_bytes(
    dask_cluster, tmp_path, wikitext_spm, real_data
):
    address, client, _ = dask_cluster
    lines = (real_data / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8").splitlines()[:6000]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for part in range(4):  # several files: the cluster reads them in parallel
        (corpus / f"part{part}.txt").write_text("\n".join(lines[part * 1500 : (part + 1) * 1500]) + "\n")
    common = [
        f"--input_file={corpus}/part*.txt",
        f"--spm_model_file={wikitext_spm}",
        "--max_seq_length=128",
        "--dupe_factor=2",
        "--num_shards=3",
    ]
    direct = data_prep(common + [f"--output_dir={tmp_path / 'direct'}"])
    assert direct.returncode == 0, direct.stderr[-3000:]
    before = client.run(lambda dask_worker: dask_worker.state.transition_counter)
    on_dask = data_prep(
        common
        + [f"--output_dir={tmp_path / 'dask'}", "--runner", "DaskRunner", f"--dask_client_address={address}"]
        + ["--dask_npartitions=2"]
    )
    assert on_dask.returncode == 0, on_dask.stderr[-3000:]
    after = client.run(lambda dask_worker: dask_worker.state.transition_counter)
    assert len(after) == WORKERS and all(after[w] > before[w] for w in after)  # both workers ran tasks
    shards, metadata = dataset(tmp_path / "direct")
    assert dataset(tmp_path / "dask") == (shards, metadata)
    records = {name: data for name, data in shards.items() if name.endswith(".tfrecord")}
    assert list(records) == [f"part-0000{i}-of-00003.tfrecord" for i in range(3)]
    assert sorted(set(shards) - set(records)) == ["spm.model", "tokenizer.json"]  # the data's vocabulary
    assert metadata["num_instances"] > 1000 and all(len(v) > 50_000 for v in records.values())


@pytest.mark.slow
def test_a_scheduler_lost_mid_job_is_one_line_and_the_earlier_dataset_stays(
    dask_cluster, tmp_path, wikitext_spm, real_data
):
    address, client, scheduler = dask_cluster
    output_dir = tmp_path / "out"
    common = [f"--spm_model_file={wikitext_spm}", "--input_format=wikitext", f"--output_dir={output_dir}"]
    small = tmp_path / "small.txt"
    small.write_text((real_data / "wikitext2" / "valid.txt").read_text(encoding="utf-8")[:100_000], encoding="utf-8")
    earlier = data_prep(common + [f"--input_file={small}"])
    assert earlier.returncode == 0, earlier.stderr[-3000:]
    before = dataset(output_dir)

    wikitext = real_data / "wikitext2"
    job = subprocess.Popen(
        [sys.executable, "-m", "data_prep.create_pretraining_data"]
        + common
        + [f"--input_file={wikitext}/valid.txt,{wikitext}/test.txt", "--dupe_factor=10", "--overwrite"]
        + ["--runner", "DaskRunner", f"--dask_client_address={address}"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # The scheduler goes once a worker runs the job's tasks (minutes of work for one worker).
        while not any(client.run(lambda dask_worker: dask_worker.state.executing_count).values()):
            assert job.poll() is None, job.communicate()[1][-3000:]
            time.sleep(0.2)
        scheduler.kill()
        _, err = job.communicate(timeout=300)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 1
    assert "Traceback" not in err, err[-3000:]
    assert re.fullmatch(
        rf"error: {re.escape(str(output_dir))}: the Dask cluster \(tcp://127\.0\.0\.1:\d+\) was lost before the "
        r"job finished \(\d+ of \d+ tasks \w+\); nothing was published \(any earlier dataset there is intact\)",
        err.strip().splitlines()[-1],
    )
    assert dataset(output_dir) == before


def test_dask_runner_refuses_data_that_needs_the_document_count(tmp_path, wikitext_spm, real_data):
    settings = Settings(
        input_file=str(real_data / "wikitext2" / "valid.txt"),
        output_dir=str(tmp_path / "out"),
        tokenizer=SentencePieceTokenizer(wikitext_spm),
        input_format="wikitext",
        random_next_sentence=True,
    )
    with pytest.raises(DataPrepError, match="--runner DaskRunner cannot make data that draws B segments"):
        run(settings, ["--runner", "DaskRunner", "--dask_client_address=127.0.0.1:1"])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("runner", ["daskrunner", "NoSuchRunner"])
def test_an_unknown_runner_is_one_line_before_any_work(tmp_path, runner):
    settings = Settings(input_file=str(tmp_path / "corpus.txt"), output_dir=str(tmp_path / "out"))
    with pytest.raises(DataPrepError, match=f"^--runner {runner}: no such Beam runner \\(names are case-sensitive"):
        run(settings, ["--runner", runner])
    assert not (tmp_path / "out").exists()


@pytest.fixture
def http_server():
    """An HTTP server on a free port of 127.0.0.1 (answers, but is no Dask scheduler); yields its port."""
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_dask_address_that_is_no_scheduler_or_has_no_worker_is_one_line_after_the_wait(
    tmp_path, fox_spm, http_server, capsys
):
    """Each waited for ever (hardening V): bounded by --dask_wait_seconds, said before, one line after."""
    from distributed import LocalCluster

    settings = Settings(
        input_file=str(tmp_path / "corpus.txt"),
        output_dir=str(tmp_path / "out"),
        tokenizer=SentencePieceTokenizer(fox_spm),
        dask_wait_seconds=1,
    )
    (tmp_path / "corpus.txt").write_text("some text. more text.\n")
    address = f"127.0.0.1:{http_server}"
    with pytest.raises(DataPrepError, match=f"^--dask_client_address {address}: no Dask scheduler answered in 1 s"):
        run(settings, ["--runner", "DaskRunner", f"--dask_client_address={address}"])
    note = f"note: waiting up to 1 s (--dask_wait_seconds) for the Dask scheduler at --dask_client_address {address}"
    assert note in capsys.readouterr().err
    with pytest.raises(DataPrepError, match="^--dask_client_address notahost: cannot reach a Dask scheduler there"):
        run(settings, ["--runner", "DaskRunner", "--dask_client_address=notahost"])
    with LocalCluster(
        n_workers=0, processes=False, protocol="tcp://", host="127.0.0.1", scheduler_port=0, dashboard_address=None
    ) as cluster:
        address = cluster.scheduler_address
        with pytest.raises(DataPrepError, match=f"^--dask_client_address {address}: the Dask scheduler answered but"):
            run(settings, ["--runner", "DaskRunner", f"--dask_client_address={address}"])
    assert not (tmp_path / "out").exists()
