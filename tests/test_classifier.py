"""GLUE fine-tuning on the real files: readers, metrics, the runner, learning on SST-2, export."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from albert_tf.tokenization import SentencePieceTokenizer, load_tokenizer

from command_helpers import run_command
from finetune_helpers import write_slice
from paths import REPO

pytestmark = pytest.mark.realdata


def test_metrics_against_hand_computed_values():
    from albert_tf.finetuning import metrics

    labels, predictions = [1, 1, 1, 0, 0, 0, 1, 0], [1, 1, 0, 0, 0, 1, 1, 1]
    # tp 3, tn 2, fp 2, fn 1
    assert metrics.accuracy(labels, predictions) == 5 / 8
    assert metrics.f1_score(labels, predictions) == pytest.approx(2 * 3 / (4 + 5))
    assert metrics.matthews_corrcoef(labels, predictions) == pytest.approx((3 * 2 - 2 * 1) / np.sqrt(5 * 4 * 4 * 3))
    assert metrics.matthews_corrcoef([1, 1], [1, 1]) == 0.0  # undefined → 0, as scikit-learn
    binary = metrics.matthews_corrcoef(labels, predictions)
    assert metrics.multiclass_matthews_corrcoef(labels, predictions, 2) == pytest.approx(binary)
    assert metrics.multiclass_matthews_corrcoef([1, 1], [1, 1], 2) == 0.0
    # 3 classes: correct 3 of 6, true counts [2, 2, 2], predicted [3, 1, 2] (scikit-learn's formula).
    three = metrics.multiclass_matthews_corrcoef([0, 1, 2, 0, 1, 2], [0, 2, 1, 0, 0, 2], 3)
    assert three == pytest.approx((3 * 6 - 12) / np.sqrt((36 - 14) * (36 - 12)))
    # class 0: tp 2 of 4 labels, 3 predictions → F1 4/7; class 1: tp 3 of 4 and 5 → 6/9.
    assert metrics.macro_f1(labels, predictions, 2) == pytest.approx((4 / 7 + 6 / 9) / 2)
    assert metrics.majority_share(labels) == 0.5 and metrics.majority_share([2, 2, 0]) == pytest.approx(2 / 3)
    assert metrics.is_better(0.2, 0.3, "mse") and not metrics.is_better(0.3, 0.3, "accuracy")
    assert metrics.pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(0.9933992677987828)
    assert metrics.average_ranks([10, 20, 20, 5]).tolist() == [2.0, 3.5, 3.5, 1.0]
    assert metrics.spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(0.8207826816681233)


def test_glue_readers_match_the_files(real_data):
    from albert_tf.tasks import glue

    expected = {
        ("sst-2", "dev"): (872, 444),
        ("sst-2", "train"): (5000, 2758),
        ("mrpc", "train"): (3668, 2474),
        ("mrpc", "dev"): (408, 279),
        ("cola", "train"): (8551, 6023),
        ("cola", "dev"): (1043, 721),
        ("rte", "dev"): (277, 131),
    }
    for (name, split), (count, ones) in expected.items():
        task = glue.get_task(name)
        examples, report = glue.read_examples(task, glue.split_file(task, str(real_data / "glue"), split), split)
        assert (len(examples), sum(e.label == 1 for e in examples), report.skipped) == (count, ones, 0), name
    mrpc, _ = glue.read_examples(glue.TASKS["mrpc"], str(real_data / "glue" / "MRPC" / "train.tsv"), "train")
    assert not mrpc[0].text_a.startswith("\ufeff") and mrpc[0].text_b  # BOM gone, pair read
    stsb, _ = glue.read_examples(glue.TASKS["sts-b"], str(real_data / "glue" / "STS-B" / "dev.tsv"), "dev")
    assert len(stsb) == 1500 and all(0.0 <= e.label <= 5.0 for e in stsb)
    quoted = [e for e in stsb if e.text_a.count('"') % 2]  # quoting off: unbalanced quotes stay in one field
    assert quoted


def test_bad_rows_are_skipped_with_locations_and_nothing_usable_is_an_error(real_data, tmp_path):
    from albert_tf.tasks import glue

    lines = (real_data / "glue" / "RTE" / "dev.tsv").read_text(encoding="utf-8").splitlines()
    bad = lines[:4] + ["17\tonly two columns"] + [lines[4].rsplit("\t", 1)[0] + "\tmaybe"] + lines[5:8]
    (tmp_path / "dev.tsv").write_text("\n".join(bad) + "\n", encoding="utf-8")
    examples, report = glue.read_examples(glue.TASKS["rte"], str(tmp_path / "dev.tsv"), "dev")
    assert len(examples) == 6 and report.skipped == 2
    assert report.first_problems[0].endswith("dev.tsv:5: 2 columns, needs at least 4")
    assert "dev.tsv:6: unknown label 'maybe'" in report.first_problems[1]
    # Labels are never shifted: every kept example has its own row's label.
    originals, _ = glue.read_examples(glue.TASKS["rte"], str(real_data / "glue" / "RTE" / "dev.tsv"), "dev")
    assert [e.label for e in examples] == [e.label for e in originals[:3]] + [e.label for e in originals[4:7]]
    (tmp_path / "none.tsv").write_text("header\nx\ty\n")
    with pytest.raises(glue.GlueDataError, match="no usable example"):
        glue.read_examples(glue.TASKS["rte"], str(tmp_path / "none.tsv"), "dev")


@pytest.mark.slow
@pytest.mark.parametrize(
    "task,directory,metric,header",
    [
        ("mrpc", "MRPC", "accuracy", True),
        ("sts-b", "STS-B", "pearson", True),
        ("cola", "CoLA", "matthews_corr", False),
        ("rte", "RTE", "accuracy", True),
    ],
)
def test_runner_trains_and_writes_metrics_and_predictions(
    real_data, pretraining_data, tmp_path, task, directory, metric, header
):
    from albert_tf.run_classifier import ClassifierSettings, run
    from albert_tf.tasks import glue

    target = write_slice(real_data, tmp_path, directory, 64, 40, header)
    dev_lines = (target / "dev.tsv").read_text(encoding="utf-8").splitlines()[int(header) :]
    spec = glue.TASKS[task].test
    test_rows = [[str(i)] + [""] * 10 for i in range(len(dev_lines))]
    for row, line in zip(test_rows, dev_lines):
        fields = line.split("\t")
        row[spec.text_a] = fields[glue.TASKS[task].train.text_a]
        if spec.text_b is not None:
            row[spec.text_b] = fields[glue.TASKS[task].train.text_b]
    (target / "test.tsv").write_text("header\n" * int(spec.header) + "\n".join("\t".join(r) for r in test_rows) + "\n")
    settings = ClassifierSettings(
        do_train=True,
        do_eval=True,
        output_dir=str(tmp_path / "out"),
        task_name=task,
        data_dir=str(tmp_path / "glue"),
        tokenizer=SentencePieceTokenizer(pretraining_data["spm"]),
        albert_config_file=pretraining_data["config"],
        do_predict=True,
        max_seq_length=48,
        train_batch_size=16,
        eval_batch_size=16,
        learning_rate=1e-4,
        train_step=6,
        save_checkpoints_steps=3,
        verbose=False,
    )
    summary = run(settings)
    assert [h["global_step"] for h in summary["history"]] == [3, 6]
    assert summary["eval"]["num_examples"] == 40 and metric in summary["eval"]
    evaluations = [json.loads(line) for line in open(tmp_path / "out" / "eval_results.txt")]
    best = json.load(open(tmp_path / "out" / "best" / "eval_results.json"))
    assert best[metric] == max(e[metric] for e in evaluations)
    assert summary["eval"][metric] == pytest.approx(best[metric], abs=1e-6)  # predictions come from the best
    submission = (tmp_path / "out" / glue.TASKS[task].submission).read_text().splitlines()
    assert submission[0] == "index\tprediction" and len(submission) == 41
    values = [line.split("\t") for line in submission[1:]]
    assert [v[0] for v in values] == [str(i) for i in range(40)]
    if task == "sts-b":
        # Regression predictions are finite numbers (a label string or "nan" would not pass).
        assert all(re.fullmatch(r"-?\d+(\.\d+)?(e[-+]?\d+)?", v[1]) and np.isfinite(float(v[1])) for v in values)
        # dev_predictions.tsv keeps every digit: Pearson from the file is the run's (3 decimals moved it).
        written = (tmp_path / "out" / "dev_predictions.tsv").read_text().splitlines()[1:]
        predicted = [float(line.split("\t")[1]) for line in written]
        gold = [float(line.split("\t")[-1]) for line in dev_lines]
        assert np.corrcoef(predicted, gold)[0, 1] == pytest.approx(summary["eval"]["pearson"], abs=1e-6)
    else:
        assert {v[1] for v in values} <= set(glue.TASKS[task].labels)


@pytest.mark.slow
def test_classifier_learns_sst2_from_a_pretrained_checkpoint(sst2_run):
    _, summary = sst2_run
    majority = 444 / 872
    assert summary["eval"]["accuracy"] > majority + 0.08, summary["eval"]


@pytest.mark.slow
def test_fine_tuned_classifier_exports_and_int8_agrees_on_sst2_dev(real_data, sst2_run, pretrained_tiny, tmp_path):
    import tensorflow as tf

    from albert_tf import formats
    from albert_tf.export import export_saved_model, export_tflite, run_tflite
    from albert_tf.tasks import glue
    from albert_tf.tokenization import SentencePieceTokenizer

    output_dir, _ = sst2_run
    loaded = formats.load(
        str(output_dir / "best"), tokenizer=load_tokenizer(str(pretrained_tiny / "final" / "spm.model"))
    )
    model = loaded.model
    assert type(model).__name__ == "AlbertClassifier"
    examples, _ = glue.read_examples(glue.TASKS["sst-2"], str(real_data / "glue" / "SST-2" / "dev.tsv"), "dev")
    features = glue.encode_examples(examples, SentencePieceTokenizer(loaded.spm_model_file), 64)
    expected = model.predict(features, batch_size=128, verbose=0)["logits"].argmax(-1)
    int8 = export_tflite(model, str(tmp_path / "tflite"), "dynamic_int8", max_seq_length=64)
    got = np.array(
        [
            run_tflite(int8, {k: v[i : i + 1] for k, v in features.items()})["logits"][0].argmax()
            for i in range(len(examples))
        ]
    )
    assert (got == expected).mean() >= 0.99
    path = export_saved_model(model, str(tmp_path / "serving"), tokenizer=loaded.tokenizer, max_seq_length=64)
    served = tf.saved_model.load(path).signatures["serve_text"](text_a=tf.constant([e.text_a for e in examples[:32]]))
    assert served["label"].numpy().tolist() == expected[:32].tolist()
    np.testing.assert_allclose(served["probabilities"].numpy().sum(-1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_full_int8_classifier_agrees_on_sst2_dev_and_keeps_the_float_signature(
    real_data, sst2_run, pretrained_tiny, tmp_path
):
    from ai_edge_litert.interpreter import Interpreter

    from albert_tf import formats
    from albert_tf.cli.calibration import calibration_texts
    from albert_tf.export import export_tflite, run_tflite
    from albert_tf.export.representative import DEFAULT_SAMPLES
    from albert_tf.tasks import glue
    from albert_tf.tokenization import SentencePieceTokenizer

    output_dir, _ = sst2_run
    loaded = formats.load(
        str(output_dir / "best"), tokenizer=load_tokenizer(str(pretrained_tiny / "final" / "spm.model"))
    )
    model = loaded.model
    examples, _ = glue.read_examples(glue.TASKS["sst-2"], str(real_data / "glue" / "SST-2" / "dev.tsv"), "dev")
    features = glue.encode_examples(examples, SentencePieceTokenizer(loaded.spm_model_file), 64)
    expected = model.predict(features, batch_size=128, verbose=0)["logits"].argmax(-1)
    # Calibrated on SST-2 train, not dev.
    train = str(real_data / "glue" / "SST-2" / "train.tsv")
    representative = {"calibration_texts": calibration_texts(train, "sst-2", DEFAULT_SAMPLES)}
    files = {
        q: export_tflite(
            model,
            str(tmp_path / q),
            q,
            max_seq_length=64,
            tokenizer=loaded.tokenizer,
            **(representative if q == "full_int8" else {}),
        )
        for q in ("none", "full_int8")
    }
    runners = {q: Interpreter(model_path=f).get_signature_runner("serving_default") for q, f in files.items()}

    def signature(runner):
        return {
            name: (detail["shape"].tolist(), detail["dtype"])
            for details in (runner.get_input_details(), runner.get_output_details())
            for name, detail in details.items()
        }

    assert signature(runners["full_int8"]) == signature(runners["none"])  # int32 ids in, float32 logits out
    got = np.array(
        [
            run_tflite(files["full_int8"], {k: v[i : i + 1] for k, v in features.items()})["logits"][0].argmax()
            for i in range(len(examples))
        ]
    )
    assert (got == expected).mean() >= 0.99, (got == expected).mean()


@pytest.mark.slow
def test_cli_bad_input_is_one_line(tmp_path, pretraining_data):
    # TF's own log level unset, as on a user's machine: its C++ start-up lines must not show either.
    # A subprocess: those lines are written to file descriptor 2 by a fresh process's import of TensorFlow.
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_tf.run_classifier",
            "--task_name",
            "nope",
            "--data_dir",
            str(tmp_path),
            "--spm_model_file",
            pretraining_data["spm"],
            "--output_dir",
            str(tmp_path / "o"),
            "--do_train",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode != 0
    assert result.stderr.splitlines() == [
        "error: --task_name nope: expected one of cola, mismnli, mnli, mrpc, qnli, qqp, rte, sst-2, sts-b, wnli"
    ]


# ---- every input checked before the work; the run's end is not failed by a late signal ---------------
def _sst2_without_test(real_data, root):
    """`root/glue/SST-2/{train,dev}.tsv` (a few real rows), no test.tsv."""
    target = root / "glue" / "SST-2"
    target.mkdir(parents=True)
    for name in ("train.tsv", "dev.tsv"):
        lines = (real_data / "glue" / "SST-2" / name).read_text(encoding="utf-8-sig").splitlines()
        (target / name).write_text("\n".join(lines[:41]) + "\n", encoding="utf-8")
    return root / "glue"


@pytest.mark.slow
def test_do_predict_without_test_tsv_fails_before_training_naming_the_file(real_data, pretraining_data, tmp_path):
    glue_dir = _sst2_without_test(real_data, tmp_path)
    # Both layouts of --data_dir: the GLUE root and the task's own directory; the path is never doubled.
    for data_dir in (glue_dir, glue_dir / "SST-2"):
        output_dir = tmp_path / f"out-{data_dir.name}"
        result = run_command(
            "albert_tf.run_classifier",
            ["--task_name=sst-2", f"--data_dir={data_dir}", f"--output_dir={output_dir}"]
            + [f"--spm_model_file={pretraining_data['spm']}", f"--albert_config_file={pretraining_data['config']}"]
            + ["--do_train", "--do_eval", "--do_predict", "--max_seq_length=32", "--train_step=2"],
        )
        missing = glue_dir / "SST-2" / "test.tsv"
        assert result.returncode == 1, result.stderr[-3000:]
        lines = result.stderr.strip().splitlines()
        assert lines[-1].startswith(f"error: {missing}: no such file or directory"), result.stderr[-3000:]
        assert "SST-2/SST-2" not in result.stderr and "Traceback" not in result.stderr
        # Nothing trained: no evaluation, no best/, no summary.
        assert not (output_dir / "eval_results.txt").exists() and not (output_dir / "best").exists()


@pytest.mark.slow
def test_a_sigterm_after_the_work_does_not_fail_the_run(tmp_path):
    # The work done (summary written), a SIGTERM while the CLI prints and exits must not turn it into 143.
    # A subprocess: the signal is delivered to the process and its exit status is under test.
    script = f"""
