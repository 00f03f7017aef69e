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


@pytest.mark.slow
def test_demo_end_to_end_through_the_readme_command(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # what a newcomer has
    result = subprocess.run(
        [sys.executable, "-m", "albert_tf.run_pretraining", "--demo_minutes=0.1", f"--demo_dir={tmp_path / 'demo'}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
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
