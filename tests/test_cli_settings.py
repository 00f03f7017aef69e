"""Flags and settings dataclasses agree on every default, and every output directory records its settings."""

import dataclasses
import hashlib
import importlib
import json
import os
import signal
import subprocess
import sys

import pytest

from command_helpers import command_flags, run_command
from paths import CONFIGS, REPO

# (CLI module, its settings dataclass, fields whose flag is the CLI's own: a value it transforms or finds)
CLIS = [
    ("albert_tf.cli.run_pretraining", "albert_tf.pretraining.settings:PretrainSettings", ()),
    ("albert_tf.cli.run_pretraining", "albert_tf.distribution:DistributionSettings", ()),
    # The vocabulary flags' --do_lower_case (`define_vocabulary_flags`): the model's own vocabulary's setting.
    ("albert_tf.cli.run_classifier", "albert_tf.cli.run_classifier:ClassifierSettings", ("do_lower_case",)),
    ("albert_tf.cli.run_race", "albert_tf.cli.run_race:RaceSettings", ("do_lower_case",)),
    ("albert_tf.cli.run_squad", "albert_tf.cli.run_squad:SquadSettings", ("do_lower_case",)),
    ("albert_tf.cli.create_pretraining_data", "data_prep.pipeline:Settings", ()),
    ("albert_tf.cli.export_model", "albert_tf.export.targets:ExportSettings", ()),
    ("albert_tf.cli.predict", "albert_tf.cli.predict:PredictSettings", ()),
    ("albert_tf.cli.convert_checkpoint", "albert_tf.cli.convert_checkpoint:ConvertSettings", ("do_lower_case",)),
    ("albert_tf.cli.train_sentencepiece", "albert_tf.cli.train_sentencepiece:SentencePieceSettings", ()),
    ("albert_tf.cli.build_wordpiece_vocab", "albert_tf.cli.build_wordpiece_vocab:WordPieceSettings", ()),
    ("albert_tf.cli.param_table", "albert_tf.cli.param_table:ParamTableSettings", ()),
    ("albert_tf.cli.inspect", "albert_tf.cli.inspect:InspectSettings", ()),
]


@pytest.mark.parametrize("cli,settings,own", CLIS, ids=[c[1].split(":")[-1] for c in CLIS])
def test_flags_are_generated_from_the_settings_fields(cli, settings, own):
    """Each settings field a command has a flag for is an `option`: the flag has its default and its help,
    so no hand DEFINE repeats (and can drift from) a dataclass default."""
    from albert_tf.options import option_specs

    module, name = settings.split(":")
    cls = getattr(importlib.import_module(module), name)
    specs = {spec.name: spec for spec in option_specs(cls)}
    hand_made, drift = [], {}
    with command_flags() as flag_values:
        importlib.import_module(cli).define_flags()
        for field in dataclasses.fields(cls):
            if field.name not in flag_values or field.name in own:
                continue
            if field.name not in specs:
                hand_made.append(field.name)
                continue
            flag, spec = flag_values[field.name], specs[field.name]
            default = list(spec.default) if isinstance(spec.default, tuple) else spec.default
            default = None if default == "" else default  # a required or optional path: no default flag value
            # An enum flag's help starts with its choices (`<lamb|adamw>: ...`).
            if flag.default != default or not flag.help.endswith(spec.help):
                drift[field.name] = [(flag.default, flag.help), (default, spec.help)]
    assert hand_made == [], "flags defined by hand for settings fields"
    assert drift == {}, "flag default or help != its option's"
    assert specs, f"{name} declares no option"


def test_conversion_writes_settings_json_with_flags_version_and_input_hashes(tmp_path):
    import albert_tf
    from albert_tf import formats
    from albert_tf.models.backbone import AlbertBackbone

    source = tmp_path / "ours"
    formats.save(AlbertBackbone.from_albert_config(str(CONFIGS / "albert_tiny.json")), str(source))
    out = tmp_path / "hf"
    argv = ["--input", str(source), "--output_dir", str(out), "--output_format", "hf"]
    for _ in range(2):  # the second run keeps the first's record in `previous`
        result = run_command("albert_tf.convert_checkpoint", argv)
        assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((out / "settings.json").read_text())
    assert record["albert_tf_version"] == albert_tf.__version__
    assert record["argv"] == argv
    assert record["flags"]["output_format"] == "hf" and record["flags"]["input"] == str(source)
    weights = source / "backbone.weights.h5"
    assert record["input_sha256"]["input"][str(weights)] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert len(record["previous"]) == 1 and record["previous"][0]["argv"] == argv
    assert formats.detect(str(out)) == "hf"  # the record does not make the directory something else


