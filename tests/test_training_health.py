"""Training health in real runs: the windowed, labelled progress bar, health lines, and --on_divergence."""

import json
import logging
import os
import re

import numpy as np
import pytest

from command_helpers import run_command

pytestmark = pytest.mark.realdata
SEQ = 64


def run_pretraining(args):
    return run_command("albert_tf.run_pretraining", args)


def flags(data, output_dir, **values):
    values = {
        "input_file": data["data"],
        "albert_config_file": data["config"],
        "output_dir": output_dir,
        "train_batch_size": 16,
        "num_warmup_steps": 2,
        "learning_rate": 0.01,
        "deterministic": True,
        "export": False,
        **values,
    }
    return [f"--{k}={v}" if not isinstance(v, bool) else (f"--{k}" if v else f"--no{k}") for k, v in values.items()]


def health_texts(summary_dir):
    """The TensorBoard text summaries tagged "health", in order."""
    import tensorflow as tf

    texts = []
    for path in sorted(tf.io.gfile.glob(os.path.join(summary_dir, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == "health":
                    texts.append(tf.make_ndarray(value.tensor).item().decode())
    return texts


def test_off_a_terminal_the_bar_is_a_plain_line_a_window_without_colour_codes(capsys):
    """Keras' bar writes ANSI colour codes and carriage returns into a log file or pipe (hardening V)."""
    from albert_tf.progress import TrainingBar

    bar = TrainingBar(5, ["loss"], window_steps=2, verbose=True)  # pytest's captured stdout: not a terminal
    bar.update(0)
    for step in range(1, 6):
        bar.update(step, {"loss": 1.0 / step, "lr": 1e-3, "steps/s": 4.0})
    bar.say("evaluated")
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "\b" not in out
    assert out.splitlines() == [
        "step 2/5 - loss (last 2 steps): 0.5 - lr: 0.001 - steps/s: 4",
        "step 4/5 - loss (last 2 steps): 0.25 - lr: 0.001 - steps/s: 4",
        "step 5/5 - loss (last 2 steps): 0.2 - lr: 0.001 - steps/s: 4",
        "evaluated",
    ]


# A learning rate that ramps up to 10 over 100 steps: healthy for ~30 steps, then the loss takes off (NaN ~40).
EXPLODING = dict(learning_rate=10.0, num_warmup_steps=100, num_train_steps=60, save_checkpoints_steps=10)


@pytest.mark.slow
def test_the_bar_shows_the_last_window_and_the_summary_the_whole_run(pretraining_data, tmp_path):
    output_dir = tmp_path / "run"
    process = run_pretraining(
        flags(pretraining_data, str(output_dir), num_train_steps=30, log_every_steps=10, sentence_task="nsp")
    )
    assert process.returncode == 0, process.stderr[-3000:]
    summary = json.loads((output_dir / "train_summary.json").read_text())
    history = {h["step"]: h for h in summary["history"]}
    assert sorted(history) == [10, 20, 30] and {h["window_steps"] for h in history.values()} == {10}

    # Each value on the bar is its window's, labelled so (Keras would show the average since step 0); off a
    # terminal (this pipe) the bar is one plain line a window, its values to 4 significant digits.
    shown = re.findall(
        r"step (\d+)/30 - loss \(last 10 steps\): (\S+) - masked_lm_accuracy \(last 10 steps\): "
        r"(\S+) - sentence_order_accuracy \(last 10 steps\): (\S+)",
        process.stdout,
    )
    assert shown and shown[-1][0] == "30"
    for step, loss, mlm_accuracy, sentence_accuracy in shown:
        window = history[int(step)]
        assert float(loss) == pytest.approx(window["loss"], rel=1e-3, abs=1e-4)
        assert float(mlm_accuracy) == pytest.approx(window["masked_lm_accuracy"], rel=1e-3, abs=1e-4)
        assert float(sentence_accuracy) == pytest.approx(window["sentence_order_accuracy"], rel=1e-3, abs=1e-4)
    assert float(shown[-1][1]) != pytest.approx(np.mean([h["loss"] for h in history.values()]), abs=1e-4)

    # The final summary: the last window and the whole run, each labelled.
    assert summary["train_last_window"]["label"] == "last 10 steps (to step 30)"
    assert summary["train_last_window"]["loss"] == history[30]["loss"]
    cumulative = summary["train_cumulative"]
    assert cumulative["label"] == "cumulative over the 30 steps 1-30 of this run" and cumulative["steps"] == 30
    assert cumulative["loss"] == pytest.approx(np.mean([h["loss"] for h in history.values()]), rel=1e-6)
    assert f"cumulative over the 30 steps 1-30 of this run: loss {cumulative['loss']:.4f}" in process.stdout

    # The data line and the task mismatch, in the log and in TensorBoard.
    lines = [line for line in process.stdout.splitlines() if line.startswith("health: ")]
    assert lines[0].startswith(f"health: data {pretraining_data['data']}: SOP, label 1 in ")
    assert lines[1].startswith("health: warning: this run trains NSP (--sentence_task=nsp) but")
    assert health_texts(output_dir / "train")[:2] == lines[:2]


@pytest.mark.slow
def test_a_diverging_run_stops_with_one_line(pretraining_data, tmp_path):
    process = run_pretraining(flags(pretraining_data, str(tmp_path / "run"), on_divergence="stop", **EXPLODING))
    assert process.returncode == 1
    assert "Traceback" not in process.stderr
    error = process.stderr.strip().splitlines()[-1]
    match = re.match(
        r"error: training diverged: (loss spike|accuracy collapse) at step (\d+): .*; stopped "
        r"\(--on_divergence=stop\)\. Last checkpoint: .*ckpt-(\d+); resume from it with a lower --learning_rate",
        error,
    )
    assert match, error
    assert int(match.group(3)) < int(match.group(2)) < 40  # before the loss became NaN


def pretrain_exploding(pretraining_data, output_dir, on_divergence, caplog):
    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import PretrainingError, PretrainSettings

    settings = PretrainSettings(
        output_dir=str(output_dir),
        input_file=pretraining_data["data"],
        albert_config_file=pretraining_data["config"],
        train_batch_size=16,
        max_seq_length=SEQ,
        log_every_steps=10,
        deterministic=True,
        verbose=False,
        on_divergence=on_divergence,
        **EXPLODING,
    )
    caplog.clear()
    with caplog.at_level(logging.INFO), pytest.raises(PretrainingError) as raised:
        pretrain(settings)
    return str(raised.value), [r.getMessage() for r in caplog.records if r.getMessage().startswith("health: ")]


def test_warn_says_so_and_goes_on(pretraining_data, tmp_path, caplog):
    error, lines = pretrain_exploding(pretraining_data, tmp_path, "warn", caplog)
    # The divergence warnings (the run's schedule warning, warm-up longer than the run, comes first).
    warnings = [line for line in lines if re.match(r"health: warning: (loss spike|accuracy collapse) at step", line)]
    assert len(warnings) >= 1
    assert "training goes on (--on_divergence=warn" in warnings[0]
    assert re.match(r"loss is nan at step \d+", error)  # it went on until the loss was NaN
    assert warnings[0] in health_texts(tmp_path / "train")


@pytest.mark.slow
def test_rollback_restores_the_last_good_checkpoint_a_bounded_number_of_times(pretraining_data, tmp_path, caplog):
    error, lines = pretrain_exploding(pretraining_data, tmp_path, "rollback", caplog)
    rollbacks = [line for line in lines if "rolled back to" in line]
    assert len(rollbacks) == 3, lines
    for number, line in enumerate(rollbacks, start=1):
        match = re.search(r"rolled back to (\S+ckpt-(\d+)) \(step (\d+)\) and skipped the (\d+) batches", line)
        assert match and match.group(2) == match.group(3), line
        assert line.endswith(f"(rollback {number} of at most 3)")
    assert re.match(
        r"training diverged: .* stopped after 3 rollbacks \(the most --on_divergence=rollback makes\)", error
    )
    assert rollbacks == [text for text in health_texts(tmp_path / "train") if "rolled back to" in text]


@pytest.mark.slow
def test_rollback_restores_the_weights_drops_newer_checkpoints_and_skips_the_batches(pretraining_data, tmp_path):
    import tensorflow as tf

    from albert_tf.compute import make_compute
    from albert_tf.config import AlbertConfig
    from albert_tf.inputs.shard_reader import pretraining_dataset, resolve_input
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.pretrainer import AlbertPretrainer
    from albert_tf.pretraining.divergence import respond_to_divergence
    from albert_tf.pretraining.health import Divergence, HealthMonitor
    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.loop import PretrainingLoop
    from albert_tf.pretraining.run_state import CheckpointPolicy
    from albert_tf.pretraining.settings import PretrainSettings

    settings = PretrainSettings(
        output_dir=str(tmp_path),
        input_file=pretraining_data["data"],
        albert_config_file=pretraining_data["config"],
        train_batch_size=8,
        max_seq_length=SEQ,
        num_train_steps=20,
        num_warmup_steps=2,
        learning_rate=0.01,
        save_checkpoints_steps=5,
        verbose=False,
    )
    pretrain(settings)
    checkpoint_dir = tmp_path / "checkpoints"
    config = AlbertConfig.from_json_file(pretraining_data["config"])
    at_15 = AlbertPretrainer(AlbertBackbone.from_albert_config(config))
    tf.train.Checkpoint(model=at_15).restore(str(checkpoint_dir / "ckpt-15")).expect_partial()

    train_input = resolve_input(pretraining_data["data"])
    loop = PretrainingLoop(make_compute(), config, settings, train_input)
    policy = CheckpointPolicy(loop)
    assert policy.restore_or_initialize().startswith("resumed from") and loop.step == 20
    at_20 = loop.model.get_weights()
    said = []
    divergence = Divergence("loss spike", step=18, since_step=17, message="loss spike at step 18")
    assert respond_to_divergence(loop, policy, HealthMonitor(settings.health, "rollback"), divergence, said.append)
    assert said == [
        f"health: loss spike at step 18; rolled back to {checkpoint_dir / 'ckpt-15'} (step 15) and skipped the 3 "
        "batches after it (rollback 1 of at most 3)"
    ]
    assert loop.step == 15
    for restored, saved in zip(loop.model.get_weights(), at_15.get_weights()):
        np.testing.assert_array_equal(restored, saved)
    assert any(not np.array_equal(a, b) for a, b in zip(at_15.get_weights(), at_20))
    # The diverged trajectory's checkpoint is gone, from disk and from the list a resume reads.
    assert not tf.io.gfile.glob(str(checkpoint_dir / "ckpt-20*"))
    assert tf.train.latest_checkpoint(str(checkpoint_dir)).endswith("ckpt-15")
    assert [os.path.basename(p) for p in policy.manager.checkpoints][-1] == "ckpt-15"

    # The next batch is the 19th: the batches 16-18 that followed the checkpoint are skipped.
    def batch_after(batches):
        return next(iter(pretraining_dataset(train_input, 8, seed=settings.seed, skip_batches=batches)))[0]

    got = next(loop.train_iterator)[0]["input_ids"]
    np.testing.assert_array_equal(got, batch_after(18)["input_ids"])
    assert not np.array_equal(got, batch_after(15)["input_ids"])  # what a plain restore would have read


@pytest.mark.slow
def test_an_error_mid_run_starts_a_line_of_its_own_after_the_live_bar(pretraining_data, tmp_path):
    """In a terminal the bar holds its line; the error that stops the run starts the next one."""
    import pty
    import subprocess
    import sys

    from paths import REPO

    args = [f"--{name}={value}" for name, value in EXPLODING.items()]
    args += [f"--input_file={pretraining_data['data']}", f"--albert_config_file={pretraining_data['config']}"]
    args += [f"--output_dir={tmp_path / 'run'}", "--train_batch_size=16", "--on_divergence=stop", "--noexport"]
    args += ["--log_every_steps=1"]
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "albert_tf.run_pretraining", *args],
        stdout=follower,
        stderr=follower,
        cwd=REPO,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
    os.close(leader)
    assert process.wait(timeout=300) == 1
    text = output.decode(errors="replace").replace("\r\n", "\n")  # a terminal ends lines with CR LF
    assert "steps/s" in text  # the bar was drawn
    # What is on screen of each line: the text after its last carriage return.
    screen = [line.rsplit("\r", 1)[-1] for line in text.split("\n")]
    errors = [line for line in screen if "error: " in line]
    assert errors and all(line.startswith("error: training diverged") for line in errors), errors