import os, signal
from albert_tf.cli import run_classifier
from albert_tf.finetuning import runner

runner.run = lambda task, settings, **kwargs: {{"task": task.name}}
printed = runner.print_summary
def print_then_terminated(summary):
    os.kill(os.getpid(), signal.SIGTERM)
    printed(summary)
runner.print_summary = print_then_terminated
import sys
sys.argv = ["run_classifier", "--task_name=sst-2", "--data_dir={tmp_path}", "--output_dir={tmp_path / "out"}"]
run_classifier.cli()
"""
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout[result.stdout.index("{") :]) == {"task": "sst-2"}


# ---- fine-tuning: values out of range, a huge GLUE field, a restarted run (hardening probes) ----
@pytest.mark.realdata
def test_glue_field_over_the_csv_limit_is_a_skipped_row(real_data, tmp_path):
    from albert_tf.tasks import glue

    lines = (real_data / "glue" / "RTE" / "dev.tsv").read_text(encoding="utf-8").splitlines()
    index, sentence1, sentence2, label = lines[3].split("\t")
    huge = "\t".join([index, sentence1 + " word" * 40_000, sentence2, label])
    (tmp_path / "dev.tsv").write_text("\n".join(lines[:3] + [huge] + lines[4:9]) + "\n", encoding="utf-8")
    examples, report = glue.read_examples(glue.TASKS["rte"], str(tmp_path / "dev.tsv"), "dev")
    assert report.skipped == 1 and report.rows == 8 and len(examples) == 7
    assert report.first_problems == [f"{tmp_path / 'dev.tsv'}:4: a field longer than 131,072 characters"]
    originals, _ = glue.read_examples(glue.TASKS["rte"], str(real_data / "glue" / "RTE" / "dev.tsv"), "dev")
    kept = originals[:2] + originals[3:8]
    assert [(e.text_a, e.label) for e in examples] == [(e.text_a, e.label) for e in kept]


@pytest.mark.parametrize(
    "name,value",
    [
        ("train_step", 0),
        ("save_checkpoints_steps", -5),
        ("train_batch_size", 0),
        ("eval_batch_size", 0),
        ("learning_rate", -5e-5),
        ("learning_rate", float("inf")),
        ("max_seq_length", 0),
        ("warmup_step", -1),
        ("dropout", 1.5),
        ("num_train_epochs", 0.0),
        ("grad_accum_steps", 0),
    ],
)
def test_finetuning_settings_refuse_values_out_of_range(tmp_path, name, value):
    from albert_tf.finetuning.settings import FineTuneError, FineTuneSettings
    from albert_tf.run_squad import SquadSettings

    for settings in (FineTuneSettings, SquadSettings):
        with pytest.raises(FineTuneError, match=f"^--{name} {value}: must be"):
            settings(output_dir=str(tmp_path), **{name: value})


def test_a_seed_keras_cannot_take_is_refused(tmp_path):
    from albert_tf.finetuning.settings import FineTuneError, FineTuneSettings
    from albert_tf.pretraining.settings import PretrainingError, PretrainSettings

    for settings, error in ((FineTuneSettings, FineTuneError), (PretrainSettings, PretrainingError)):
        for seed in (-1, 2**32):
            with pytest.raises(error, match=f"^--seed {seed}: must be in \\[0, 2\\*\\*32 - 1\\]"):
                settings(output_dir=str(tmp_path), seed=seed)


def test_task_flags_out_of_range_are_refused():
    from albert_tf.tasks import race, squad

    with pytest.raises(squad.SquadDataError, match="^--doc_stride 0: must be a positive number"):
        squad.SquadTask(doc_stride=0)
    with pytest.raises(squad.SquadDataError, match="^--n_best_size -1: must be a positive number"):
        squad.SquadTask(n_best_size=-1)
    with pytest.raises(race.RaceDataError, match="^--max_qa_length 0: must be a positive number"):
        race.RaceTask("data", max_qa_length=0)


def test_cli_negative_learning_rate_is_one_line(tmp_path):
    from paths import CONFIGS

    result = run_command(
        "albert_tf.run_classifier",
        ["--task_name", "sst-2", "--data_dir", tmp_path, "--output_dir", tmp_path / "out"]
        + ["--albert_config_file", CONFIGS / "albert_tiny.json", "--do_train", "--learning_rate=-1e-5"],
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == "error: --learning_rate -1e-05: must be a positive number"
    assert not (tmp_path / "out").exists()


def test_max_seq_length_too_short_for_the_task_fails_before_any_work(tmp_path):
    from albert_tf.finetuning import runner
    from albert_tf.finetuning.settings import FineTuneError, FineTuneSettings
    from albert_tf.tasks import glue, race, squad

    cases = [
        (glue.task("mrpc", str(tmp_path)), 4, "needs at least 5 \\(\\[CLS\\] text_a \\[SEP\\] text_b \\[SEP\\]\\)"),
        (glue.task("sst-2", str(tmp_path)), 2, "needs at least 3"),
        (race.RaceTask(str(tmp_path)), 4, "needs at least 5"),
        (squad.SquadTask(max_query_length=64), 64, "needs at least 68 .*--max_query_length 64"),
        (squad.SquadTask(version="2.0", start_n_top=100), 96, "needs at least 100 .*--start_n_top 100"),
        (squad.SquadTask(version="1.1", start_n_top=100), 60, "needs at least 68 .*--max_query_length 64"),
    ]
    for task, length, message in cases:
        settings = FineTuneSettings(output_dir=str(tmp_path / "out"), max_seq_length=length, verbose=False)
        with pytest.raises(FineTuneError, match=f"^--max_seq_length {length}: .* {message}"):
            runner.run(task, settings)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_restarted_finetuning_run_keeps_the_killed_runs_better_best(tmp_path):
    """A run killed after writing best/ but before its first checkpoint starts again from step 0."""
    import shutil

    from albert_tf.finetuning import training
    from albert_tf.finetuning.datasets import train_dataset
    from albert_tf.finetuning.settings import FineTuneSettings
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.classifier import AlbertClassifier

    from finetune_helpers import NO_DEV, ScriptedTask, no_predictions
    from paths import CONFIGS
    from toy_inputs import good_request

    rng = np.random.default_rng(0)
    features = good_request(16)
    del features["masked_lm_positions"]
    labels = rng.integers(0, 2, 16).astype("int32")
    settings = FineTuneSettings(
        output_dir=str(tmp_path), train_step=2, save_checkpoints_steps=1, train_batch_size=8, verbose=False
    )

    def train(scores):
        shutil.rmtree(tmp_path / "checkpoints", ignore_errors=True)  # killed before any checkpoint: step 0
        model = AlbertClassifier(AlbertBackbone.from_albert_config(str(CONFIGS / "albert_tiny.json")), 2)
        dataset = train_dataset(features, labels, 8, 0)
        task = ScriptedTask([{"accuracy": score} for score in scores])
        return training.train(task, model, dataset, settings, NO_DEV, no_predictions)

    train([0.9, 0.7])  # the run that was killed after its evaluations
    kept = (tmp_path / "best" / "model.keras").read_bytes()
    result = train([0.5, 0.8])  # restarted at step 0: worse scores
    assert result["best"]["accuracy"] == 0.9 and (tmp_path / "best" / "model.keras").read_bytes() == kept
    assert json.loads((tmp_path / "best" / "eval_results.json").read_text())["accuracy"] == 0.9
    train([0.95, 0.1])
    assert json.loads((tmp_path / "best" / "eval_results.json").read_text())["accuracy"] == 0.95
    lines = [json.loads(line) for line in (tmp_path / "eval_results.txt").read_text().splitlines()]
    assert [line["accuracy"] for line in lines] == [0.9, 0.7, 0.5, 0.8, 0.95, 0.1]
    runs = [line["run"] for line in lines]
    assert runs[0] == runs[1] != runs[2] == runs[3] != runs[4] == runs[5] and len(set(runs)) == 3


@pytest.mark.parametrize("asked", [["-v", "1"], ["ALBERT_TF_TRACEBACK=1"]])
def test_cli_shows_the_traceback_when_asked(tmp_path, asked, monkeypatch):
    from paths import CONFIGS

    flags = asked if asked[0] == "-v" else []
    for name, value in (a.split("=") for a in asked if "=" in a):
        monkeypatch.setenv(name, value)
    # The command re-raises; run_command prints the traceback and exits 1 as the interpreter does.
    result = run_command(
        "albert_tf.run_classifier",
        ["--task_name", "sst-2", "--data_dir", str(tmp_path)]
        + ["--output_dir", str(tmp_path / "out"), "--albert_config_file", str(CONFIGS / "albert_tiny.json")]
        + ["--do_train", "--learning_rate=-1e-5", *flags],
    )
    assert result.returncode == 1 and "Traceback (most recent call last)" in result.stderr
    assert result.stderr.strip().splitlines()[-1].endswith("--learning_rate -1e-05: must be a positive number")
    assert not (tmp_path / "out").exists()
