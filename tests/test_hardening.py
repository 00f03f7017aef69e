"""Hardening II (issue 30): each test feeds what a hostile or careless user would, and checks the refusal.

Tests share the style of `test_failures.py`: one broken input, the one-line
error it must give, and what must be kept.
"""

import errno
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.publish import STAGING_PREFIX

from paths import CONFIGS, REPO

SEQ = 8
PREDICTIONS = 2
VOCAB = 8000  # configs/albert_tiny.json


def tiny_pretrainer():
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.pretrainer import AlbertPretrainer

    return AlbertPretrainer(AlbertBackbone.from_albert_config(str(CONFIGS / "albert_tiny.json")))


def good_request(batch):
    rng = np.random.default_rng(0)
    return {
        "input_ids": rng.integers(5, VOCAB, (batch, SEQ)).astype("int32"),
        "input_mask": np.ones((batch, SEQ), "int32"),
        "segment_ids": (np.arange(SEQ) >= SEQ // 2).astype("int32") * np.ones((batch, SEQ), "int32"),
        "masked_lm_positions": np.tile(np.array([1, 3], "int32"), (batch, 1)),
    }


def with_value(request, name, value):
    changed = {k: v.copy() for k, v in request.items()}
    changed[name][0, 1] = value
    return changed


# Values the model would misread: Keras' take wraps negatives, TF broadcasts batch 1.
BAD_VALUES = [
    ("input_ids", -7),
    ("input_ids", VOCAB),
    ("segment_ids", -1),
    ("segment_ids", 2),
    ("input_mask", -1),
    ("input_mask", 2),
    ("masked_lm_positions", -1),
    ("masked_lm_positions", SEQ),
]


@pytest.fixture(scope="module")
def pretrainer():
    return tiny_pretrainer()


@pytest.fixture(scope="module")
def served(pretrainer, tmp_path_factory):
    from albert_tf.export import export_saved_model

    path = export_saved_model(pretrainer, str(tmp_path_factory.mktemp("served")), warmup=False, max_seq_length=16)
    return tf.saved_model.load(path).signatures["serving_default"]


def call(signature, request):
    return signature(**{name: tf.constant(value) for name, value in request.items()})


@pytest.mark.parametrize("name,value", BAD_VALUES)
def test_serving_default_refuses_values_out_of_range_and_keeps_serving(pretrainer, served, name, value):
    request = good_request(2)
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"{name}: every value must be in"):
        call(served, with_value(request, name, value))
    expected = pretrainer(request, training=False)["mlm_logits"]
    np.testing.assert_allclose(call(served, request)["mlm_logits"], expected, atol=1e-5)


@pytest.mark.parametrize(
    "name,shape",
    [
        ("input_mask", (1, SEQ)),
        ("segment_ids", (1, SEQ)),
        ("input_mask", (2, SEQ - 3)),
        ("masked_lm_positions", (1, 2)),
    ],
)
def test_serving_default_refuses_mismatched_batch_and_length(served, name, shape):
    request = good_request(2)
    request[name] = request[name][: shape[0], : shape[1]]
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"{name} must have the (shape|batch size) of input_ids"):
        call(served, request)


@pytest.mark.parametrize("length", [0, 129])
def test_serving_default_refuses_lengths_outside_the_position_table(served, length):
    request = {name: np.resize(value, (2, length)) for name, value in good_request(2).items()}
    request["masked_lm_positions"] = np.zeros((2, 0), "int32")
    with pytest.raises(tf.errors.InvalidArgumentError, match="input_ids: the sequence length must be in \\[1, max_pos"):
        call(served, request)


@pytest.fixture(scope="module")
def tflite_file(pretrainer, tmp_path_factory):
    from albert_tf.export import export_tflite

    return export_tflite(
        pretrainer, str(tmp_path_factory.mktemp("tflite")), max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS
    )


