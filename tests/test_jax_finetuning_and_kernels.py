"""Keras' JAX backend beyond the pretraining loop: the attention kernels, the GPU benchmark, fine-tuning.

Keras picks its backend once per process, so everything on JAX runs in a process of its own.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from command_helpers import run_command
from paths import REPO

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
    from albert_tf.pretraining.jax_step import JaxTrainStep  # noqa: F401
    import sys
    assert "tensorflow" not in sys.modules  # the GPU benchmark runs the step where there is no TensorFlow
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
@pytest.mark.skipif(not gpu_present(), reason="no NVIDIA GPU: cuDNN's fused attention exists only there")
def test_cudnn_attention_is_as_close_to_float32_as_the_einsum_path():
    result = subprocess.run([sys.executable, "bench/gpu_attention_check.py"], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]


@pytest.mark.slow
def test_attention_check_smoke_compares_each_layout_against_float32():
    result = subprocess.run(
        [sys.executable, "bench/gpu_attention_check.py", "--smoke"], capture_output=True, text=True, cwd=REPO
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    report = json.loads(result.stdout)
    for layout in ("one_a_row", "packed_3"):
        errors = report[layout]["fused_vs_float32"]
        assert report[layout]["fused_kernel_ran"] == "xla"
        # bf16 rounding is there (a float32 run would be ~1e-7) and small.
        assert 1e-5 < errors["mlm_logits"] < 0.05 and 1e-5 < errors["grad_relative"] < 0.05


@pytest.mark.slow
def test_gpu_benchmark_smoke_runs_every_case_on_cpu():
    result = subprocess.run(
        # ours_einsum is ours with one attribute set: on a CPU the same step.
        [sys.executable, "bench/gpu_jax.py", "--smoke", "--rounds", "1"]
        + ["--cases", "ours,keras_hub,hf_compile,ours_padded,ours_packed"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    report = json.loads(result.stdout)["shapes"]["2x32"]
    assert set(report["summary"]) == {"ours", "keras_hub", "hf_compile", "ours_padded", "ours_packed"}
    assert report["summary"]["ours"]["attention"] == "einsum"  # a CPU has no fused attention
    assert report["ratios"]["ours/hf_compile"] > 0
    assert report["ratios"]["real_tokens ours_packed/ours_padded"] > 0


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


# One JAX process for the checks below (issue 59): each records its result, so each test fails on its own.
JAX_RUN_CHECKS = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jax, keras
    from albert_tf.finetuning import training
    from albert_tf.finetuning.datasets import train_dataset
    from albert_tf.finetuning.settings import FineTuneSettings
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.pretraining import jax_step, loop
    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import PretrainSettings
    from finetune_helpers import NO_DEV, ScriptedTask, no_predictions
    from paths import CONFIGS
    from toy_inputs import good_request
    assert keras.backend.backend() == "jax"
    data, config, output_dir = sys.argv[1:]
    results = {}

    def check(name, function):
        try:
            results[name] = function()
        except Exception as error:
            results[name] = f"{type(error).__name__}: {error}"

    compiles = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, duration, **kw: compiles.append(event)
        if event == "/jax/core/compile/backend_compile_duration" else None
    )

    def fine_tune():  # without --jit_compile: Keras' JAX fit ran every operation on its own (393 compilations)
        features = good_request(8)
        del features["masked_lm_positions"]
        labels = np.random.default_rng(0).integers(0, 2, 8).astype("int32")
        model = AlbertClassifier(AlbertBackbone.from_albert_config(str(CONFIGS / "albert_tiny.json")), 2)
        settings = FineTuneSettings(
            output_dir=output_dir + "/finetune", train_step=2, save_checkpoints_steps=2, train_batch_size=4,
            verbose=False,
        )
        before = len(compiles)
        task = ScriptedTask(score=lambda _: {"accuracy": 0.5})
        training.train(task, model, train_dataset(features, labels, 4, 0), settings, NO_DEV, no_predictions)
        return {"jit_compile": model.jit_compile, "compilations": len(compiles) - before}

    check("fine_tuning", fine_tune)
    check("finetune_nojit", lambda: repr(FineTuneSettings(output_dir="x", jit_compile=False)))
    check("pretrain_nojit", lambda: repr(PretrainSettings(output_dir="x", jit_compile=False)))

    def one_checkpoint_bridge():
        # Pretraining's and fine-tuning's checkpoints both go through the Compute's state (jax_state's copies).
        import tensorflow as tf
        from albert_tf.compute import make_compute
        from albert_tf.config import AlbertConfig
        from albert_tf.finetuning.checkpoints import FineTuneCheckpoints
        from albert_tf.inputs.shard_reader import resolve_input
        from albert_tf.pretraining.run_state import CheckpointPolicy

        compute = make_compute()

        def round_trip(model, state, save, restore):
            before = [np.array(w) for w in model.get_weights()]
            path = save()
            for variable in model.trainable_variables:
                variable.assign(keras.ops.zeros(variable.shape, variable.dtype))
            restore(path)
            after = model.get_weights()
            names = sorted({name.split("/")[0] for name, _ in tf.train.list_variables(path)})
            same = all(np.array_equal(a, b) for a, b in zip(before, after))
            return {"state": type(state).__name__, "names": names, "restored": same}

        settings = PretrainSettings(
            output_dir=output_dir + "/bridge_pretrain", train_batch_size=8, max_seq_length=64, verbose=False
        )
        run = loop.PretrainingLoop(compute, AlbertConfig.from_json_file(config), settings, resolve_input(data))
        policy = CheckpointPolicy(run)

        def save_pretraining():
            policy.save(0)
            return policy.latest()

        def restore_pretraining(path):
            policy.checkpoint.restore(path).assert_existing_objects_matched()
            run.after_restore()

        pretraining = round_trip(run.model, run.state, save_pretraining, restore_pretraining)
        model = AlbertClassifier(AlbertBackbone.from_albert_config(str(CONFIGS / "albert_tiny.json")), 2)
        optimizer = keras.optimizers.Adam()
        optimizer.build(model.trainable_variables)
        fine_tuning_settings = FineTuneSettings(output_dir=output_dir + "/bridge_finetune", train_step=2)
        checkpoints = FineTuneCheckpoints(fine_tuning_settings, {"task": "bridge"}, model, optimizer, compute)
        fine_tuning = round_trip(model, checkpoints.state, lambda: checkpoints.save(1), lambda _: checkpoints.restore())
        return {"pretraining": pretraining, "fine_tuning": fine_tuning}

    check("checkpoint_bridge", one_checkpoint_bridge)

    def float16_never_finite():
        # Gradients not finite at any loss scale: each step skipped and the scale halved, as float16 overflow does.
        keras.optimizers.LossScaleOptimizer.check_finite = lambda self, grads: keras.ops.convert_to_tensor(False)
        loop.MAX_SKIPPED_STEPS = 3  # a few prove the bound
        made = []
        original = jax_step.JaxTrainStep.__init__
        def recording(self, *args, **kwargs):
            original(self, *args, **kwargs)
            made.append(getattr(self, "compiler_options", None))
        jax_step.JaxTrainStep.__init__ = recording
        settings = PretrainSettings(
            output_dir=output_dir + "/pretrain", input_file=data, albert_config_file=config, train_batch_size=8,
            num_train_steps=3, save_checkpoints_steps=3, mixed_precision="float16", deterministic=True, verbose=False,
        )
        try:
            pretrain(settings)
            return {"ended": "trained"}
        except Exception as error:
            return {"ended": str(error), "compiler_options": made}

    check("float16", float16_never_finite)

    print(json.dumps(results, default=str))
""")


