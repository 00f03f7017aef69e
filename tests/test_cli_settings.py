"""Flags and settings dataclasses agree on every default, and every output directory records its settings."""

import hashlib
import json
import os
import subprocess
import sys

import pytest

from paths import CONFIGS, REPO

# (CLI module, its settings dataclass, flags whose value the CLI transforms before it reaches the dataclass)
CLIS = [
    # run_pretraining's lengths default to the data's (metadata.json).
    (
        "albert_tf.cli.run_pretraining",
        "albert_tf.pretraining.settings:TrainSettings",
        ("max_seq_length", "max_predictions_per_seq"),
    ),
    ("albert_tf.cli.run_classifier", "albert_tf.cli.run_classifier:ClassifierSettings", ()),
    ("albert_tf.cli.run_race", "albert_tf.cli.run_race:RaceSettings", ()),
    # The task flags are generated from the Task's fields (`albert_tf.cli.flags.define_task_flags`).
    ("albert_tf.cli.run_squad", "albert_tf.cli.run_squad:SquadSettings", ()),
]

CHECK = """
import dataclasses, importlib, json, sys
from absl import flags
cli, settings, transformed = sys.argv[1], sys.argv[2], set(json.loads(sys.argv[3]))
importlib.import_module(cli).define_flags()
module, name = settings.split(":")
cls = getattr(importlib.import_module(module), name)
defaults = cls(output_dir="")
drift = {}
for field in dataclasses.fields(cls):
    if field.name in flags.FLAGS and field.name not in transformed and field.name != "output_dir":
        flag_default = flags.FLAGS[field.name].default
        value = getattr(defaults, field.name)
        value = list(value) if isinstance(value, tuple) else value
        if flag_default != value and not (flag_default is None and value == ""):  # a required path
            drift[field.name] = [flag_default, value]
print(json.dumps(drift))
"""


@pytest.mark.slow
@pytest.mark.parametrize("cli,settings,transformed", CLIS, ids=[c[0].split(".")[-1] for c in CLIS])
def test_flag_defaults_are_the_settings_defaults(cli, settings, transformed):
    result = subprocess.run(
        [sys.executable, "-c", CHECK, cli, settings, json.dumps(list(transformed))],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {}, "flag default != dataclass default"


@pytest.mark.slow
def test_conversion_writes_settings_json_with_flags_version_and_input_hashes(tmp_path):
    import albert_tf
    from albert_tf import formats
    from albert_tf.models.backbone import AlbertBackbone

    source = tmp_path / "ours"
    formats.save(AlbertBackbone.from_albert_config(str(CONFIGS / "albert_tiny.json")), str(source))
    out = tmp_path / "hf"
    argv = ["--input", str(source), "--output_dir", str(out), "--output_format", "hf"]
    for _ in range(2):  # the second run keeps the first's record in `previous`
        result = subprocess.run(
            [sys.executable, "-m", "albert_tf.convert_checkpoint", *argv],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((out / "settings.json").read_text())
    assert record["albert_tf_version"] == albert_tf.__version__
    assert record["argv"] == argv
    assert record["flags"]["output_format"] == "hf" and record["flags"]["input"] == str(source)
    weights = source / "backbone.weights.h5"
    assert record["input_sha256"]["input"][str(weights)] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert len(record["previous"]) == 1 and record["previous"][0]["argv"] == argv
    assert formats.detect(str(out)) == "hf"  # the record does not make the directory something else


@pytest.mark.slow
def test_flags_without_input_file_are_an_error_not_the_demo(tmp_path):
    argv = ["--output_dir", str(tmp_path / "run"), "--albert_config_file", str(CONFIGS / "albert_tiny.json")]
    result = subprocess.run(
        [sys.executable, "-m", "albert_tf.run_pretraining", *argv],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: --input_file required (data_prep's output); run without any flag for the demo"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no demo directory, no run directory


@pytest.mark.parametrize(
    "entry",
    ["albert_tf.cli.run_classifier:cli", "data_prep.build_wordpiece_vocab:cli"],
    ids=["classifier", "wordpiece"],
)
def test_console_script_help_lists_the_flags_and_exits_0(entry, tmp_path):
    module, function = entry.split(":")
    # A console script's __main__ is a wrapper, as here: absl alone would list no flag and exit 1.
    code = f"import sys; sys.argv = ['albert-x', '--help']; from {module} import {function}; {function}()"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "--output_dir" in result.stdout or "--output_file" in result.stdout
    assert "pfor" not in result.stdout  # TensorFlow's own flags stay out
