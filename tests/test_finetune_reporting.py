"""What fine-tuning shows and records: the start line, one line per evaluation, TensorBoard scalars,
the end table with the majority-class baseline, `--metric`, `--early_stopping_patience`."""

import json

import numpy as np
import pytest

from albert_tf.tokenization import SentencePieceTokenizer

from finetune_helpers import scalars, write_slice

pytestmark = pytest.mark.realdata


def sst2_settings(real_data, pretraining_data, tmp_path, **overrides):
    from albert_tf.run_classifier import ClassifierSettings

    write_slice(real_data, tmp_path, "SST-2", 96, 64)
    values = dict(
        do_train=True,
        do_eval=True,
        output_dir=str(tmp_path / "out"),
        task_name="sst-2",
        data_dir=str(tmp_path / "glue"),
        tokenizer=SentencePieceTokenizer(pretraining_data["spm"]),
        albert_config_file=pretraining_data["config"],
        max_seq_length=32,
        train_batch_size=8,
        eval_batch_size=32,
        learning_rate=1e-4,
        train_step=6,
        save_checkpoints_steps=3,
    )
    return ClassifierSettings(**{**values, **overrides})


def test_a_run_says_where_it_starts_reports_each_evaluation_and_ends_with_a_table(
    real_data, pretraining_data, tmp_path, capsys
):
    from albert_tf.run_classifier import run

    settings = sst2_settings(real_data, pretraining_data, tmp_path, metric="macro_f1")
    summary = run(settings)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "initialized from scratch (random weights)" in lines
    dev_rows = (tmp_path / "glue" / "SST-2" / "dev.tsv").read_text().splitlines()[1:]
    dev_labels = [int(line.split("\t")[1]) for line in dev_rows]
    majority = max(np.bincount(dev_labels)) / len(dev_labels)
    # One line per evaluation, each on its own line (the bar's redraws never share it).
    evaluations = [line for line in lines if line.startswith(("step 3: macro_f1 ", "step 6: macro_f1 "))]
    assert len(evaluations) == 2, out
    assert all(f"majority class {majority:.4f}" in line and "accuracy " in line for line in evaluations)
    history = [json.loads(line) for line in (tmp_path / "out" / "eval_results.txt").read_text().splitlines()]
    best = json.loads((tmp_path / "out" / "best" / "eval_results.json").read_text())
    assert best["macro_f1"] == max(h["macro_f1"] for h in history) and summary["metric"] == "macro_f1"
    assert summary["best_step"] == best["global_step"] and not summary["stopped_early"]
    table = lines[lines.index(next(line for line in lines if line.startswith("best step"))) :]
    assert table[0].split() == ["best", "step", str(best["global_step"])]
    assert table[1].split() == ["best", "macro_f1", f"{best['macro_f1']:.4f}"]
    assert table[2].split()[:3] == ["majority", "class", f"{majority:.4f}"]
    assert table[3].split() == ["model", str(tmp_path / "out" / "best")]
    # TensorBoard: training loss and lr per window, every metric of every evaluation.
    train = scalars(tmp_path / "out" / "train")
    assert [step for step, _ in train["loss"]] == [3, 6] and all(np.isfinite(v) for _, v in train["loss"])
    assert [step for step, _ in train["lr"]] == [3, 6] and "steps_per_s" in train
    # Training accuracy per window of 3 steps × 8 examples: a count of right answers out of 24.
    assert [step for step, _ in train["accuracy"]] == [3, 6]
    assert all(0 <= v <= 1 and abs(v * 24 - round(v * 24)) < 1e-4 for _, v in train["accuracy"])
    assert "accuracy (last 3 steps)" in out
    evaluated = scalars(tmp_path / "out" / "eval")
    for name in ("accuracy", "macro_f1", "matthews_corr", "f1", "majority_baseline", "train_loss"):
        assert [step for step, _ in evaluated[name]] == [3, 6], name
        assert [v for _, v in evaluated[name]] == pytest.approx([h[name] for h in history], abs=1e-6), name


