"""A preempted run (SIGTERM, Ctrl-C's SIGINT): the current step is saved, the lock released, exit 75,
and the same command resumes to the weights of an uninterrupted run."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from albert_tf import preemption

from command_helpers import run_command
from finetune_helpers import leftovers, stopped_at_exit, wait_for_checkpoint, write_glue_slice
from paths import REPO
from pretraining_helpers import cli, common_args, final_weights, latest_checkpoint_step


def test_stop_signals_defer_the_first_signal_and_restore_the_handlers():
    before = signal.getsignal(signal.SIGTERM)
    with preemption.stop_signals():
        assert not preemption.requested()
        os.kill(os.getpid(), signal.SIGTERM)  # would end pytest without the handler
        assert preemption.requested()
        with pytest.raises(preemption.Preempted, match="stopped by SIGTERM: what is kept; run the same command"):
            preemption.raise_if_requested("what is kept")
        # A second signal is not deferred: Ctrl-C twice interrupts at once.
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # the signal is delivered between two bytecodes, long before this ends
    assert not preemption.requested()
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.realdata
@pytest.mark.slow
def test_sigterm_and_sigint_save_the_current_step_and_the_same_command_resumes(pretraining_data, tmp_path):
    steps = 30
    # The runs no signal stops run in this process; each victim must be a process of its own.
    reference_args = common_args(pretraining_data, str(tmp_path / "reference"), steps, save_checkpoints_steps=10)
    reference = run_command("albert_tf.run_pretraining", reference_args)
    assert reference.returncode == 0, reference.stderr[-3000:]
    expected = final_weights(tmp_path / "reference")

    for sig in (signal.SIGTERM, signal.SIGINT):
        output_dir = tmp_path / sig.name
        args = common_args(pretraining_data, str(output_dir), steps, save_checkpoints_steps=10)
        with stopped_at_exit(cli(args)) as victim:
            # Past the first scheduled checkpoint, the signal lands between two scheduled saves (or on one).
            wait_for_checkpoint(victim, output_dir / "checkpoints", 10)
            victim.send_signal(sig)
            _, err = victim.communicate(timeout=300)
        assert victim.returncode == preemption.PREEMPTED_EXIT_STATUS, err[-3000:]
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: stopped by {sig.name}: checkpoint of step "), err
        stopped_at = int(lines[0].split("checkpoint of step ")[1].split()[0])
        # The step it was in is saved (not only the last scheduled one), whole, and named in the state.
        assert 10 <= stopped_at < steps and latest_checkpoint_step(output_dir / "checkpoints") == stopped_at
        assert not leftovers(output_dir) and not (output_dir / "final").exists()

        resumed = run_command("albert_tf.run_pretraining", args)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert (
            f"resumed from {output_dir / 'checkpoints' / f'ckpt-{stopped_at}'} at step {stopped_at}" in resumed.stdout
        )
        summary = json.loads((output_dir / "train_summary.json").read_text())
        assert summary["start_step"] == stopped_at and summary["end_step"] == steps
        for a, b in zip(expected, final_weights(output_dir)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        assert not leftovers(output_dir)


@pytest.mark.realdata
@pytest.mark.slow
def test_sigterm_during_fine_tuning_keeps_best_whole_and_a_rerun_must_resume(real_data, pretraining_data, tmp_path):
    from albert_tf.formats import load as load_model

    output_dir = tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "albert_tf.run_classifier",
        "--task_name=sst-2",
        f"--data_dir={write_glue_slice(real_data, tmp_path)}",
        f"--spm_model_file={pretraining_data['spm']}",
        f"--albert_config_file={pretraining_data['config']}",
        f"--output_dir={output_dir}",
        "--do_train",
        "--max_seq_length=32",
        "--train_batch_size=8",
        "--eval_batch_size=40",
        "--save_checkpoints_steps=2",
    ]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    victim = subprocess.Popen(
        command + ["--train_step=100000"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    with stopped_at_exit(victim):
        deadline = time.time() + 300
        while not (output_dir / "best" / "eval_results.json").exists():
            assert victim.poll() is None, victim.communicate()[1][-3000:]
            assert time.time() < deadline
            time.sleep(0.05)
        victim.send_signal(signal.SIGTERM)
        _, err = victim.communicate(timeout=300)
    assert victim.returncode == preemption.PREEMPTED_EXIT_STATUS, err[-3000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: stopped by SIGTERM: checkpoint of step "), err
    assert lines[0].endswith("; run the same command again to resume"), err
    assert not leftovers(output_dir)
    best = json.loads((output_dir / "best" / "eval_results.json").read_text())
    assert load_model(str(output_dir / "best" / "model.keras")).model is not None
    assert f"best/ of step {best['global_step']} " in lines[0]
    kept = (output_dir / "best" / "model.keras").read_bytes()

    # Its checkpoints are bound to its schedule: another --train_step is refused, nothing touched.
    rerun = subprocess.run(command + ["--train_step=4"], cwd=REPO, capture_output=True, text=True, env=env, timeout=600)
    assert rerun.returncode != 0
    assert rerun.stderr.strip().splitlines() == [
        f"error: {output_dir}: the checkpoints in {output_dir / 'checkpoints'} were made with other settings "
        "(train_step 100000 → 4); resume with the same ones, or use a new --output_dir"
    ]
    assert not leftovers(output_dir)
    assert (output_dir / "best" / "model.keras").read_bytes() == kept


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_sigterm_whose_raise_a_gc_callback_swallowed_still_stops_the_publishing(monkeypatch):
    # JAX registers a gc callback; Python ignores what a handler raises inside one, so data_prep once
    # finished and published after the SIGTERM that landed there.
    import gc

    monkeypatch.setattr(preemption, "_terminated", False)
    preemption.check_terminated()  # nothing received: nothing raised

    def collect_during_a_signal(phase, info):
        if phase == "start":
            preemption.raise_terminated(signal.SIGTERM, None)

    gc.callbacks.append(collect_during_a_signal)
    try:
        gc.collect()  # "Exception ignored in ...": the raise is lost here
    finally:
        gc.callbacks.remove(collect_during_a_signal)
    with pytest.raises(preemption.Terminated):
        preemption.check_terminated()


@pytest.mark.slow
@pytest.mark.realdata
def test_sigterm_during_data_prep_releases_the_lock_and_leaves_no_staging(tmp_path, wikitext_spm, real_data):
    from albert_tf.publish import STAGING_PREFIX

    output_dir = tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "data_prep.create_pretraining_data",
        f"--input_file={real_data / 'wikitext2' / 'valid.txt'}",
        "--input_format=wikitext",
        f"--output_dir={output_dir}",
        f"--spm_model_file={wikitext_spm}",
        "--max_seq_length=128",
        "--dupe_factor=40",  # minutes of work: the signal lands mid-job
    ]
    with stopped_at_exit(subprocess.Popen(command, cwd=REPO, stderr=subprocess.PIPE, text=True)) as victim:
        deadline = time.time() + 120
        while not (output_dir.is_dir() and any(p.startswith(STAGING_PREFIX) for p in os.listdir(output_dir))):
            assert victim.poll() is None, victim.communicate()[1][-3000:]
            assert time.time() < deadline
            time.sleep(0.05)
        victim.send_signal(signal.SIGTERM)
        _, err = victim.communicate(timeout=120)
    assert victim.returncode == preemption.TERMINATED_EXIT_STATUS, err[-3000:]
    assert err.strip().splitlines()[-1] == "error: terminated by SIGTERM; nothing half-written is left"
    assert "Traceback" not in err
    # No lock, no staging, no shard: the run created the directory, and an interrupted run leaves no trace.
    assert not output_dir.exists()