def test_flags_without_input_file_are_an_error_not_the_demo(tmp_path, monkeypatch):
    argv = ["--output_dir", str(tmp_path / "run"), "--albert_config_file", str(CONFIGS / "albert_tiny.json")]
    monkeypatch.chdir(tmp_path)
    result = run_command("albert_tf.run_pretraining", argv)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: --input_file required (data_prep's output); run without any flag for the demo"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no demo directory, no run directory


def test_a_missing_input_file_is_said_before_keras_and_tensorflow_load(tmp_path):
    """It was said once TensorFlow had loaded (19 s on a busy machine), where an unknown flag takes 0.5 s."""
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print(sorted(m for m in ('keras', 'tensorflow') if m in sys.modules)))\n"
        "from albert_tf.cli.run_pretraining import cli\n"
        "cli()\n"
    )
    argv = ["--output_dir", str(tmp_path / "run"), "--albert_config_file", str(CONFIGS / "albert_tiny.json")]
    result = subprocess.run([sys.executable, "-c", code, *argv], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("error: --input_file required")
    assert result.stdout.strip() == "[]"  # neither was imported


@pytest.mark.parametrize(
    "module,flag,required",
    [
        ("albert_tf.run_pretraining", "output_dir", []),
        ("albert_tf.run_classifier", "init_checkpoint", ["--output_dir=out"]),
        ("albert_tf.run_squad", "output_dir", []),
        ("data_prep.create_pretraining_data", "spm_model_file", ["--input_file=in.txt", "--output_dir=out"]),
        ("albert_tf.export", "output_dir", ["--model_dir=model"]),
        ("albert_tf.predict", "spm_model_file", ["--model_dir=model"]),
    ],
)
def test_an_empty_string_flag_is_refused_naming_it(module, flag, required, tmp_path, monkeypatch):
    """`--output_dir ""` or `--init_checkpoint ""` ran as if the flag were absent (or wrote into the cwd)."""
    monkeypatch.chdir(tmp_path)
    result = run_command(module, [*required, f"--{flag}="])
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: --{flag} '': empty value (leave the flag out for its default)"
    ]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "entry",
    ["albert_tf.cli.run_classifier:cli", "albert_tf.cli.build_wordpiece_vocab:cli"],
    ids=["classifier", "wordpiece"],
)
def test_console_script_help_lists_the_flags_and_exits_0(entry, tmp_path):
    module, function = entry.split(":")
    # A console script's __main__ is a wrapper, as here: absl alone would list no flag and exit 1.
    # A subprocess: the console-script wrapper as the installed script runs it, a fresh process whose
    # __main__ is that wrapper, in a bare environment.
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


def test_squad_and_race_keep_their_own_metric_without_the_flag(tmp_path):
    # --metric's default (None) means "the task's own"; it once replaced the task's and failed at the first evaluation.
    from albert_tf.cli import run_race, run_squad

    for cli, argv, metric in ((run_squad, ["--version=2.0"], "f1"), (run_race, ["--data_dir=x"], "accuracy")):
        with command_flags() as flag_values:
            cli.define_flags()
            flag_values(["prog", f"--output_dir={tmp_path}", *argv])
            task, settings = cli.from_flags()
        assert (task.metric, settings.metric) == (metric, None), cli.__name__


def test_a_metric_the_task_does_not_compute_is_refused_before_any_work(tmp_path):
    completed = run_command(
        "albert_tf.run_race", ["--data_dir=x", f"--output_dir={tmp_path / 'out'}", "--nodo_train", "--metric=nosuch"]
    )
    assert completed.returncode == 1
    assert completed.stderr.splitlines() == [
        "error: --metric nosuch: the task computes accuracy, accuracy_high, accuracy_middle"
    ]
    assert not (tmp_path / "out").exists()


CLASSIFIER_ARGV = ["--task_name", "sst-2", "--albert_config_file", str(CONFIGS / "albert_tiny.json"), "--do_train"]


@pytest.mark.slow
@pytest.mark.realdata
def test_a_run_refused_by_the_lock_or_its_flags_writes_no_settings(real_data, pretrained_tiny, tmp_path):
    # A model with its vocabulary: the run passes every check up to the lock.
    argv = ["--task_name", "sst-2", "--init_checkpoint", str(pretrained_tiny), "--do_train"]
    from locking_helpers import hold_lock

    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "settings.json").write_text('{"argv": ["the running job"]}')
    holder = hold_lock(busy)  # another process holds the lock; this one's command is refused by it
    try:
        refused = run_command(
            "albert_tf.run_classifier",
            [
                *argv,
                "--data_dir",
                str(real_data / "glue"),
                "--output_dir",
                str(busy),
                "--max_seq_length",
                "64",
            ],
        )
    finally:
        holder.kill()
        holder.wait()
    assert refused.returncode == 1 and f"in use by pid {holder.pid}" in refused.stderr, refused.stderr[-2000:]
    assert (busy / "settings.json").read_text() == '{"argv": ["the running job"]}'  # the running job's record

    fresh = tmp_path / "fresh"
    too_long = run_command(
        "albert_tf.run_classifier",
        [
            *argv,
            "--data_dir",
            str(real_data / "glue"),
            "--output_dir",
            str(fresh),
            "--max_seq_length",
            "1000",
        ],
    )
    assert too_long.returncode == 1 and "--max_seq_length 1000" in too_long.stderr, too_long.stderr[-2000:]
    assert not fresh.exists()  # no directory holding only settings.json


class Hung(Exception):
    pass