@pytest.fixture(scope="module")
def jax_run_checks(pretraining_data, tmp_path_factory):
    try:
        result = subprocess.run(
            [sys.executable, "-c", JAX_RUN_CHECKS, pretraining_data["data"], pretraining_data["config"]]
            + [str(tmp_path_factory.mktemp("jax_checks"))],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])},
            timeout=600,  # a hang guard: the checks take about a minute alone
        )
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"the JAX checks did not end in {expired.timeout} s (a run that never ends)")
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.realdata
@pytest.mark.slow
def test_fine_tuning_on_jax_runs_compiled_steps_without_the_flag(jax_run_checks):
    """The runners passed --jit_compile's default (False) to Keras, whose JAX `fit` then ran op by op."""
    result = jax_run_checks["fine_tuning"]
    assert isinstance(result, dict), result
    assert result["jit_compile"] is True
    assert result["compilations"] < 100  # the steps and a few helpers; op by op it was 393


@pytest.mark.realdata
@pytest.mark.slow
def test_nojit_compile_on_jax_is_refused_naming_the_flag(jax_run_checks):
    for name in ("finetune_nojit", "pretrain_nojit"):
        assert jax_run_checks[name].startswith(
            "DistributionError: --nojit_compile: on Keras' JAX backend the training step is always compiled"
        ), jax_run_checks[name]


@pytest.mark.realdata
@pytest.mark.slow
def test_pretraining_and_fine_tuning_checkpoints_on_jax_restore_through_one_bridge(jax_run_checks):
    """Both kinds of run take their checkpoint state from the Compute: the same tf.Variable copies, the
    same object names as before (existing checkpoints restore), the weights back after a restore."""
    result = jax_run_checks["checkpoint_bridge"]
    assert isinstance(result, dict), result
    for kind in ("pretraining", "fine_tuning"):
        assert result[kind]["state"] == "JaxStateCopy" and result[kind]["restored"] is True, result
        assert {"jax_model", "jax_optimizer"} <= set(result[kind]["names"]), result
        assert "model" not in result[kind]["names"], result
    assert "train_iterator" in result["pretraining"]["names"] and "stale" in result["fine_tuning"]["names"]


@pytest.mark.realdata
@pytest.mark.slow
def test_float16_on_jax_ends_when_no_loss_scale_gives_finite_gradients(jax_run_checks):
    """Every step the loss scale skipped left the step count where it was: the run never ended."""
    result = jax_run_checks["float16"]
    assert isinstance(result, dict), result
    assert result["ended"] == (
        "--mixed_precision float16: 3 steps in a row at step 0 were skipped, their gradients not finite at any "
        "loss scale; nothing was trained since; checkpoints are intact (last: none); use --mixed_precision "
        "bfloat16 or float32"
    )


@pytest.mark.realdata
@pytest.mark.slow
def test_deterministic_on_jax_compiles_the_step_with_xla_deterministic_ops(jax_run_checks):
    """--deterministic made only TensorFlow's ops deterministic: the JAX step ignored it."""
    result = jax_run_checks["float16"]
    assert isinstance(result, dict), result
    assert result["compiler_options"] == [{"xla_gpu_deterministic_ops": True}]