@pytest.mark.parametrize("name,value", BAD_VALUES)
def test_tflite_file_refuses_values_out_of_range(pretrainer, tflite_file, name, value):
    from ai_edge_litert.interpreter import Interpreter

    from albert_tf.export import run_tflite
    from albert_tf.export.input_checks import ServingInputError

    request = good_request(1)
    bad = with_value(request, name, value)
    # The file alone (an app's interpreter): builtin GATHER's bounds check refuses it.
    runner = Interpreter(model_path=tflite_file).get_signature_runner("serving_default")
    with pytest.raises(RuntimeError, match="gather index out of bounds"):
        runner(**bad)
    # Our runner names the input before invoking.
    with pytest.raises(ServingInputError, match=f"^{name}: {value} at \\[0, 1\\] is outside"):
        run_tflite(tflite_file, bad)
    # Valid values are unchanged by the guard.
    expected = pretrainer(request, training=False)["mlm_logits"]
    np.testing.assert_allclose(runner(**request)["mlm_logits"], expected, atol=1e-4)


def test_run_tflite_refuses_other_shapes_naming_the_input(tflite_file):
    from albert_tf.export import run_tflite
    from albert_tf.export.input_checks import ServingInputError

    request = good_request(2)
    with pytest.raises(ServingInputError, match=r"input_ids: shape \(2, 8\), but the file takes \(1, 8\)"):
        run_tflite(tflite_file, request)
    request = good_request(1)
    del request["segment_ids"]
    with pytest.raises(ServingInputError, match=r"missing \['segment_ids'\]"):
        run_tflite(tflite_file, request)


# ---- defect 6: predict --output_file that is --input_file ----------------------------------------
def test_predict_refuses_an_output_file_that_is_the_input_file(tmp_path, monkeypatch):
    from albert_tf.predict import PredictError, run

    lines = tmp_path / "lines.txt"
    lines.write_text("one line\nanother line\n")
    (tmp_path / "link.txt").symlink_to(lines)
    os_link = tmp_path / "hard.txt"
    os_link.hardlink_to(lines)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    for output in (
        str(lines),
        "../lines.txt",
        str(tmp_path / "sub" / ".." / "lines.txt"),
        "../link.txt",
        "../hard.txt",
    ):
        with pytest.raises(PredictError, match="is --input_file .* it would be overwritten"):
            run("no-model-needed", input_file=str(lines), output_file=output)
    assert lines.read_text() == "one line\nanother line\n"
    with pytest.raises(PredictError, match="is a directory"):
        run("no-model-needed", input_file=str(lines), output_file=str(tmp_path))


# ---- defect 7: one GLUE field over csv's 131,072-character limit ---------------------------------
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


# ---- zero, negative or non-finite counts, intervals and rates: one line naming the flag ---------
@pytest.mark.parametrize(
    "name,value",
    [
        ("num_train_steps", 0),
        ("save_checkpoints_steps", 0),
        ("keep_checkpoint_max", 0),
        ("train_batch_size", -8),
        ("learning_rate", -1e-3),
        ("learning_rate", float("nan")),
        ("max_predictions_per_seq", 0),
        ("log_every_steps", 0),
        ("num_warmup_steps", -1),
        ("grad_accum_steps", 0),
    ],
)
def test_pretraining_settings_refuse_values_out_of_range(tmp_path, name, value):
    from albert_tf.pretraining.settings import TrainingError, TrainSettings

    with pytest.raises(TrainingError, match=f"^--{name} {value}: must be"):
        TrainSettings(output_dir=str(tmp_path), **{name: value})


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
    from albert_tf.run_squad import SquadSettings
    from albert_tf.tasks.settings import FineTuneError, FineTuneSettings

    for settings in (FineTuneSettings, SquadSettings):
        with pytest.raises(FineTuneError, match=f"^--{name} {value}: must be"):
            settings(output_dir=str(tmp_path), **{name: value})


def test_a_seed_keras_cannot_take_is_refused(tmp_path):
    from albert_tf.pretraining.settings import TrainingError, TrainSettings
    from albert_tf.tasks.settings import FineTuneError, FineTuneSettings

    for settings, error in ((FineTuneSettings, FineTuneError), (TrainSettings, TrainingError)):
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


