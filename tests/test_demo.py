"""The built-in demo runs end to end on Python's own documentation and learns."""

import json
import os

import pytest

from albert_tf import demo


def test_demo_corpus_comes_from_the_python_install():
    documents = list(demo.demo_documents())
    assert len(documents) > 300
    assert sum(len(d) for d in documents) > 10000
    assert all(len(d) > 1 for d in documents)  # SOP needs two sentences


@pytest.mark.slow
def test_demo_end_to_end(tmp_path):
    report = demo.run_demo(str(tmp_path / "demo"), minutes=0.1)  # the 200-step minimum
    assert report["steps"] == 200
    before, after = report["before"], report["after"]
    assert before["masked_lm_accuracy"] < 0.01
    assert after["masked_lm_accuracy"] > before["masked_lm_accuracy"] + 0.03, (before, after)
    assert after["masked_lm_loss"] < before["masked_lm_loss"] - 1.0
    for path in report["saved_models"] + [report["final"], report["data"]]:
        assert os.path.isdir(path), path
    assert json.load(open(tmp_path / "demo" / "demo_report.json"))["steps"] == 200
