"""run_pretraining on Keras' JAX backend: the TensorFlow loop's numbers, resume, devices, exports, refusals.

Keras picks its backend once per process, so every JAX run is a process of its own.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from command_helpers import run_command
from paths import REPO
from pretraining_helpers import (
    SLOWED_RUN,
    cli,
    common_args,
    final_weights,
    latest_checkpoint_step,
    save_fresh_pretrainer,
)

SEQ = 64


def finished(process, timeout=600):
    stdout, stderr = process.communicate(timeout=timeout)
    return process.returncode, stdout, stderr


def jax_run(args, env=None):
    return finished(cli(["--backend", "jax"] + args, env=env))


def history(output_dir):
    return json.loads((output_dir / "train_summary.json").read_text())["history"]


def assert_same_curve(got, want):
    assert [h["step"] for h in got] == [h["step"] for h in want]
    for key in ("masked_lm_loss", "sentence_order_loss", "masked_lm_accuracy", "sentence_order_accuracy"):
        np.testing.assert_allclose([h[key] for h in got], [h[key] for h in want], rtol=2e-6, atol=1e-6, err_msg=key)


def assert_same_weights(got_dir, want_dir, atol=2e-6):
    for a, b in zip(final_weights(got_dir), final_weights(want_dir)):
        np.testing.assert_allclose(a, b, rtol=0, atol=atol)


@pytest.fixture(scope="module")
def initial_model(tmp_path_factory, pretraining_data):
    return save_fresh_pretrainer(tmp_path_factory.mktemp("initial") / "model", pretraining_data["config"])


@pytest.mark.realdata
@pytest.mark.slow
def test_steps_equal_the_tensorflow_loop_with_accumulation(pretraining_data, initial_model, tmp_path):
    extra = dict(log_every_steps=1, init_checkpoint=initial_model, grad_accum_steps=2)
    tensorflow = run_command(
        "albert_tf.run_pretraining", common_args(pretraining_data, str(tmp_path / "tf"), 4, **extra)
    )
    assert tensorflow.returncode == 0, tensorflow.stderr[-3000:]
    code, _, stderr = jax_run(common_args(pretraining_data, str(tmp_path / "jax"), 4, **extra))
    assert code == 0, stderr[-3000:]
    assert_same_curve(history(tmp_path / "jax"), history(tmp_path / "tf"))
    assert_same_weights(tmp_path / "jax", tmp_path / "tf")
    record = json.loads((tmp_path / "jax" / "settings.json").read_text())
    assert record["flags"]["backend"] == "jax"


@pytest.fixture(scope="module")
def jax_reference(tmp_path_factory, pretraining_data, initial_model):
    """An uninterrupted JAX run of 20 steps with eval and the SavedModels: (args, output dir)."""
    output_dir = tmp_path_factory.mktemp("jax_reference") / "run"
    args = common_args(
        pretraining_data, str(output_dir), 20, init_checkpoint=initial_model, do_eval=True, max_eval_steps=2
    )
    code, _, stderr = jax_run(args + ["--export"])
    assert code == 0, stderr[-3000:]
    return args, output_dir


@pytest.mark.realdata
@pytest.mark.slow
def test_stopped_killed_and_resumed_on_two_devices_the_run_continues_the_same_curve(jax_reference, tmp_path):
    """SIGTERM (exit 75), then SIGKILL, then the same command on two devices: the uninterrupted run's curve."""
    args, reference_dir = jax_reference
    run_dir = tmp_path / "interrupted"
    args = [arg.replace(str(reference_dir), str(run_dir)) for arg in args]

    def interrupt_after(step, signal_number):
        """Signals the run once its checkpoint state names `step` or later (its steps slowed to >= 0.2 s, so
        it is still running then however busy the machine: the signal lands steps before its last)."""
        victim = subprocess.Popen(
            [sys.executable, "-c", SLOWED_RUN, "--backend", "jax", *args],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        )
        deadline = time.time() + 300
        while latest_checkpoint_step(run_dir / "checkpoints") < step:
            assert victim.poll() is None, victim.communicate()[1][-3000:]
            assert time.time() < deadline
            time.sleep(0.05)
        victim.send_signal(signal_number)
        return finished(victim)

    code, _, stderr = interrupt_after(5, signal.SIGTERM)
    assert code == 75, stderr[-3000:]
    assert "checkpoint of step" in stderr and "run the same command again" in stderr
    code, _, stderr = interrupt_after(latest_checkpoint_step(run_dir / "checkpoints") + 1, signal.SIGKILL)
    assert code == -signal.SIGKILL and not (run_dir / "final").exists()
    killed_at = latest_checkpoint_step(run_dir / "checkpoints")

    # The checkpoint holds the global batch's position: the run may go on over more devices.
    code, stdout, stderr = jax_run(args, env={"XLA_FLAGS": "--xla_force_host_platform_device_count=2"})
    assert code == 0, stderr[-3000:]
    assert f"resumed from {run_dir / 'checkpoints' / f'ckpt-{killed_at}'}" in stdout
    summary = json.loads((run_dir / "train_summary.json").read_text())
    reference = json.loads((reference_dir / "train_summary.json").read_text())
    assert summary["start_step"] == killed_at and summary["end_step"] == 20
    assert summary["replicas"] == 2 and reference["replicas"] == 1
    assert_same_curve(summary["history"], [h for h in reference["history"] if h["step"] > killed_at])
    for key in ("masked_lm_accuracy", "sentence_order_accuracy", "loss"):
        np.testing.assert_allclose(summary["eval"][key], reference["eval"][key], rtol=2e-6)
    assert_same_weights(run_dir, reference_dir)