@pytest.mark.slow
def test_cli_negative_learning_rate_is_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "albert_tf.run_classifier", "--task_name", "sst-2", "--data_dir", str(tmp_path)]
        + ["--output_dir", str(tmp_path / "out"), "--albert_config_file", str(CONFIGS / "albert_tiny.json")]
        + ["--do_train", "--learning_rate=-1e-5"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == "error: --learning_rate -1e-05: must be a positive number"
    assert not (tmp_path / "out").exists()


# ---- max_seq_length too short to hold any text ---------------------------------------------------
def test_max_seq_length_too_short_for_the_task_fails_before_any_work(tmp_path):
    from albert_tf.tasks import glue, race, runner, squad
    from albert_tf.tasks.settings import FineTuneError, FineTuneSettings

    cases = [
        (glue.task("mrpc", str(tmp_path)), 4, "needs at least 5 \\(\\[CLS\\] text_a \\[SEP\\] text_b \\[SEP\\]\\)"),
        (glue.task("sst-2", str(tmp_path)), 2, "needs at least 3"),
        (race.RaceTask(str(tmp_path)), 4, "needs at least 5"),
        (squad.SquadTask(max_query_length=64), 64, "needs at least 68 .*--max_query_length 64"),
    ]
    for task, length, message in cases:
        settings = FineTuneSettings(output_dir=str(tmp_path / "out"), max_seq_length=length, verbose=False)
        with pytest.raises(FineTuneError, match=f"^--max_seq_length {length}: .* {message}"):
            runner.run(task, settings)
    assert not (tmp_path / "out").exists()


# ---- malformed SQuAD JSON, duplicate ids ---------------------------------------------------------
def squad_file(tmp_path, qas, context="Paris is in France.", top=None):
    data = top if top is not None else {"data": [{"paragraphs": [{"context": context, "qas": qas}]}]}
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(data))
    return str(path)


def good_question(qas_id="q1"):
    return {"id": qas_id, "question": "Where is Paris?", "answers": [{"text": "France", "answer_start": 12}]}


@pytest.mark.parametrize(
    "bad,problem",
    [
        ({"id": "b", "question": "Where?"}, "no answer with an answer_start"),
        ({"id": "b", "question": "Where?", "answers": [{"text": "France", "answer_start": "12"}]}, '"answers" must be'),
        ({"id": "b", "question": "Where?", "answers": "France"}, '"answers" must be'),
        ({"id": "b", "question": "Where?", "answers": [{"text": "France", "answer_start": -3}]}, "is not at"),
        ({"question": "Where?", "answers": []}, 'needs an "id" and a "question"'),
        ({"id": "b", "question": None, "answers": []}, 'needs an "id" and a "question"'),
        (good_question("q1"), "question q1: duplicate id"),
    ],
)
def test_squad_malformed_questions_are_skipped_and_named(tmp_path, bad, problem):
    from albert_tf.tasks import squad

    path = squad_file(tmp_path, [good_question("q1"), bad, good_question("q3")])
    examples, report = squad.read_examples(path, is_training=True)
    assert [e.qas_id for e in examples] == ["q1", "q3"]
    assert report["skipped"] == 1 and problem in report["first_problems"][0]
    assert "data[0].paragraphs[0]" in report["first_problems"][0]


def test_squad_malformed_files_are_one_clear_error(tmp_path):
    from albert_tf.tasks import squad

    for top in ([good_question()], {"data": {"x": 1}}, {"version": "1.1"}):
        with pytest.raises(squad.SquadDataError, match='not a SQuAD JSON file \\(expected an object with a "data"'):
            squad.read_examples(squad_file(tmp_path, [], top=top), is_training=False)
    no_context = {
        "data": [{"paragraphs": [{"qas": [good_question()]}, {"context": "x", "qas": [good_question("q2")]}]}]
    }
    examples, report = squad.read_examples(squad_file(tmp_path, [], top=no_context), is_training=False)
    assert [e.qas_id for e in examples] == ["q2"] and report["skipped"] == 1
    assert 'paragraphs[0]: needs a "context" string' in report["first_problems"][0]
    with pytest.raises(squad.SquadDataError, match="no usable question"):
        squad.read_examples(squad_file(tmp_path, [], top={"data": [{"paragraphs": "none"}]}), is_training=False)
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(squad.SquadDataError, match="not a SQuAD JSON file \\(RecursionError"):
        squad.read_examples(str(tmp_path / "deep.json"), is_training=False)
    (tmp_path / "bom.json").write_text(json.dumps({"data": no_context["data"]}), encoding="utf-8-sig")
    assert [e.qas_id for e in squad.read_examples(str(tmp_path / "bom.json"), is_training=False)[0]] == ["q2"]


