"""Training on Keras' JAX backend: the TensorFlow loop's numbers, resume, devices, exports, attention, fine-tuning.

Keras picks its backend once per process, so every JAX run is a process of its own.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from command_helpers import run_command
from paths import REPO
from pretraining_helpers import cli, common_args, final_weights, latest_checkpoint_step

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
    """One fresh model for both backends (their initializers draw different numbers from one seed)."""
    from albert_tf import AlbertBackbone, AlbertPretrainer, formats

    directory = tmp_path_factory.mktemp("initial") / "model"
    formats.save(AlbertPretrainer(AlbertBackbone.from_albert_config(pretraining_data["config"])), str(directory))
    return str(directory)


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
        """Stops the run as soon as its checkpoint state names `step` or later, then sends the signal."""
        victim = cli(["--backend", "jax"] + args)
        deadline = time.time() + 300
        while latest_checkpoint_step(run_dir / "checkpoints") < step:
            assert victim.poll() is None, victim.communicate()[1][-3000:]
            assert time.time() < deadline
            time.sleep(0.01)
        victim.send_signal(signal.SIGSTOP)  # steps take milliseconds: hold it before it reaches the end
        victim.send_signal(signal_number)
        victim.send_signal(signal.SIGCONT)
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
    args = [arg.replace(str(reference_dir), str(run_dir)) for arg in args]
    args = [arg for arg in args if not arg.startswith("--num_train_steps")] + ["--num_train_steps=25"]
    result = run_command("albert_tf.run_pretraining", args)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {run_dir} was trained on Keras' jax backend (now tensorflow): its checkpoints hold that "
        "backend's state; resume with --backend jax, or use a new --output_dir"
    )
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == before


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


ATTENTION = textwrap.dedent("""
    import numpy as np
    import jax, keras
    from albert_tf import AlbertBackbone, AlbertPretrainer
    from albert_tf.layers.attention import AlbertAttention
    from albert_tf.pretraining.objective import pretraining_loss
    assert keras.backend.backend() == "jax"
    rng = np.random.default_rng(1)
    model = AlbertPretrainer(AlbertBackbone.from_albert_config("configs/albert_tiny.json"))
    mask = np.ones((3, 16), "int32")
    mask[1, 9:] = 0
    mask[2, 1:] = 0
    features = {
        "input_ids": rng.integers(5, 8000, (3, 16)).astype("int32") * mask,
        "input_mask": mask,
        "segment_ids": np.zeros((3, 16), "int32"),
        "masked_lm_positions": np.array([[1, 3], [2, 8], [0, 0]], "int32"),
        "masked_lm_ids": rng.integers(5, 8000, (3, 2)).astype("int32"),
        "masked_lm_weights": np.ones((3, 2), "float32"),
        "next_sentence_labels": np.array([[0], [1], [0]], "int32"),
    }
    names = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
    attention = [layer for layer in model._flatten_layers() if isinstance(layer, AlbertAttention)]
    results = {}
    for kernel in ("einsum", "xla"):
        for layer in attention:
            layer.attention_kernel = kernel
        def loss(trainable):
            out, _ = model.stateless_call(
                trainable, [v.value for v in model.non_trainable_variables], {k: features[k] for k in names}
            )
            return pretraining_loss(out, features), out
        (value, out), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(
            [v.value for v in model.trainable_variables]
        )
        text = jax.jit(loss).lower([v.value for v in model.trainable_variables]).as_text()
        results[kernel] = (out, grads, text)
    (out, grads, einsum_text), (xla_out, xla_grads, xla_text) = results["einsum"], results["xla"]
    for key in out:
        np.testing.assert_allclose(np.asarray(xla_out[key]), np.asarray(out[key]), atol=2e-5, rtol=0)
    for a, b in zip(xla_grads, grads):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=2e-5, rtol=1e-4)
    assert einsum_text != xla_text  # the two kernels really are two programs
    print("OK")
