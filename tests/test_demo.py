"""The built-in demo runs end to end on Python's own documentation, learns, and prints only what a person needs."""

import json
import os
import re
import subprocess
import sys

import pytest

from albert_tf.cli import demo

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_demo_corpus_comes_from_the_python_install():
    documents = list(demo.demo_documents())
    assert len(documents) > 300
    assert sum(len(d) for d in documents) > 10000
    assert all(len(d) > 1 for d in documents)  # SOP needs two sentences


def test_the_demos_last_lines_say_its_step_count_and_what_comes_next():
    """It printed an MLM accuracy from 280 steps with no word that it follows the step count, pointed TensorBoard
    at train/ alone (no eval curve), and suggested fine-tuning from a model too weak to learn SST-2."""
    summary = {
        "outputs": {"final": "/d/model/final", "saved_model_backbone": "/d/model/saved_model/backbone/280"},
        "eval_start": {"masked_lm_accuracy": 0.0, "sentence_order_accuracy": 0.5},
        "eval": {"masked_lm_accuracy": 0.058, "sentence_order_accuracy": 0.52},
    }
    report = demo.demo_report("/d", "/d/corpus.txt", "/d/vocab/spm.model", "/d/data", "/d/model", summary, 280)
    assert report["tensorboard"] == "tensorboard --logdir /d/model"  # the run: train/ and eval/ together
    lines = demo.closing_lines(report, 3.0)
    [figures] = [line for line in lines if "280 steps" in line]
    assert "accuracy follows the step count" in figures and "--demo_minutes" in figures
    [next_line] = [line for line in lines if line.startswith("Next:")]
    assert "albert_base" in next_line and "too weak" in next_line


@pytest.mark.slow
def test_demo_end_to_end_through_the_readme_command(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # what a newcomer has
    command = [
        sys.executable,
        "-m",
        "albert_tf.run_pretraining",
        "--demo_minutes=0.1",
        f"--demo_dir={tmp_path / 'demo'}",
    ]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=env, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.load(open(tmp_path / "demo" / "demo_report.json"))
    assert report["steps"] == 200  # the minimum
    before, after = report["before"], report["after"]
    assert before["masked_lm_accuracy"] < 0.01
    assert after["masked_lm_accuracy"] > before["masked_lm_accuracy"] + 0.03, (before, after)
    assert after["masked_lm_loss"] < before["masked_lm_loss"] - 1.0
    for path in report["saved_models"] + [report["final"], report["data"]]:
        assert os.path.isdir(path), path
    # What the person sees: the five steps once each, a progress bar, the result; no library chatter.
    out = result.stdout
    steps = re.findall(r"^\[demo\] (\d)/5 ", out, re.M)
    assert steps == ["1", "2", "3", "4", "5"], out[-2000:]
    assert "200/200" in out and "masked_lm_accuracy" in out  # Keras' progress bar
    assert "[demo] These figures come from 200 steps" in out
    chatter = [
        line
        for line in (out + result.stderr).splitlines()
        if re.search(
            r"\b(INFO|WARNING)\b|I0000|W0000|fingerprinting_utils|signature_serialization|"
            r"functional_saver|GCSFileSystem|apitools",
            line,
        )
    ]
    assert chatter == [], chatter[:10]
    messages = [line for line in out.splitlines() if line.startswith(("[demo]", "eval at step", "initialized"))]
    assert len(messages) == len(set(messages)), "a message printed twice"
    # Run again once complete (the same 200 steps): the same run, reported again. It stopped at the export:
    # "--version 200: .../saved_model/backbone/200 exists".
    again = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=env, timeout=1800)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "the run is complete: step 200" in again.stdout
    assert json.load(open(tmp_path / "demo" / "demo_report.json"))["saved_models"] == report["saved_models"]
