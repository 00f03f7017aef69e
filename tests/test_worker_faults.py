"""Multi-worker pretraining when a worker dies: the other stops in bounded time naming it, a restart of
both resumes to an uninterrupted run's weights; and each example of an epoch goes to exactly one worker."""

import collections
import contextlib
import hashlib
import json
import os
import signal
import socket
import threading
import time
import types

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.compute.tf_compute import TensorFlowCompute
from albert_tf.inputs.shard_reader import pretraining_dataset, resolve_input
from albert_tf.pretraining import worker_faults

from pretraining_helpers import cli, common_args, final_weights, free_ports, latest_checkpoint_step

pytestmark = pytest.mark.realdata


def example_digests(dataset, count):
    """sha256 of each of the first `count` examples (batches of 1) of `dataset`."""
    digests = []
    for inputs, labels in dataset.take(count):
        digest = hashlib.sha256()
        for part in (inputs, labels):
            for key in sorted(part):
                digest.update(part[key].numpy().tobytes())
        digests.append(digest.hexdigest())
    return digests


@pytest.mark.parametrize("shards", [2, 1])  # 2 files: one per worker; 1 file: split by record
def test_each_example_of_an_epoch_is_read_by_exactly_one_worker(pretraining_data, shards):
    data_dir = pretraining_data["data"]
    metadata = json.loads(open(f"{data_dir}/metadata.json").read())
    names = sorted(metadata["shards"])[:shards]
    source = resolve_input(",".join(f"{data_dir}/{name}" for name in names))
    records = {name: metadata["shards"][name] for name in names}
    # Every example once, in file order: the epoch.
    epoch = collections.Counter(
        example_digests(pretraining_dataset(source, 1, is_training=False), sum(records.values()))
    )
    assert sum(epoch.values()) == len(epoch) > 300
    read, shares = collections.Counter(), []
    for worker in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=worker, num_replicas_in_sync=2)
        share = records[names[worker]] if shards == 2 else (len(epoch) - worker + 1) // 2
        # shuffle_buffer 1: the epoch ends where the next begins, so one epoch is exactly `share` examples.
        digests = example_digests(pretraining_dataset(source, 1, input_context=context, shuffle_buffer=1), share)
        shares.append(set(digests))
        read.update(digests)
    assert read == epoch  # every example of the epoch read once, by one worker or the other
    assert not shares[0] & shares[1]


def cluster_of(ports):
    return {"worker": [f"127.0.0.1:{p}" for p in ports]}