# ---- RACE: one bad question drops that question, not its article ---------------------------------
@pytest.mark.realdata
def test_race_bad_question_drops_only_itself(real_data, tmp_path):
    from albert_tf.tasks import race

    source = sorted((real_data / "race" / "dev" / "middle").glob("*.txt"))[0]
    record = json.loads(source.read_text(encoding="utf-8"))
    assert len(record["questions"]) >= 3
    record["options"][1] = record["options"][1][:3]  # three options
    record["answers"][0] = [record["answers"][0]]  # a list, not a letter
    (tmp_path / "dev" / "middle").mkdir(parents=True)
    (tmp_path / "dev" / "middle" / source.name).write_text(json.dumps(record))
    examples, report = race.read_examples(str(tmp_path), "dev", ("middle",))
    kept = [i for i in range(len(record["questions"])) if i not in (0, 1)]
    assert [e.question for e in examples] == [record["questions"][i] for i in kept]
    assert [e.label for e in examples] == ["ABCD".index(record["answers"][i]) for i in kept]
    assert report["skipped"] == 2 and f"{source.name}: question 1: needs" in report["first_problems"][1]


# ---- pretraining resumed with another batch size --------------------------------------------------
@pytest.mark.realdata
@pytest.mark.slow
def test_resume_with_another_batch_size_is_one_clear_error(pretraining_data, tmp_path):
    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import TrainingError, TrainSettings

    def settings(batch, steps):
        return TrainSettings(
            output_dir=str(tmp_path / "run"),
            train_batch_size=batch,
            max_seq_length=64,
            num_train_steps=steps,
            num_warmup_steps=0,
            save_checkpoints_steps=2,
            verbose=False,
        )

    pretrain(settings(8, 2), pretraining_data["config"], pretraining_data["data"])
    kept = sorted(os.listdir(tmp_path / "run" / "checkpoints"))
    with pytest.raises(TrainingError, match="trained with --train_batch_size 8 \\(now 4\\).*same flags"):
        pretrain(settings(4, 4), pretraining_data["config"], pretraining_data["data"])
    assert sorted(os.listdir(tmp_path / "run" / "checkpoints")) == kept
    pretrain(settings(8, 4), pretraining_data["config"], pretraining_data["data"])  # the same flags resume


# ---- data_prep on a full disk ----------------------------------------------------------------------
TOY_LINES = [f"the quick brown fox number {i} jumps over the lazy dog. it runs away fast." for i in range(200)]


@pytest.fixture(scope="module")
def toy_spm(tmp_path_factory):
    from data_prep.train_sentencepiece import train_sentencepiece

    return train_sentencepiece(TOY_LINES, str(tmp_path_factory.mktemp("spm") / "toy"), vocab_size=80)


def test_data_prep_out_of_disk_is_one_line_and_keeps_the_old_dataset(toy_spm, tmp_path, monkeypatch):
    from data_prep import pipeline

    (tmp_path / "in.txt").write_text("\n\n".join(" ".join(TOY_LINES[i : i + 5]) for i in range(0, 200, 5)))
    settings = pipeline.Settings(
        input_file=str(tmp_path / "in.txt"),
        output_dir=str(tmp_path / "out"),
        spm_model_file=toy_spm,
        max_seq_length=32,
        dupe_factor=1,
        num_shards=2,
        overwrite=True,
    )
    pipeline.run(settings)
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")}

    def full_disk(stream, record):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pipeline, "write_record", full_disk)
    with pytest.raises(pipeline.DataPrepError, match="out: no space left on device while writing the dataset"):
        pipeline.run(settings)
    after = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")}
    assert after == before and not [p for p in os.listdir(tmp_path / "out") if p.startswith(STAGING_PREFIX)]