def hung(signum, frame):
    raise Hung("input_hashes still reading after 120 s")


def test_input_hashes_read_only_regular_files_and_never_wait_on_a_fifo(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text("sentence\tlabel\nok\t1\n")
    os.mkfifo(data / "pipe")  # nobody writes it: reading it would wait forever
    model = tmp_path / "model"
    model.mkdir()
    (model / "zero").symlink_to("/dev/zero")  # reading it never ends
    (model / "config.json").write_text("{}")
    from albert_tf.cli.run_record import input_hashes

    # A timer interrupts a blocked open() or an endless read: today's hang is a failure here, not a stuck test run.
    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, 120)
    try:
        hashes = json.loads(json.dumps(input_hashes({"data_dir": str(data), "model_dir": str(model)})))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    train = data / "train.tsv"
    assert hashes["data_dir"] == {
        str(data / "pipe"): "not hashed: not a regular file",
        str(train): hashlib.sha256(train.read_bytes()).hexdigest(),
    }
    assert hashes["model_dir"][str(model / "zero")] == "not hashed: not a regular file"


@pytest.mark.slow
def test_export_records_its_command_and_the_vocabulary_and_survives_a_device_link(tmp_path, wikitext_spm):
    from albert_tf import formats
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.tokenization import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(wikitext_spm)
    config = json.loads((CONFIGS / "albert_tiny.json").read_text()) | {"vocab_size": tokenizer.vocab_size}
    (tmp_path / "config.json").write_text(json.dumps(config))
    model_dir = tmp_path / "model"
    formats.save(AlbertBackbone.from_albert_config(str(tmp_path / "config.json")), str(model_dir), tokenizer=tokenizer)
    (model_dir / "zero").symlink_to("/dev/zero")
    out = tmp_path / "served"
    result = run_command(
        "albert_tf.export", ["--model_dir", str(model_dir), "--output_dir", str(out), "--max_seq_length", "16"]
    )
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((out / "settings.json").read_text())
    assert record["command"] == "albert_tf.export"
    assert record["vocabulary_sha256"] == tokenizer.model_sha256
    assert record["input_sha256"]["model_dir"][str(model_dir / "zero")] == "not hashed: not a regular file"


@pytest.mark.slow
@pytest.mark.realdata
def test_data_prep_writes_settings_beside_its_dataset_and_a_refused_rerun_keeps_them(tmp_path, wikitext_spm, real_data):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text((real_data / "wikitext2" / "test.txt").read_text()[:200_000])
    out = tmp_path / "data"
    argv = [
        "--input_file", str(corpus), "--output_dir", str(out), "--spm_model_file", wikitext_spm,
        "--input_format", "wikitext", "--max_seq_length", "64", "--dupe_factor", "1", "--num_shards", "1",
    ]  # fmt: skip
    made = run_command("data_prep.create_pretraining_data", argv)
    assert made.returncode == 0, made.stderr[-3000:]
    record = json.loads((out / "settings.json").read_text())
    assert record["command"] == "data_prep.create_pretraining_data" and record["argv"] == argv
    assert record["input_sha256"]["input_file"] == {str(corpus): hashlib.sha256(corpus.read_bytes()).hexdigest()}
    before = (out / "settings.json").read_text()
    again = run_command("data_prep.create_pretraining_data", argv)  # no --overwrite: refused
    assert again.returncode == 1 and "already holds a dataset" in again.stderr, again.stderr[-2000:]
    assert (out / "settings.json").read_text() == before


def test_run_pretraining_defines_the_generated_flags_and_the_demos_only():
    """Every run_pretraining flag is generated (the settings' options, the vocabulary, the backend) but the demo's."""
    from albert_tf import tokenization
    from albert_tf.cli import run_pretraining
    from albert_tf.distribution import DistributionSettings
    from albert_tf.options import option_specs
    from albert_tf.pretraining.settings import PretrainSettings

    with command_flags() as flag_values:
        before = set(flag_values)
        run_pretraining.define_flags()
        defined = set(flag_values) - before
    generated = {spec.name for settings in (PretrainSettings, DistributionSettings) for spec in option_specs(settings)}
    vocabulary = {kind.flag for kind in tokenization.kinds()}
    assert defined == generated | vocabulary | {"backend", "demo_minutes", "demo_dir"}
    assert {"input_file", "eval_file", "albert_config_file", "max_seq_length", "do_train", "dry_run"} <= generated


@pytest.mark.parametrize("help_flag", ["--help", "--helpfull"])
def test_run_pretraining_help_lists_the_generated_flags_before_keras_and_tensorflow_load(help_flag):
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print(sorted(m for m in ('keras', 'tensorflow') if m in sys.modules)))\n"
        "from albert_tf.cli.run_pretraining import cli\n"
        "cli()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, help_flag], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert ("undefok:" in result.stdout) == (help_flag == "--helpfull")  # absl's own flags: only when asked
    for name in ("input_file", "max_seq_length", "do_train", "dry_run", "demo_minutes", "strategy"):
        assert f"{name}:" in result.stdout, name
    assert "Must match the data (default: the data's metadata.json)." in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "[]"  # neither was imported
