"""A killed (SIGKILL) or preempted (SIGTERM) fine-tuning run: the same command resumes it from its last
checkpoint (step, optimizer, data position, best/) and ends where an uninterrupted run ends."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import preemption

from command_helpers import run_command
from finetune_helpers import leftovers, stopped_at_exit, wait_for_checkpoint, write_glue_slice
from paths import REPO

pytestmark = [pytest.mark.realdata, pytest.mark.slow]

COMMAND = "albert_tf.run_classifier"
TRAIN_STEP = 40
INTERVAL = 4
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def command(real_data, pretraining_data, root, output_dir, *extra):
    data_dir = root / "glue"
    if not data_dir.exists():
        write_glue_slice(real_data, root, train_rows=200, dev_rows=40)
    return [
        "--task_name=sst-2",
        f"--data_dir={data_dir}",
        f"--spm_model_file={pretraining_data['spm']}",
        f"--albert_config_file={pretraining_data['config']}",
        f"--output_dir={output_dir}",
        "--do_train",
        "--max_seq_length=32",
        "--train_batch_size=8",
        "--eval_batch_size=40",
        "--learning_rate=1e-3",
        f"--train_step={TRAIN_STEP}",
        f"--save_checkpoints_steps={INTERVAL}",
        *extra,
    ]


def checkpoint_weights(output_dir, step):
    """Every variable of `checkpoints/ckpt-<step>` (model and optimizer), by name."""
    reader = tf.train.load_checkpoint(str(output_dir / "checkpoints" / f"ckpt-{step}"))
    # save_counter counts saves, not training: a stopped run saved once more (at the signal).
    names = [n for n in reader.get_variable_to_shape_map() if "OBJECT_GRAPH" not in n and "save_counter" not in n]
    return {name: reader.get_tensor(name) for name in names}


def in_a_process(argv):
    """The command as a process of its own. Every run here is one: a signal stops the victim, and the
    runs compared with it must compute as it does (a test process may have TensorFlow's op determinism
    on from an earlier test, and its kernels differ in the last digits)."""
    return [sys.executable, "-m", COMMAND, *argv]


def run_process(argv):
    return subprocess.run(in_a_process(argv), cwd=REPO, capture_output=True, text=True, env=ENV, timeout=600)


@pytest.fixture(scope="module")
def uninterrupted(real_data, pretraining_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("uninterrupted")
    output_dir = root / "out"
    done = run_process(command(real_data, pretraining_data, root, output_dir))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "initialized from scratch (random weights)" in done.stdout
    return output_dir


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_the_same_command_resumes_a_stopped_run_and_ends_as_an_uninterrupted_one(
    real_data, pretraining_data, tmp_path, uninterrupted, stop
):
    output_dir = tmp_path / "out"
    run = command(real_data, pretraining_data, tmp_path, output_dir)
    victim = subprocess.Popen(
        in_a_process(run), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV
    )
    with stopped_at_exit(victim):
        wait_for_checkpoint(victim, output_dir / "checkpoints", INTERVAL)
        victim.send_signal(stop)
        _, err = victim.communicate(timeout=300)
    assert not leftovers(output_dir / "best")
    if stop == signal.SIGTERM:
        assert victim.returncode == preemption.PREEMPTED_EXIT_STATUS, err[-3000:]
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: stopped by SIGTERM: checkpoint of step "), err
        assert lines[0].endswith("run the same command again to resume"), err
    else:
        assert victim.returncode == -signal.SIGKILL
    stopped_at = int(tf.train.latest_checkpoint(str(output_dir / "checkpoints")).rsplit("-", 1)[1])
    assert INTERVAL <= stopped_at < TRAIN_STEP  # else the stop came after the run: nothing to resume
    before = (output_dir / "eval_results.txt").read_text().splitlines()

    again = run_process(run)
    assert again.returncode == 0, again.stderr[-3000:]
    resumed_line = next(line for line in again.stdout.splitlines() if line.startswith("resumed from "))
    assert f"at step {stopped_at}" in resumed_line
    assert "initialized from" not in again.stdout
    after = [json.loads(line) for line in (output_dir / "eval_results.txt").read_text().splitlines()]
    assert (output_dir / "eval_results.txt").read_text().splitlines()[: len(before)] == before  # kept
    resumed = [line["global_step"] for line in after[len(before) :]]
    # The evaluations go on after the checkpoint's step, on the same schedule, to the same last step.
    assert resumed == list(range((stopped_at // INTERVAL + 1) * INTERVAL, TRAIN_STEP + 1, INTERVAL))
    reference = [json.loads(line) for line in (uninterrupted / "eval_results.txt").read_text().splitlines()]
    by_step = {line["global_step"]: line for line in reference}
    for line in after[len(before) :]:
        # Same weights, optimizer state and data position: the same scores as the run never stopped.
        assert line["accuracy"] == pytest.approx(by_step[line["global_step"]]["accuracy"], abs=1e-6)
        if line["global_step"] - INTERVAL >= stopped_at:  # a whole interval trained after the resume
            assert line["train_loss"] == pytest.approx(by_step[line["global_step"]]["train_loss"], rel=1e-4)
    got, want = checkpoint_weights(output_dir, TRAIN_STEP), checkpoint_weights(uninterrupted, TRAIN_STEP)
    assert got.keys() == want.keys() and len(got) > 10
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5, err_msg=name)
    best = json.loads((output_dir / "best" / "eval_results.json").read_text())
    assert best["accuracy"] == max(line["accuracy"] for line in after)


def test_resuming_with_other_settings_is_refused_naming_them(real_data, pretraining_data, tmp_path, uninterrupted):
    import shutil

    output_dir = tmp_path / "out"
    shutil.copytree(uninterrupted, output_dir)
    kept = (output_dir / "best" / "model.keras").read_bytes()
    other = command(real_data, pretraining_data, tmp_path, output_dir, "--seed=7", "--train_batch_size=16")
    refused = run_command(COMMAND, other)
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines() == [
        f"error: {output_dir}: the checkpoints in {output_dir / 'checkpoints'} were made with other settings "
        "(train_batch_size 8 → 16, seed 12345 → 7); resume with the same ones, or use a new --output_dir"
    ]
    assert (output_dir / "best" / "model.keras").read_bytes() == kept
    # The same command after the run ended: nothing to train; best/ evaluated as before.
    same = run_command(COMMAND, command(real_data, pretraining_data, tmp_path, output_dir))
    assert same.returncode == 0, same.stderr[-3000:]
    assert f"already at step {TRAIN_STEP} (of --train_step {TRAIN_STEP}): nothing to train" in same.stdout
    assert (output_dir / "best" / "model.keras").read_bytes() == kept