def test_an_unknown_metric_fails_before_any_work_listing_the_choices(real_data, pretraining_data, tmp_path):
    from albert_tf.finetuning.settings import FineTuneError
    from albert_tf.run_classifier import run

    settings = sst2_settings(real_data, pretraining_data, tmp_path, metric="macro-f1")
    choices = "accuracy, f1, macro_f1, matthews_corr"
    with pytest.raises(FineTuneError, match=rf"^--metric macro-f1: the task computes {choices}$"):
        run(settings)
    assert not (tmp_path / "out").exists()


def test_no_step_asked_for_is_an_error_not_a_silent_exit(real_data, pretraining_data, tmp_path):
    from albert_tf.finetuning.settings import FineTuneError
    from albert_tf.run_classifier import run

    settings = sst2_settings(real_data, pretraining_data, tmp_path, do_train=False, do_eval=False)
    with pytest.raises(FineTuneError, match=r"^nothing to do: pass --do_train, --do_eval or --do_predict$"):
        run(settings)
    assert not (tmp_path / "out").exists()


def _scripted_run(tmp_path, scores, metric="accuracy", baseline=None, patience=0, train_step=6, capsys=None):
    """The real loop on a tiny classifier, with evaluations that return `scores` in turn."""
    import keras

    from albert_tf import AlbertBackbone
    from albert_tf.finetuning import training
    from albert_tf.finetuning.datasets import train_dataset
    from albert_tf.finetuning.settings import FineTuneSettings
    from albert_tf.models.classifier import AlbertClassifier

    from finetune_helpers import NO_DEV, ScriptedTask, no_predictions
    from paths import CONFIGS

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    features = {
        "input_ids": rng.integers(5, 100, (16, 16)).astype("int32"),
        "input_mask": np.ones((16, 16), "int32"),
        "segment_ids": np.zeros((16, 16), "int32"),
    }
    labels = rng.integers(0, 2, 16).astype("int32")
    model = AlbertClassifier(AlbertBackbone.from_albert_config(str(CONFIGS / "albert_tiny.json")), 2)
    settings = FineTuneSettings(
        output_dir=str(tmp_path),
        train_step=train_step,
        save_checkpoints_steps=1,
        train_batch_size=8,
        early_stopping_patience=patience,
        metric=metric,
    )
    task = ScriptedTask([{metric: score, "accuracy": 0.5} for score in scores], baseline=baseline)
    return training.train(task, model, lambda: train_dataset(features, labels, 8, 0), settings, NO_DEV, no_predictions)


def test_early_stopping_stops_after_the_patience_and_keeps_best(tmp_path, capsys):
    result = _scripted_run(tmp_path, [0.5, 0.7, 0.6, 0.7, 0.9, 0.95], metric="macro_f1", patience=2)
    out = capsys.readouterr().out
    assert result["stopped_early"] and [h["global_step"] for h in result["history"]] == [1, 2, 3, 4]
    assert result["best"]["global_step"] == 2 and result["best"]["macro_f1"] == 0.7  # a tie does not improve
    assert (
        "early stopping at step 4: no better macro_f1 in 2 evaluations (--early_stopping_patience 2); "
        "best/ of step 2 kept"
    ) in out
    assert json.loads((tmp_path / "best" / "eval_results.json").read_text())["global_step"] == 2
    # The same command again: the stop is part of the checkpoint, nothing more is trained.
    again = _scripted_run(tmp_path, [], metric="macro_f1", patience=2)
    assert again["history"] == [] and again["stopped_early"]
    assert "already at step 4 (of --train_step 6, stopped early): nothing to train" in capsys.readouterr().out


def test_a_lower_is_better_metric_keeps_the_lowest(tmp_path):
    result = _scripted_run(tmp_path, [0.5, 0.3, 0.4], metric="mse", train_step=3)
    assert result["best"]["global_step"] == 2 and result["best"]["mse"] == 0.3


