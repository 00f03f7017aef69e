"""run_pretraining over several JAX processes (`--strategy multi_worker`): local CPU processes on 127.0.0.1.

N processes train what one process trains (each reads the global batch and feeds its own devices); the
chief writes the checkpoints; a process killed mid-run ends the other with one line naming it; the same
commands again resume to the uninterrupted run's weights.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from albert_tf.distribution import DistributionError, Processes

from paths import REPO
from pretraining_helpers import (
    SLOWED_RUN,
    common_args,
    final_weights,
    free_ports,
    latest_checkpoint_step,
    save_fresh_pretrainer,
)

STEPS = 20


def launch(args, slowed=False):
    program = ["-c", SLOWED_RUN] if slowed else ["-m", "albert_tf.run_pretraining"]
    return subprocess.Popen(
        [sys.executable, *program, "--backend", "jax", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )


def processes_args(args, count=2):
    (port,) = free_ports(1)
    shared = ["--strategy", "multi_worker", f"--coordinator_address=127.0.0.1:{port}", f"--num_processes={count}"]
    return [args + shared + [f"--process_id={index}"] for index in range(count)]


def finish(processes, timeout=600):
    outputs = [p.communicate(timeout=timeout) for p in processes]
    return [(p.returncode, *output) for p, output in zip(processes, outputs)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory, pretraining_data):
    """One JAX process, uninterrupted: (its args, output dir)."""
    root = tmp_path_factory.mktemp("jax_processes")
    initial = save_fresh_pretrainer(root / "initial", pretraining_data["config"])
    output_dir = root / "one"
    args = common_args(pretraining_data, str(output_dir), STEPS, init_checkpoint=initial, deterministic=False)
    ((code, _, stderr),) = finish([launch(args)])
    assert code == 0, stderr[-3000:]
    return args, output_dir


def interrupt_after(args, run_dir, step, signal_number):
    """Two slowed processes; process 1 gets `signal_number` once a checkpoint of `step` or later exists.
    Returns both processes' (code, stdout, stderr) and the seconds process 0 took to end after the signal."""
    processes = [launch(a, slowed=True) for a in processes_args(args)]
    deadline = time.time() + 300
    while latest_checkpoint_step(run_dir / "checkpoints") < step:
        assert all(p.poll() is None for p in processes), [p.communicate()[1][-2000:] for p in processes]
        assert time.time() < deadline
        time.sleep(0.05)
    processes[1].send_signal(signal_number)
    signalled_at = time.monotonic()
    first = finish(processes[:1], timeout=240)
    return first + finish(processes[1:]), time.monotonic() - signalled_at


def log_tail(stderr, lines=25):
    """The end of a log without the C++ stack frames and module lists an abort prints."""
    kept = [line[:300] for line in stderr.splitlines() if not line.startswith(("    @", "Extension modules"))]
    return "\n".join(kept[-lines:])


def last_line(stderr):
    return [line for line in stderr.splitlines() if line.strip()][-1]


@pytest.mark.realdata
@pytest.mark.slow
def test_two_processes_train_as_one_stop_together_name_a_lost_one_and_resume(reference, tmp_path):
    args, reference_dir = reference
    run_dir = tmp_path / "two"
    args = [arg.replace(str(reference_dir), str(run_dir)) for arg in args]

    # SIGTERM on process 1: both save the same step and exit 75.
    results, _ = interrupt_after(args, run_dir, 5, signal.SIGTERM)
    for code, _, stderr in results:
        assert code == 75, stderr[-3000:]
    termed_at = latest_checkpoint_step(run_dir / "checkpoints")
    assert f"checkpoint of step {termed_at} saved" in results[0][2]
    assert "stopped by a signal on another worker" in last_line(results[0][2])
    assert "stopped by SIGTERM" in last_line(results[1][2])

    # SIGKILL on process 1: process 0 stops with one line naming it, within JAX's heartbeat at most.
    results, seconds = interrupt_after(args, run_dir, termed_at + 1, signal.SIGKILL)
    code, _, stderr = results[0]
    assert seconds < 120
    assert code == 1, log_tail(stderr)
    assert last_line(stderr).startswith("error: process 1 (") and " is gone (" in last_line(stderr), stderr[-3000:]
    assert "restart every worker with the same command" in last_line(stderr)
    assert "Traceback" not in stderr
    assert results[1][0] == -signal.SIGKILL and not (run_dir / "final").exists()
    stopped_at = latest_checkpoint_step(run_dir / "checkpoints")
    assert termed_at < stopped_at < STEPS

    # The same two commands: resumed on both, to the one-process run's losses and weights.
    results = finish([launch(a) for a in processes_args(args)])
    for code, _, stderr in results:
        assert code == 0, stderr[-3000:]
    assert f"resumed from {run_dir / 'checkpoints' / f'ckpt-{stopped_at}'}" in results[0][1]
    assert "resumed from" not in results[1][1]  # the other processes print nothing of their own
    summary = json.loads((run_dir / "train_summary.json").read_text())
    assert summary["processes"] == 2 and summary["replicas"] == 2 and summary["end_step"] == STEPS
    reference_summary = json.loads((reference_dir / "train_summary.json").read_text())
    got = {h["step"]: h for h in summary["history"]}
    for want in reference_summary["history"]:
        if want["step"] > stopped_at:  # the logging windows after the checkpoint (5 steps, as the saves)
            np.testing.assert_allclose(got[want["step"]]["loss"], want["loss"], rtol=1e-5)
    for a, b in zip(final_weights(run_dir), final_weights(reference_dir)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)
    record = json.loads((run_dir / "settings.json").read_text())
    assert record["flags"]["num_processes"] == 2 and record["flags"]["process_id"] == 0
    assert record["processes"] == {"processes": 2, "process_id": 0, "devices": 2, "local_devices": 1}