def start_workers(args, cluster):
    return [
        cli(args, env={"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})})
        for i in range(2)
    ]


@contextlib.contextmanager
def all_stopped(processes):
    """Kills whatever the test leaves running (a failed assertion)."""
    try:
        yield processes
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()


def run_until_checkpoint(args, cluster, checkpoints, step, signum):
    """Starts both workers, sends `signum` to worker 1 once a checkpoint ≥ `step` is named; their stderr."""
    with all_stopped(start_workers(args, cluster)) as workers:
        deadline = time.time() + 300
        while latest_checkpoint_step(checkpoints) < step:
            assert all(w.poll() is None for w in workers), [w.communicate()[1][-2000:] for w in workers]
            assert time.time() < deadline
            time.sleep(0.05)
        workers[1].send_signal(signum)
        # Bounded: TensorFlow notices missed heartbeats within seconds (the watchdog would after 300 s).
        errs = [w.communicate(timeout=400)[1] for w in workers]
    return [w.returncode for w in workers], errs


def error_lines(err):
    assert "Traceback" not in err, err[-3000:]
    return [line for line in err.splitlines() if line.startswith("error:")]


@pytest.mark.slow
def test_a_killed_or_preempted_worker_stops_the_run_and_a_restart_resumes_to_the_same_weights(
    pretraining_data, tmp_path
):
    from albert_tf.preemption import PREEMPTED_EXIT_STATUS

    steps = 20

    def args(name):
        return common_args(
            pretraining_data, str(tmp_path / name), steps, strategy="multi_worker", deterministic=False
        ) + ["--worker_timeout_seconds=300"]

    with all_stopped(start_workers(args("reference"), cluster_of(free_ports(2)))) as workers:
        results = [w.communicate(timeout=600) for w in workers]
    assert [w.returncode for w in workers] == [0, 0], results[0][1][-3000:] + results[1][1][-3000:]
    expected = final_weights(tmp_path / "reference")
    # The uninterrupted run: both workers end with identical weights (each prints its summary JSON last,
    # the chief after its progress output), two replicas, no worker's scratch left.
    fingerprints = [json.loads(out[("\n" + out).rindex("\n{") :])["weights_sha256"] for out, _ in results]
    assert fingerprints[0] == fingerprints[1]
    summary = json.loads((tmp_path / "reference" / "train_summary.json").read_text())
    assert summary["end_step"] == steps and summary["replicas"] == 2
    assert not [p for p in os.listdir(tmp_path / "reference") if p.startswith(".worker")]

    for signum in (signal.SIGKILL, signal.SIGTERM):
        name = signum.name
        cluster = cluster_of(free_ports(2))
        checkpoints = tmp_path / name / "checkpoints"
        statuses, errs = run_until_checkpoint(args(name), cluster, checkpoints, 5, signum)
        stopped_at = latest_checkpoint_step(checkpoints)
        if signum == signal.SIGKILL:  # the survivor names the lost worker
            assert statuses == [1, -signal.SIGKILL], errs[0][-3000:]
            (line,) = error_lines(errs[0])
            assert line.startswith(f"error: worker 1 ({cluster['worker'][1]}) is "), line
            assert line.endswith(
                f"the last checkpoint is {checkpoints / f'ckpt-{stopped_at}'}; restart every worker with the same "
                "command to resume from it"
            )
        else:  # both save the same step together and stop
            assert statuses == [PREEMPTED_EXIT_STATUS] * 2, errs
            saved = f"checkpoint of step {stopped_at} saved in {checkpoints}; run the same command again"
            assert error_lines(errs[0]) == [f"error: stopped by a signal on another worker: {saved} to resume"]
            assert error_lines(errs[1]) == [f"error: stopped by SIGTERM: {saved} to resume"]

        with all_stopped(start_workers(args(name), cluster)) as workers:
            results = [w.communicate(timeout=600) for w in workers]
        assert [w.returncode for w in workers] == [0, 0], results[0][1][-3000:] + results[1][1][-3000:]
        summary = json.loads((tmp_path / name / "train_summary.json").read_text())
        assert summary["start_step"] == stopped_at >= 5 and summary["end_step"] == steps
        for a, b in zip(expected, final_weights(tmp_path / name)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_the_watchdog_ends_a_stuck_run_naming_the_unreachable_worker(capsys):
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    gone = socket.socket()
    gone.bind(("127.0.0.1", 0))
    gone_address = f"127.0.0.1:{gone.getsockname()[1]}"
    gone.close()  # nothing listens there: a dead worker's address
    cluster = tf.train.ClusterSpec({"worker": [f"127.0.0.1:{listening.getsockname()[1]}", gone_address]})
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, task_type="worker", task_id=0)
    compute = TensorFlowCompute(types.SimpleNamespace(cluster_resolver=resolver, num_replicas_in_sync=2))
    exited = threading.Event()
    statuses = []

    def fake_exit(status):
        statuses.append(status)
        exited.set()

    try:
        with worker_faults.StepWatchdog(compute, 0.5, lambda: "ckpt-7", exit=fake_exit):
            assert exited.wait(timeout=60)  # no step ever finishes
    finally:
        listening.close()
    assert statuses == [1]
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"error: worker 1 ({gone_address}) is unreachable (no training step finished in ")
    assert line.endswith(
        "--worker_timeout_seconds 0.5); the last checkpoint is ckpt-7; restart every worker "
        "with the same command to resume from it"
    )