def test_a_best_at_the_majority_share_is_a_health_warning(tmp_path, capsys):
    from albert_tf.finetuning.base import Baseline

    _scripted_run(tmp_path, [0.5, 0.5], metric="accuracy", baseline=Baseline.majority(0.5), train_step=2)
    out = capsys.readouterr().out
    assert "health: the best accuracy 0.5000 is at the majority-class share 0.5000" in out
    assert "majority class  0.5000 (share of the most frequent dev label)" in out


@pytest.mark.realdata
def test_regression_and_squad_v2_have_their_trivial_baselines(real_data, tmp_path, capsys):
    """STS-B: a constant predictor's MSE (the dev labels' variance); SQuAD v2.0: answering nothing."""
    from albert_tf.finetuning.base import Encoded
    from albert_tf.tasks import glue, squad

    stsb = glue.TASKS["sts-b"]
    examples, _ = glue.read_examples(stsb, str(real_data / "glue" / "STS-B" / "dev.tsv"), "dev")
    scores = np.array([e.label for e in examples], "float64")
    baseline = stsb.baseline(Encoded("dev", examples, {}))
    assert (baseline.metric, baseline.label) == ("mse", "constant predictor mse")
    assert baseline.value == pytest.approx(scores.var()) and 1.0 < baseline.value < 5.0  # scores span 0-5
    assert glue.TASKS["sst-2"].baseline(Encoded("dev", [glue.Example("1", "a", None, 1)], {})).value == 1.0

    source = real_data / "squad_v2.0" / "dev-v2.0.Normans-Rhine.json"
    questions, _ = squad.read_examples(str(source), is_training=False)
    abstain = squad.SquadTask(version="2.0").baseline(Encoded("dev", questions, {}))
    unanswerable = sum(not any(squad.normalize_answer(a) for a in e.answers) for e in questions) / len(questions)
    assert abstain.label == "always abstain f1" and abstain.value == pytest.approx(100 * unanswerable)
    assert 20 < abstain.value < 80 and squad.SquadTask(version="1.1").baseline(Encoded("dev", questions, {})) is None

    # A regression run whose best MSE is worse than the constant's is warned about, with the numbers.
    _scripted_run(tmp_path, [3.5, 3.0], metric="mse", baseline=baseline, train_step=2)
    out = capsys.readouterr().out
    assert f"constant predictor mse  {baseline.value:.4f} (every dev score the dev mean)" in out
    assert f"health: the best mse 3.0000 is worse than the constant predictor's {baseline.value:.4f}" in out


@pytest.mark.slow
def test_tensorboard_starts_and_lists_a_runs_summaries(tmp_path):
    # A process of its own: the `tensorboard --logdir` the docs and the demo tell a user to run. It once
    # failed at start (`No module named 'pkg_resources'`: setuptools 81+ under TensorBoard).
    import os
    import subprocess
    import sys
    import time
    import urllib.error
    import urllib.request

    import tensorflow as tf

    from pretraining_helpers import free_ports

    writer = tf.summary.create_file_writer(str(tmp_path / "train"))
    with writer.as_default():
        tf.summary.scalar("loss", 1.0, step=1)
    writer.close()
    (port,) = free_ports(1)
    command = [os.path.join(os.path.dirname(sys.executable), "tensorboard"), f"--logdir={tmp_path}"]
    server = subprocess.Popen(
        command + [f"--port={port}", "--host=127.0.0.1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 180  # a hang guard, not a timing assertion
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/runs", timeout=10) as response:
                    runs = json.loads(response.read())
                if runs:  # the first scan of --logdir may still be under way
                    break
            except (urllib.error.URLError, ConnectionError):
                pass
            assert server.poll() is None, server.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "tensorboard did not answer"
            time.sleep(0.5)
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert runs == ["train"]