# ---- export --version: negative or existing refused; killed exports' staging removed --------------
def test_export_refuses_negative_or_existing_versions_and_removes_stale_staging(pretrainer, tmp_path):
    from albert_tf.export import ExportError, export_saved_model

    base = tmp_path / "serving"
    first = export_saved_model(pretrainer.backbone, str(base), version=3, warmup=False)
    served = sorted(os.listdir(first))
    stale = base / ".staging-7-abc123"  # what a killed export leaves
    (stale / "variables").mkdir(parents=True)
    (stale / "variables" / "variables.data-00000-of-00001").write_bytes(b"x" * 1000)
    with pytest.raises(
        ExportError, match=r"^--version 3: .*/serving/3 exists \(TF Serving may be serving it\).* \(4\)"
    ):
        export_saved_model(pretrainer.backbone, str(base), version=3, warmup=False)
    with pytest.raises(ExportError, match=r"^--version -1: TF Serving's versions are numbers ≥ 0"):
        export_saved_model(pretrainer.backbone, str(base), version=-1, warmup=False)
    assert sorted(os.listdir(first)) == served and stale.exists()
    assert export_saved_model(pretrainer.backbone, str(base), warmup=False).endswith("/serving/4")
    assert sorted(os.listdir(base)) == ["3", "4"]


# ---- file modes: what is published follows the umask ---------------------------------------------
@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def modes(directory):
    return {str(p.relative_to(directory)): oct(p.stat().st_mode & 0o777) for p in [directory, *directory.rglob("*")]}


def test_published_directories_and_files_follow_the_umask(umask_022, tmp_path):
    from albert_tf import formats
    from albert_tf.convert_checkpoint import convert
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.tasks import best_model  # what fine-tuning publishes as best/

    backbone = AlbertBackbone.from_albert_config(str(CONFIGS / "albert_tiny.json"))
    model_dir = str(tmp_path / "model")
    formats.save(backbone, model_dir)
    convert(model_dir, output_dir=str(tmp_path / "hf"), output_format="hf")
    assert modes(tmp_path / "hf")["model.safetensors"] == "0o644"
    best_model.save(backbone, str(tmp_path / "run"), {"accuracy": 0.5})
    best = modes(tmp_path / "run" / "best")
    assert best["."] == "0o755" and set(best.values()) <= {"0o755", "0o644"}, best


# ---- a fine-tuning run killed and started again -----------------------------------------------------
def test_a_restarted_finetuning_run_keeps_the_killed_runs_better_best(tmp_path):
    """A run killed after writing best/ but before its first checkpoint starts again from step 0."""
    import shutil

    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.tasks import losses, training
    from albert_tf.tasks.datasets import train_dataset
    from albert_tf.tasks.settings import FineTuneSettings

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
        given = iter(scores)
        return training.train(
            model, dataset, settings, losses.classification_loss, lambda m: {"accuracy": next(given)}, "accuracy"
        )

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