@pytest.mark.realdata
@pytest.mark.slow
def test_resuming_on_the_other_backend_is_refused_and_changes_nothing(jax_reference, tmp_path):
    args, reference_dir = jax_reference
    run_dir = tmp_path / "copy"
    shutil.copytree(reference_dir, run_dir)
    before = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    record = (run_dir / "settings.json").read_bytes()  # the JAX run's record (hardening V: it was rewritten)
    args = [arg.replace(str(reference_dir), str(run_dir)) for arg in args]
    args = [arg for arg in args if not arg.startswith("--num_train_steps")] + ["--num_train_steps=25"]
    result = run_command("albert_tf.run_pretraining", args)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {run_dir} was trained on Keras' jax backend (now tensorflow): its checkpoints hold that "
        "backend's state; resume with --backend jax, or use a new --output_dir"
    )
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == before
    assert (run_dir / "settings.json").read_bytes() == record
    # Evaluating its checkpoints is refused alike (the other backend's checkpoint objects would not match).
    evaluated = run_command("albert_tf.run_pretraining", args + ["--nodo_train"])
    assert evaluated.returncode == 1
    assert evaluated.stderr.strip().splitlines()[-1].startswith(f"error: {run_dir} was trained on Keras' jax backend")


@pytest.mark.realdata
@pytest.mark.slow
def test_jax_trained_model_exports_and_answers_as_its_keras_model(jax_reference, tmp_path):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)

    from albert_tf import formats
    from albert_tf.export.tflite import run_tflite

    _, run_dir = jax_reference
    model = formats.load(str(run_dir / "final")).model
    rng = np.random.default_rng(0)
    mask = np.ones((2, 12), "int32")
    mask[1, 7:] = 0
    inputs = {
        "input_ids": rng.integers(5, 4000, (2, 12)).astype("int32") * mask,
        "input_mask": mask,
        "segment_ids": np.zeros((2, 12), "int32"),
        "masked_lm_positions": np.array([[1, 3], [2, 5]], "int32"),
    }
    expected = {k: np.asarray(v) for k, v in model(inputs).items()}
    served = tf.saved_model.load(str(run_dir / "saved_model" / "pretrainer" / "20")).signatures["serving_default"]
    got = served(**{k: tf.constant(v) for k, v in inputs.items()})
    for key in ("mlm_logits", "sop_logits"):
        np.testing.assert_allclose(got[key].numpy(), expected[key], atol=1e-4, rtol=0)

    tflite = run_command(
        "albert_tf.export", ["--model_dir", str(run_dir), "--format", "tflite", "--output_dir", str(tmp_path)]
    )
    assert tflite.returncode == 0, tflite.stderr[-3000:]
    (path,) = [os.path.join(tmp_path, name) for name in os.listdir(tmp_path) if name.endswith(".tflite")]
    for row, length in enumerate((12, 7)):  # the file takes one text a row, at its own length
        row_inputs = {
            k: v[row : row + 1] if k == "masked_lm_positions" else v[row : row + 1, :length] for k, v in inputs.items()
        }
        got = run_tflite(path, row_inputs)
        for key in ("mlm_logits", "sop_logits"):
            np.testing.assert_allclose(got[key], expected[key][row : row + 1], atol=1e-4, rtol=0, err_msg=key)


def test_backend_mistakes_are_one_line_before_any_work(tmp_path, monkeypatch):
    from albert_tf.distribution import DistributionError, Processes, jax_devices
    from albert_tf.pretraining.loop import check_eval_batch
    from albert_tf.pretraining.settings import PretrainingError, PretrainSettings

    # This process runs Keras on TensorFlow: --backend jax cannot take effect here, and says so.
    given = ["--backend=jax", f"--output_dir={tmp_path / 'run'}", "--input_file=data", "--albert_config_file=c.json"]
    result = run_command("albert_tf.run_pretraining", given)
    assert result.returncode == 1
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("error: --backend jax: Keras runs on tensorflow in this process")
    )
    assert not (tmp_path / "run").exists()
    # Where JAX is not installed (the package without its `jax` extra).
    from albert_tf.cli import backend

    monkeypatch.setattr(backend, "installed", lambda name: name != "jax")
    result = run_command("albert_tf.run_pretraining", given)
    assert result.returncode == 1 and not (tmp_path / "run").exists()
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("error: --backend jax: jax is not installed (pip install 'albert_tf[jax]'")
    )
    with pytest.raises(DistributionError, match="--strategy tpu is TensorFlow's; on Keras' JAX backend"):
        jax_devices("tpu", Processes())  # multi_worker: tests/test_jax_processes.py
    # Checked before the output directory exists: the eval batch is split over the devices.
    settings = PretrainSettings(output_dir=str(tmp_path / "run"), eval_batch_size=25)
    with pytest.raises(PretrainingError, match=r"--eval_batch_size 25 must divide by the replicas \(2\)"):
        check_eval_batch(settings, 2)


@pytest.mark.slow
def test_export_under_keras_jax_is_one_line_naming_the_backend(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_tf.export",
            "--model_dir",
            str(tmp_path / "m"),
            "--output_dir",
            str(tmp_path / "x"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "error: albert_tf.export writes TensorFlow graphs (SavedModel, TFLite), which needs Keras' TensorFlow "
        "backend, but Keras runs on jax (KERAS_BACKEND='jax'); run it with KERAS_BACKEND=tensorflow"
    )
    assert not (tmp_path / "x").exists()