""")


@pytest.mark.slow
def test_sequence_length_attention_equals_the_einsum_path():
    result = subprocess.run(
        [sys.executable, "-c", ATTENTION],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0 and result.stdout.strip().endswith("OK"), result.stderr[-3000:]


def gpu_present() -> bool:
    return shutil.which("nvidia-smi") is not None


@pytest.mark.slow
@pytest.mark.skipif(not gpu_present(), reason="no NVIDIA GPU: cuDNN's fused attention exists only there")
def test_compiled_step_on_a_gpu_calls_cudnn_attention():
    result = subprocess.run(
        [
            sys.executable,
            "bench/gpu_jax.py",
            "--require_cudnn",
            "--cases",
            "ours",
            "--shapes",
            "8x128",
            "--rounds",
            "1",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]


@pytest.mark.slow
def test_gpu_benchmark_smoke_runs_every_case_on_cpu():
    result = subprocess.run(
        # ours_einsum is ours with one attribute set: on a CPU the same step.
        [sys.executable, "bench/gpu_jax.py", "--smoke", "--rounds", "1", "--cases", "ours,keras_hub,hf_compile"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    report = json.loads(result.stdout)["shapes"]["2x32"]
    assert set(report["summary"]) == {"ours", "keras_hub", "hf_compile"}
    assert report["summary"]["ours"]["attention"] == "einsum"  # a CPU has no fused attention
    assert report["ratios"]["ours/hf_compile"] > 0


@pytest.mark.realdata
@pytest.mark.slow
def test_fine_tuning_on_jax_writes_a_model_tensorflow_scores_the_same(real_data, pretrained_tiny, tmp_path):
    # STS-B: a regression's predictions are real numbers, so the comparison sees every row's output.
    data_dir = tmp_path / "glue"
    (data_dir / "STS-B").mkdir(parents=True)
    for split, rows in (("train", 64), ("dev", 80)):
        lines = (real_data / "glue" / "STS-B" / f"{split}.tsv").read_text().splitlines(keepends=True)
        (data_dir / "STS-B" / f"{split}.tsv").write_text("".join(lines[: rows + 1]))
    output_dir = tmp_path / "out"
    args = ["--task_name=sts-b", f"--data_dir={data_dir}", f"--output_dir={output_dir}", "--max_seq_length=32"]
    trained = subprocess.run(
        [sys.executable, "-m", "albert_tf.run_classifier", "--backend=jax", *args]
        + [f"--init_checkpoint={pretrained_tiny}", "--train_batch_size=16", "--train_step=2"]
        + ["--save_checkpoints_steps=2", "--do_train", "--do_eval"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    on_jax = json.loads((output_dir / "summary.json").read_text())
    jax_rows = (output_dir / "dev_predictions.tsv").read_text().splitlines()

    scored = run_command("albert_tf.run_classifier", [*args, "--nodo_train", "--do_eval"])
    assert scored.returncode == 0, scored.stderr[-3000:]
    on_tensorflow = json.loads((output_dir / "summary.json").read_text())
    tf_rows = (output_dir / "dev_predictions.tsv").read_text().splitlines()
    assert [row.split("\t")[0] for row in jax_rows] == [row.split("\t")[0] for row in tf_rows]
    assert len(tf_rows) == 81 and len({row.split("\t")[1] for row in tf_rows[1:]}) > 70  # real numbers, varied
    np.testing.assert_allclose(
        [float(row.split("\t")[1]) for row in jax_rows[1:]],
        [float(row.split("\t")[1]) for row in tf_rows[1:]],
        rtol=0,
        atol=1e-5,
    )
    for key in ("pearson", "spearman", "mse"):
        np.testing.assert_allclose(on_jax["eval"][key], on_tensorflow["eval"][key], rtol=0, atol=1e-5, err_msg=key)


def test_backend_mistakes_are_one_line_before_any_work(tmp_path):
    from albert_tf.pretraining.loop import check_eval_batch
    from albert_tf.pretraining.settings import TrainingError, TrainSettings
    from albert_tf.pretraining.strategy import jax_devices

    # This process runs Keras on TensorFlow: --backend jax cannot take effect here, and says so.
    result = run_command("albert_tf.run_pretraining", ["--backend=jax", f"--output_dir={tmp_path / 'run'}"])
    assert result.returncode == 1
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("error: --backend jax: Keras runs on tensorflow in this process")
    )
    assert not (tmp_path / "run").exists()
    for name in ("multi_worker", "tpu"):
        with pytest.raises(TrainingError, match=f"--strategy {name} is a tf.distribute strategy; on Keras' JAX"):
            jax_devices(name)
    # Checked before the output directory exists: the eval batch is split over the devices.
    settings = TrainSettings(output_dir=str(tmp_path / "run"), eval_batch_size=25)
    with pytest.raises(TrainingError, match=r"--eval_batch_size 25 must divide by the replicas \(2\)"):
        check_eval_batch(settings, 2)
