"""run_pretraining on real data: learning, resume after SIGKILL, multi-worker, exports, bad input."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from command_helpers import run_command
from paths import CONFIGS, REPO
from pretraining_helpers import cli, common_args, final_weights, latest_checkpoint_step

pytestmark = pytest.mark.realdata
SEQ = 64


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["lamb", "adamw"])
def test_tiny_albert_learns_on_wikitext(pretraining_data, tmp_path, optimizer):
    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import PretrainSettings

    settings = PretrainSettings(
        output_dir=str(tmp_path),
        input_file=pretraining_data["data"],
        albert_config_file=pretraining_data["config"],
        train_batch_size=32,
        max_seq_length=SEQ,
        num_train_steps=150,
        num_warmup_steps=15,
        learning_rate={"lamb": 0.01, "adamw": 0.002}[optimizer],
        optimizer=optimizer,
        save_checkpoints_steps=1000,
        do_eval=True,
        max_eval_steps=10,
        eval_batch_size=64,
        eval_at_start=True,
        log_every_steps=50,
        verbose=False,
    )
    summary = pretrain(settings)
    before, after = summary["eval_start"], summary["eval"]
    assert after["masked_lm_loss"] < before["masked_lm_loss"] - 1.5, (before, after)
    assert after["masked_lm_accuracy"] > before["masked_lm_accuracy"] + 0.05, (before, after)
    history = summary["history"]
    assert history[-1]["loss"] < history[0]["loss"]


@pytest.mark.slow
def test_sigkill_then_resume_matches_an_uninterrupted_run(pretraining_data, tmp_path):
    steps = 30
    # The runs that are not killed run in this process; the victim must be one of its own (SIGKILL).
    reference = run_command(
        "albert_tf.run_pretraining", common_args(pretraining_data, str(tmp_path / "reference"), steps)
    )
    assert reference.returncode == 0, reference.stderr[-3000:]

    interrupted_dir = tmp_path / "interrupted"
    args = common_args(pretraining_data, str(interrupted_dir), steps)
    victim = cli(args)
    deadline = time.time() + 300
    # Kill once the checkpoint state (what a resume reads) names a step ≥ 15: a ckpt-N.index
    # on disk is not enough, the kill may land before the state file names it.
    while latest_checkpoint_step(interrupted_dir / "checkpoints") < 15:
        assert victim.poll() is None, victim.communicate()[1][-3000:]
        assert time.time() < deadline
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    assert not (interrupted_dir / "final").exists()
    killed_at = latest_checkpoint_step(interrupted_dir / "checkpoints")  # what the resume will read

    resumed = run_command("albert_tf.run_pretraining", args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in resumed.stdout
    summary = json.loads((interrupted_dir / "train_summary.json").read_text())
    assert 15 <= killed_at and summary["start_step"] == killed_at and summary["end_step"] == steps
    for a, b in zip(final_weights(tmp_path / "reference"), final_weights(interrupted_dir)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)

    # Running again once finished trains nothing and keeps the result.
    again = run_command("albert_tf.run_pretraining", args)
    assert again.returncode == 0 and "nothing to train" in again.stdout


@pytest.mark.slow
def test_mirrored_with_accumulation_exports_servable_models(pretraining_data, tmp_path):
    import tensorflow as tf

    from albert_tf.compute import make_compute
    from albert_tf.distribution import DistributionSettings
    from albert_tf.export import export_pretraining_run
    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import PretrainSettings
    from albert_tf.tokenization import SentencePieceTokenizer

    settings = PretrainSettings(
        output_dir=str(tmp_path),
        input_file=pretraining_data["data"],
        albert_config_file=pretraining_data["config"],
        train_batch_size=16,
        max_seq_length=SEQ,
        num_train_steps=4,
        num_warmup_steps=1,
        grad_accum_steps=2,
        save_checkpoints_steps=2,
        verbose=False,
    )
    summary = pretrain(
        settings,
        make_compute(DistributionSettings(strategy="mirrored")),
        tokenizer=SentencePieceTokenizer(pretraining_data["spm"]),
    )
    summary["outputs"].update(export_pretraining_run(str(tmp_path), version=4, max_seq_length=SEQ))
    assert summary["end_step"] == 4
    backbone_dir = summary["outputs"]["saved_model_backbone"]
    assert backbone_dir.endswith(os.path.join("saved_model", "backbone", "4"))
    loaded = tf.saved_model.load(backbone_dir)
    serve = loaded.signatures["serving_default"]
    assert sorted(serve.structured_input_signature[1]) == ["input_ids", "input_mask", "segment_ids"]
    out = serve(
        input_ids=tf.constant([[2, 50, 3]]),
        input_mask=tf.ones((1, 3), tf.int32),
        segment_ids=tf.zeros((1, 3), tf.int32),
    )
    assert out["sequence_output"].shape == (1, 3, 64) and out["pooled_output"].shape == (1, 64)
    assets = sorted(os.listdir(os.path.join(backbone_dir, "assets")))
    assert assets == ["albert_config.json", "serving_config.json", "spm.model", "tokenizer.json"]
    pretrainer = tf.saved_model.load(summary["outputs"]["saved_model_pretrainer"]).signatures["serving_default"]
    logits = pretrainer(
        input_ids=tf.constant([[2, 50, 4, 3]]),
        input_mask=tf.ones((1, 4), tf.int32),
        segment_ids=tf.zeros((1, 4), tf.int32),
        masked_lm_positions=tf.constant([[2]]),
    )
    assert logits["mlm_logits"].shape == (1, 1, 4000) and logits["sop_logits"].shape == (1, 2)


@pytest.mark.slow
def test_bad_inputs_are_clear_errors(pretraining_data, tmp_path):
    from albert_tf.inputs.shard_reader import DataError
    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import PretrainingError, PretrainSettings
    from albert_tf.tokenization import SentencePieceTokenizer, TokenizerError, resolve_tokenizer

    settings = PretrainSettings(
        output_dir=str(tmp_path / "out"),
        input_file=pretraining_data["data"],
        albert_config_file=pretraining_data["config"],
        train_batch_size=8,
        num_train_steps=2,
        verbose=False,
    )
    with pytest.raises(DataError, match="matches no file"):
        pretrain(dataclasses.replace(settings, input_file=str(tmp_path / "nothing*.tfrecord")))
    with pytest.raises(DataError, match=r"sequence length 64 \(--max_seq_length is 128\)"):
        pretrain(dataclasses.replace(settings, max_seq_length=128))
    # The CLI resolves --spm_model_file into the tokenizer `pretrain` takes.
    with pytest.raises(TokenizerError, match=r"--spm_model_file .*missing.model: cannot be read \(No such file"):
        resolve_tokenizer(files={"spm_model_file": str(tmp_path / "missing.model")}, required=False)
    cased = SentencePieceTokenizer(pretraining_data["spm"], do_lower_case=False)
    with pytest.raises(DataError, match="do_lower_case is False but the data was made with do_lower_case True"):
        pretrain(settings, tokenizer=cased)
    with pytest.raises(DataError, match=r"vocabulary of 4000 pieces \(the config's vocab_size is 8000\)"):
        pretrain(dataclasses.replace(settings, albert_config_file=str(CONFIGS / "albert_tiny.json")))
    small = json.loads(open(pretraining_data["config"]).read())
    small["hidden_size"] = 32
    (tmp_path / "small.json").write_text(json.dumps(small))

    def one_step(output_dir, **changes):
        return dataclasses.replace(settings, output_dir=str(output_dir), num_train_steps=1, **changes)

    first = tmp_path / "first"
    pretrain(one_step(first))
    with pytest.raises(PretrainingError, match="does not fit"):
        pretrain(
            one_step(
                tmp_path / "second",
                albert_config_file=str(tmp_path / "small.json"),
                init_checkpoint=str(first / "final"),
            )
        )
    # A warm start from a run's own training checkpoint names it as such (its optimizer and
    # iterator state once read as a "truncated or corrupt" TF1 checkpoint).
    for training_checkpoint in (first / "checkpoints", first / "checkpoints" / "ckpt-1"):
        with pytest.raises(PretrainingError, match=r"training checkpoint .*final/ or best/"):
            pretrain(one_step(tmp_path / "warm", init_checkpoint=str(training_checkpoint)))
    # The failed start recorded no config, so a retry with another config is not refused.
    assert not (tmp_path / "warm" / "checkpoints" / "albert_config.json").exists()
    with pytest.raises(PretrainingError, match="must divide"):
        pretrain(one_step(tmp_path / "third", train_batch_size=10, grad_accum_steps=4))
    assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")


@pytest.mark.slow
@pytest.mark.parametrize("learning_rate", [1e10, 1e38])
def test_exploding_run_keeps_only_good_checkpoints_and_resumes_with_a_lower_rate(
    pretraining_data, tmp_path, learning_rate
):
    import tensorflow as tf

    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import PretrainingError, PretrainSettings

    def settings(lr):
        return PretrainSettings(
            output_dir=str(tmp_path),
            input_file=pretraining_data["data"],
            albert_config_file=pretraining_data["config"],
            train_batch_size=8,
            max_seq_length=SEQ,
            num_train_steps=6,
            num_warmup_steps=0,
            optimizer="adamw",
            learning_rate=lr,
            save_checkpoints_steps=1,
            verbose=False,
        )

    with pytest.raises(
        PretrainingError,
        match=r"(loss is (nan|inf)|weights are not finite) at step \d+.*"
        r"lower --learning_rate",
    ) as raised:
        pretrain(settings(learning_rate))
    checkpoint_dir = os.path.join(tmp_path, "checkpoints")
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    # Every checkpoint left is one a finite loss was computed from: its weights are sane.
    for prefix in tf.train.get_checkpoint_state(checkpoint_dir).all_model_checkpoint_paths if latest else []:
        for name, _ in tf.train.list_variables(prefix):
            if name.startswith("model/") and "OPTIMIZER_SLOT" not in name:
                value = tf.train.load_variable(prefix, name)
                assert np.isfinite(value).all() and np.abs(value).max() < 1e3, (prefix, name)
    assert (latest or "(none") in str(raised.value) or "no good checkpoint" in str(raised.value)
    # The message's advice: the same command with a lower rate finishes the run.
    summary = pretrain(settings(1e-3))
    assert summary["end_step"] == 6


@pytest.mark.slow
def test_cli_errors_have_no_traceback(tmp_path, pretraining_data):
    completed = run_command(
        "albert_tf.run_pretraining",
        [
            f"--input_file={tmp_path}/none*.tfrecord",
            f"--albert_config_file={pretraining_data['config']}",
            f"--output_dir={tmp_path}/out",
        ],
    )
    assert completed.returncode != 0
    assert "matches no file" in completed.stderr and "Traceback" not in completed.stderr


@pytest.mark.slow
def test_eval_only_measures_every_kept_checkpoint_and_writes_nothing(pretraining_data, tmp_path):
    from albert_tf.pretraining.job import evaluate_checkpoints, pretrain
    from albert_tf.pretraining.settings import PretrainingError, PretrainSettings

    from finetune_helpers import scalars

    settings = PretrainSettings(
        output_dir=str(tmp_path / "run"),
        input_file=pretraining_data["data"],
        albert_config_file=pretraining_data["config"],
        train_batch_size=16,
        eval_batch_size=16,
        max_seq_length=SEQ,
        num_train_steps=10,
        num_warmup_steps=2,
        learning_rate=0.01,
        save_checkpoints_steps=5,
        do_eval=True,
        max_eval_steps=2,
        verbose=False,
    )
    pretrain(settings)
    during_training = {}
    for line in (tmp_path / "run" / "eval_results.txt").read_text().splitlines():
        entry = json.loads(line)
        during_training[entry.pop("global_step")] = entry
    # TensorBoard's eval/ holds the same evaluations.
    evaluated = scalars(tmp_path / "run" / "eval")
    steps = sorted(during_training)
    assert [step for step, _ in evaluated["masked_lm_accuracy"]] == steps and steps
    for name in ("masked_lm_accuracy", "sentence_order_accuracy", "loss"):
        assert [v for _, v in evaluated[name]] == pytest.approx([during_training[s][name] for s in steps], abs=1e-6)
    files_before = sorted((p.relative_to(tmp_path), p.stat().st_mtime_ns) for p in (tmp_path / "run").rglob("*"))

    process = run_command(
        "albert_tf.run_pretraining",
        [
            f"--eval_file={pretraining_data['data']}",  # no --input_file: evaluating needs no training data
            f"--albert_config_file={pretraining_data['config']}",
            f"--output_dir={tmp_path / 'run'}",
            "--nodo_train",
            "--eval_batch_size=16",
            "--max_eval_steps=2",
        ],
    )
    assert process.returncode == 0, process.stderr[-3000:]
    printed = {}
    for line in process.stdout.splitlines():
        entry = json.loads(line)
        printed[entry.pop("global_step")] = entry
    assert sorted(printed) == [5, 10]  # both kept checkpoints, in step order
    for step in printed:  # the same numbers the run measured at that checkpoint
        for key, value in during_training[step].items():
            assert printed[step][key] == pytest.approx(value, rel=1e-5), (step, key)
    files_after = sorted((p.relative_to(tmp_path), p.stat().st_mtime_ns) for p in (tmp_path / "run").rglob("*"))
    assert files_after == files_before

    with pytest.raises(PretrainingError, match="no checkpoint to evaluate"):
        evaluate_checkpoints(dataclasses.replace(settings, output_dir=str(tmp_path / "empty")))


@pytest.mark.slow
def test_best_and_final_carry_the_datas_vocabulary_with_no_flag(pretraining_data, tmp_path):
    from albert_tf import formats
    from albert_tf.tokenization import SentencePieceTokenizer

    output_dir = tmp_path / "run"
    run = run_command(
        "albert_tf.run_pretraining",
        common_args(pretraining_data, str(output_dir), 4, save_checkpoints_steps=2, do_eval=True),
    )
    assert run.returncode == 0, run.stderr[-3000:]
    expected = SentencePieceTokenizer(pretraining_data["spm"]).model_sha256
    for published in ("best", "final"):
        loaded = formats.load(str(output_dir / published))
        assert loaded.tokenizer is not None and loaded.tokenizer.model_sha256 == expected, published
    record = json.loads((output_dir / "settings.json").read_text())
    assert record["flags"]["num_train_steps"] == 4 and record["input_sha256"]["input_file"]
    assert record["vocabulary_sha256"] == expected  # the data's vocabulary, not null


@pytest.mark.slow
def test_running_a_finished_run_again_says_it_is_complete_and_exits_0(pretraining_data, tmp_path):
    output_dir = tmp_path / "run"
    args = common_args(pretraining_data, output_dir, 2, save_checkpoints_steps=2, export=True, max_seq_length=SEQ)
    first = run_command("albert_tf.run_pretraining", args)
    assert first.returncode == 0, first.stderr
    exported = json.loads(first.stdout[first.stdout.index("{") :])["outputs"]
    again = run_command("albert_tf.run_pretraining", args)
    out, err = again.stdout, again.stderr
    assert again.returncode == 0, err
    assert "the run is complete: step 2 of --num_train_steps 2, final model in" in out
    assert "cumulative over the 0 steps" not in out + err
    summary = json.loads(out[out.index("{") :])
    assert summary["already_complete"] and summary["end_step"] == 2
    assert summary["outputs"] == exported  # the SavedModels of step 2, found rather than exported again
    assert sorted(os.listdir(output_dir / "saved_model" / "backbone")) == ["2"]


@pytest.mark.slow
def test_an_xla_run_prints_no_tensorflow_log_lines_unless_asked(pretraining_data, tmp_path):
    """XLA logs through TensorFlow's absl, which TF_CPP_MIN_LOG_LEVEL does not reach: the CLI quiets it too."""
    chatter = ("absl::InitializeLog", "Compiled cluster using XLA")
    outputs = {}
    for name, extra in (("quiet", []), ("verbose", ["-v", "1"])):
        args = common_args(pretraining_data, str(tmp_path / name), 2, jit_compile=True) + extra
        env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # as a newcomer has it
        process = subprocess.run(
            [sys.executable, "-m", "albert_tf.run_pretraining", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
        )
        outputs[name] = process.stderr
        assert process.returncode == 0, outputs[name][-3000:]
    assert [line for line in outputs["quiet"].splitlines() if any(c in line for c in chatter)] == []
    assert all(c in outputs["verbose"] for c in chatter)  # the lines exist: -v 1 shows them