@pytest.mark.parametrize(
    "processes, named",
    [
        (Processes("127.0.0.1:1234", 2, None), "--process_id missing"),
        (Processes(None, 2, 0), "--coordinator_address missing"),
        (Processes("127.0.0.1", 2, 0), "--coordinator_address must be HOST:PORT"),
        (Processes("127.0.0.1:99999", 2, 0), "--coordinator_address must be HOST:PORT"),
        (Processes("127.0.0.1:1234", 0, 0), "--num_processes must be ≥ 1"),
        (Processes("127.0.0.1:1234", 2, 2), "--process_id must be from 0 to --num_processes - 1 (1)"),
    ],
)
def test_process_flags_are_checked_together_naming_the_flag(processes, named):
    with pytest.raises(DistributionError, match=re.escape(named)):
        processes.check()
    Processes().check()  # none: JAX detects the cluster
    Processes("node0:9876", 4, 3).check()


def test_jax_process_mistakes_are_one_line_before_any_data_is_read(tmp_path):
    """No cluster to detect, an absent process 0, process flags without multi_worker, TensorFlow's tpu."""
    base = ["--backend=jax", f"--input_file={tmp_path / 'no-data'}", f"--output_dir={tmp_path / 'run'}"]
    base += ["--albert_config_file=configs/albert_tiny.json"]
    cases = {
        "no cluster detected": ["--strategy=multi_worker"],
        "--num_processes": ["--num_processes=2"],
        "a pod's hosts are processes": ["--strategy=tpu"],
    }
    for expected, extra in cases.items():
        ((code, _, stderr),) = finish([launch(base + extra)])
        assert code == 1 and len(stderr.strip().splitlines()) == 1, stderr[-2000:]
        assert stderr.startswith("error: ") and expected in stderr, stderr


def test_an_absent_process_0_is_one_line_after_the_wait():
    from albert_tf import distribution

    (port,) = free_ports(1)
    said = []
    with pytest.raises(DistributionError, match=f"127.0.0.1:{port}: process 0 did not answer in 1 s"):
        distribution.wait_for_coordinator(f"127.0.0.1:{port}", 1, said.append)
    assert said == [f"waiting up to 1 s for process 0 at 127.0.0.1:{port}"]


class TwoProcesses:
    """What `JaxCompute` asks of `distribution.JaxDevices` on process 0 of two, one device each."""

    num_replicas_in_sync = 2
    num_processes = 2
    process_id = 0
    chief = True

    def any_process(self, flag):
        return flag

    def describe(self):
        return {"processes": 2, "process_id": 0, "devices": 2, "local_devices": 1}


@pytest.mark.realdata
def test_the_dry_run_shows_the_processes_and_each_ones_rows(pretraining_data, tmp_path):
    from albert_tf.compute.jax_compute import JaxCompute
    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import PretrainSettings

    settings = PretrainSettings(
        output_dir=str(tmp_path / "run"),
        input_file=pretraining_data["data"],
        albert_config_file=pretraining_data["config"],
        train_batch_size=16,
        dry_run=True,
    )
    plan = pretrain(settings, JaxCompute(TwoProcesses()))
    assert plan["processes"] == {
        "processes": 2,
        "process_id": 0,
        "devices": 2,
        "local_devices": 1,
        "rows_per_process": 8,
        "rows_per_device": 8,
    }
    assert plan["batch"]["replicas"] == 2 and not (tmp_path / "run").exists()