# ---- resource cliffs ---------------------------------------------------------------------------------
def test_text_without_spaces_over_the_limit_is_refused_and_with_spaces_is_bounded(toy_spm):
    from albert_tf.tokenization import MAX_SEGMENTED_CHARS, SentencePieceTokenizer, TokenizerError

    tokenizer = SentencePieceTokenizer(toy_spm)
    no_spaces = "thequickbrownfox" * (MAX_SEGMENTED_CHARS // 16 + 1)
    with pytest.raises(TokenizerError, match="^a text of 1,000,0.. characters to segment at once, over the limit"):
        tokenizer.encode(no_spaces, max_ids=16)
    with pytest.raises(TokenizerError, match="over the limit of 1,000,000"):
        tokenizer.encode(no_spaces)
    # With spaces only the first max_ids words are segmented: no limit reached, the ids of the start.
    long_text = " ".join(TOY_LINES * 200)
    assert len(long_text) > 2 * MAX_SEGMENTED_CHARS
    assert tokenizer.encode(long_text, max_ids=16) == tokenizer.encode(" ".join(TOY_LINES[:3]))[:16]
    assert tokenizer.encode(no_spaces[:1000], max_ids=16) == tokenizer.encode(no_spaces[:1000])[:16]


def test_serve_text_refuses_a_text_over_the_limit_and_keeps_serving(toy_spm, tmp_path):
    from albert_tf.export import export_saved_model
    from albert_tf.tokenization import MAX_SEGMENTED_CHARS, SentencePieceTokenizer

    backbone = toy_backbone()
    path = export_saved_model(backbone, str(tmp_path / "served"), spm_model_file=toy_spm, max_seq_length=16)
    serve = tf.saved_model.load(path).signatures["serve_text"]
    tokenizer = SentencePieceTokenizer(toy_spm)
    with pytest.raises(tf.errors.InvalidArgumentError, match="a text has more than 1,000,000 characters to segment"):
        serve(text_a=tf.constant(["fine", "x" * (MAX_SEGMENTED_CHARS + 1)]))
    too_much = "the texts of the request \\(text_a, or text_b\\) have more than 1,000,000 characters to segment in all"
    with pytest.raises(tf.errors.InvalidArgumentError, match=too_much):  # the request's total
        serve(text_a=tf.constant(["x" * (MAX_SEGMENTED_CHARS // 2 + 1)] * 2))
    with pytest.raises(tf.errors.InvalidArgumentError, match="text_a: a request needs at least one text"):
        serve(text_a=tf.constant([], tf.string))
    answered = serve(text_a=tf.constant(["the fox", "y" * 1000]))
    first = [tokenizer.cls_id] + tokenizer.encode("the fox") + [tokenizer.sep_id]
    assert answered["input_ids"].numpy()[0, : len(first)].tolist() == first


def toy_backbone():
    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertBackbone

    config = json.loads((CONFIGS / "albert_tiny.json").read_text())
    config["vocab_size"] = 80
    return AlbertBackbone.from_albert_config(AlbertConfig.from_dict(config))


def test_predict_names_the_line_whose_text_is_over_the_limit(toy_spm, tmp_path):
    from albert_tf import formats
    from albert_tf.predict import PredictError, run
    from albert_tf.tokenization import MAX_SEGMENTED_CHARS

    model_dir = str(tmp_path / "model")
    formats.save(toy_backbone(), model_dir)
    lines = tmp_path / "lines.txt"
    lines.write_text("a fine line\n" + "z" * (MAX_SEGMENTED_CHARS + 5) + "\n")
    output = tmp_path / "out.npy"
    with pytest.raises(PredictError, match=f"^{lines}:2: a text of 1,000,005 characters"):
        run(model_dir, input_file=str(lines), output_file=str(output), spm_model_file=toy_spm, progress=False)
    with pytest.raises(PredictError, match="^--text:1: a text of 1,000,005 characters"):
        run(model_dir, text="z" * (MAX_SEGMENTED_CHARS + 5), spm_model_file=toy_spm)
    assert not output.exists()
    # A long line with spaces is fine (only its first words are tokenised).
    lines.write_text("the quick brown fox " * 250_000 + "\n")
    run(model_dir, input_file=str(lines), output_file=str(output), spm_model_file=toy_spm, progress=False)
    assert np.load(output).shape == (1, 64)


@pytest.mark.parametrize("remat", [False, True])
def test_a_batch_far_beyond_memory_is_refused_before_training(tmp_path, monkeypatch, remat):
    from albert_tf import memory_check
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.tasks import losses, training
    from albert_tf.tasks.settings import FineTuneSettings

    monkeypatch.setattr(memory_check, "available_bytes", lambda: 2 * 2**30)  # a 2 GiB machine
    backbone = AlbertBackbone.from_albert_config(str(CONFIGS / "albert_base_v2.json"), remat=remat)
    model = AlbertClassifier(backbone, 2)
    features = good_request(4)
    del features["masked_lm_positions"]
    batch = 100_000 if remat else 2_000
    settings = FineTuneSettings(
        output_dir=str(tmp_path / "out"), train_batch_size=batch, max_seq_length=128, verbose=False
    )
    with pytest.raises(memory_check.MemoryLimitError, match=f"^--train_batch_size: {batch} sequences of 128 per step"):
        training.train(model, None, settings, losses.classification_loss, None, "accuracy")
    assert not (tmp_path / "out").exists()
    # What fits is not refused: the lower bound of a real batch.
    memory_check.check_batch_fits(backbone.albert_config, model.count_params(), 8, 128, remat)
