"""Results-changing details of the original's fine-tuning and pretraining set-up.

Gradient clipping in fine-tuning, the runners' schedules, `hidden_act` names,
`--init_from_group0` / `--start_warmup_step`, the v2 null threshold, answer
text from character spans, and the pretraining shuffle buffer.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import optimization
from albert_tf.finetuning import losses, training
from albert_tf.finetuning.datasets import train_dataset
from albert_tf.finetuning.settings import FineTuneError, FineTuneSettings, steps_from_epochs
from albert_tf.optimization import AdamWeightDecay, create_optimizer
from albert_tf.tokenization import SentencePieceTokenizer

from command_helpers import command_flags
from finetune_helpers import NO_DEV, ScriptedTask, no_predictions
from paths import CONFIGS


# ---- 1. clipping to global norm 1.0 before the update ----------------------------------------------
def _toy_variables():
    rng = np.random.default_rng(0)
    kernel = keras.Variable(rng.normal(size=(3, 4)).astype("float32"), name="kernel")
    bias = keras.Variable(rng.normal(size=(4,)).astype("float32"), name="bias")
    return [kernel, bias]


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_huge_gradient_update_equals_the_clipped_one(name):
    rng = np.random.default_rng(1)
    huge = [tf.constant(1e6 * rng.normal(size=v.shape).astype("float32")) for v in _toy_variables()]
    small = [tf.constant(0.1 * rng.normal(size=v.shape).astype("float32")) for v in _toy_variables()]
    clipped_huge, norm = tf.clip_by_global_norm(huge, 1.0)
    assert float(norm) > 1e6 and float(tf.linalg.global_norm(small)) < 1.0
    runs = {}
    for label, clip_norm, steps in (
        ("clipping", 1.0, (huge, small)),
        ("by_hand", None, (clipped_huge, small)),
        ("unclipped", None, (huge, small)),
    ):
        variables = _toy_variables()
        optimizer = create_optimizer(name, 0.1, 100, 0, clip_norm=clip_norm)
        assert optimizer.global_clipnorm == clip_norm
        for grads in steps:  # the slots carry the clipped gradient into the next step
            optimizer.apply(grads, variables)
        runs[label] = [v.numpy() for v in variables]
    for a, b in zip(runs["clipping"], runs["by_hand"]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert not np.allclose(runs["clipping"][0], runs["unclipped"][0], rtol=1e-3)


def test_embedding_slices_are_clipped_by_the_norm_of_the_summed_gradient():
    """A token twice in a batch: its row's gradient is the sum, and the norm is the dense one."""
    table = keras.Variable(np.ones((3, 2), "float32"), name="embeddings")
    slices = tf.IndexedSlices(tf.constant([[3.0, 0.0], [3.0, 0.0]]), tf.constant([0, 0]), tf.constant([3, 2]))
    optimizer = AdamWeightDecay(learning_rate=0.1, global_clipnorm=1.0)
    clipped = optimizer._clip_gradients([slices])[0]
    np.testing.assert_allclose(np.asarray(clipped), [[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]], rtol=1e-6)
    optimizer.apply([slices], [table])  # and the update goes through
    assert np.isfinite(table.numpy()).all()


@pytest.mark.slow
def test_fine_tuning_clips_every_update(tmp_path):
    """`training.train`: one step on a tiny classifier equals AdamW on the clipped gradient."""
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.classifier import AlbertClassifier

    keras.utils.set_random_seed(3)
    model = AlbertClassifier(AlbertBackbone.from_albert_config(str(CONFIGS / "albert_tiny.json")), 2, dropout=0.0)
    rng = np.random.default_rng(0)
    features = {
        "input_ids": rng.integers(5, 8000, size=(8, 16)).astype("int32"),
        "input_mask": np.ones((8, 16), "int32"),
        "segment_ids": np.zeros((8, 16), "int32"),
    }
    labels = rng.integers(0, 2, size=8).astype("int32")
    before = [np.array(w) for w in model.get_weights()]

    def huge_loss(y, logits):  # gradients far above norm 1
        return 1e4 * losses.classification_loss(y, logits)

    with training.unread_pooler_frozen(model):
        variables = model.trainable_variables
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(huge_loss(labels, model(features, training=True)["logits"]))
        grads, norm = tf.clip_by_global_norm([tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)], 1.0)
        assert float(norm) > 10
        reference = optimization.create_optimizer("adamw", 1e-3, 10, 0)
        reference.apply(grads, variables)
        expected = [np.array(w) for w in model.get_weights()]
    model.set_weights(before)
    settings = FineTuneSettings(
        output_dir=str(tmp_path),
        train_step=1,
        train_batch_size=8,
        learning_rate=1e-3,
        verbose=False,
        save_checkpoints_steps=1,
    )
    dataset = train_dataset(features, labels, 8, seed=0)
    task = ScriptedTask(score=lambda _: {"accuracy": 0.0}, loss=huge_loss)
    training.train(task, model, dataset, settings, NO_DEV, no_predictions)
    assert model.optimizer.global_clipnorm == training.CLIP_NORM == 1.0
    for got, want in zip(model.get_weights(), expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


# ---- 2. the runners' schedules and defaults: the original scripts' flags ------------------------------
def test_steps_from_epochs_is_the_original_run_squad_formula():
    # README's SQuAD v1.1 command: 87,599 questions, batch 48, 2 epochs, warmup 0.1.
    steps = int(87599 / 48 * 2.0)
    assert steps_from_epochs(87599, 48, 2.0, 0.1) == (steps, int(steps * 0.1))
    assert steps_from_epochs(87599, 48, 2.0, 0.1) == (3649, 364)
    assert steps_from_epochs(130319, 32, 3.0, 0.1) == (12217, 1221)  # v2.0 train, the flag defaults
    settings = FineTuneSettings(output_dir="x", train_batch_size=32, num_train_epochs=3.0, warmup_proportion=0.1)
    derived = settings.with_schedule(87599)
    assert (derived.train_step, derived.warmup_step) == (8212, 821)
    explicit = FineTuneSettings(output_dir="x", train_step=7, warmup_step=2)
    assert explicit.with_schedule(87599) is explicit
    with pytest.raises(FineTuneError, match="--train_batch_size 32 .* less than one step"):
        settings.with_schedule(5)
    with pytest.raises(FineTuneError, match="--warmup_proportion"):
        FineTuneSettings(output_dir="x", num_train_epochs=1.0, warmup_proportion=1.5).with_schedule(100)


def test_squad_schedule_flags_resolve_as_the_original():
    from albert_tf.run_squad import SquadSettings

    def schedule(train_step, warmup_step):  # run_squad's defaults: 3 epochs, warmup 0.1
        return SquadSettings(output_dir="x", train_step=train_step, warmup_step=warmup_step).schedule(87599)

    assert schedule(None, None) == steps_from_epochs(87599, 32, 3.0, 0.1)
    assert schedule(5000, None) == (5000, 500)
    assert schedule(5000, 0) == (5000, 0)
    with pytest.raises(FineTuneError, match="--warmup_step needs --train_step"):
        schedule(None, 100)


def _flag_defaults():
    """{runner: {flag: default}, runner.aliases: {flag: help}} for the flags each runner defines (as JSON has them)."""
    from albert_tf import run_classifier, run_race, run_squad

    out = {}
    for name, module in (("run_classifier", run_classifier), ("run_squad", run_squad), ("run_race", run_race)):
        with command_flags() as flag_values:
            before = set(flag_values)
            module.define_flags()
            new = sorted(set(flag_values) - before)
            out[name] = {n: flag_values[n].default for n in new}
            out[name + ".aliases"] = {n: flag_values[n].help for n in new if flag_values[n].help.startswith("Alias")}
    return json.loads(json.dumps(out))


def _documented_defaults_table():
    from paths import REPO

    lines = (REPO / "docs" / "finetuning.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("| flag | run_classifier | run_squad | run_race | original default (all three) |")
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].split()[0].strip("`")] = cells[1:4]
    return rows


def test_runner_defaults_are_the_originals_and_the_readme_table_is_exact():
    defaults = _flag_defaults()
    # The original scripts' flag defaults (run_classifier.py, run_squad_v{1,2}.py, run_race.py).
    original = {
        "run_classifier": {
            "max_seq_length": 512,
            "train_batch_size": 32,
            "eval_batch_size": 8,
            "learning_rate": 5e-5,
            "train_step": 1000,
            "warmup_step": 0,
            "save_checkpoints_steps": 1000,
            "optimizer": "adamw",
            "do_train": False,
            "do_eval": False,
            "do_predict": False,
        },
        "run_squad": {
            "max_seq_length": 384,
            "doc_stride": 128,
            "max_query_length": 64,
            "train_batch_size": 32,
            "eval_batch_size": 8,
            "learning_rate": 5e-5,
            "num_train_epochs": 3.0,
            "warmup_proportion": 0.1,
            "save_checkpoints_steps": 1000,
            "n_best_size": 20,
            "max_answer_length": 30,
            "start_n_top": 5,
            "end_n_top": 5,
            "do_train": False,
            "do_predict": False,
        },
        "run_race": {
            "max_seq_length": 512,
            "max_qa_length": 128,
            "train_batch_size": 32,
            "eval_batch_size": 8,
            "learning_rate": 1e-5,
            "train_step": 12000,
            "warmup_step": 1000,
            "save_checkpoints_steps": 100,
            "dropout": 0.1,
            "do_train": True,
            "do_eval": True,
            "high_only": False,
            "middle_only": False,
        },
    }
    for runner, expected in original.items():
        assert {k: defaults[runner][k] for k in expected} == expected, runner
    assert defaults["run_squad"]["train_step"] is None  # derived from the epochs unless given
    # The original's True, unless the model carries its own setting (tokenizer.json): None means "the model's".
    assert all(defaults[r]["do_lower_case"] is None for r in original)
    assert "predict_batch_size" in defaults["run_squad.aliases"]
    assert "predict_batch_size" in defaults["run_classifier.aliases"]
    assert "dropout_prob" in defaults["run_race.aliases"]
    table = _documented_defaults_table()
    for column, runner in enumerate(("run_classifier", "run_squad", "run_race")):
        for flag, cells in table.items():
            cell = cells[column].replace("`", "")
            if cell.startswith("—"):
                assert flag not in defaults[runner], (runner, flag)
            else:
                assert cell.split()[0] == str(defaults[runner][flag]), (runner, flag, cell)
    assert set(original["run_squad"]) | set(original["run_classifier"]) | set(original["run_race"]) <= set(table)
    assert {"do_lower_case", "grad_accum_steps", "remat"} <= set(table)


@pytest.mark.slow
@pytest.mark.realdata
def test_run_squad_trains_the_epoch_derived_steps(real_data, pretraining_data, tmp_path):
    from albert_tf.run_squad import SquadSettings, run
    from albert_tf.tasks.squad import SquadTask

    from squad_helpers import squad_slice

    source = real_data / "squad_v1.1" / "dev-v1.1.json"
    train = squad_slice(real_data, tmp_path, "train.json", source, slice(0, 4))
    dev = squad_slice(real_data, tmp_path, "dev.json", source, slice(4, 5))
    task = SquadTask(version="1.1", train_file=train, predict_file=dev, doc_stride=32, max_query_length=24)
    settings = SquadSettings(
        do_train=True,
        output_dir=str(tmp_path / "out"),
        tokenizer=SentencePieceTokenizer(pretraining_data["spm"]),
        albert_config_file=pretraining_data["config"],
        do_predict=False,
        max_seq_length=96,
        train_batch_size=8,
        eval_batch_size=32,
        learning_rate=1e-4,
        save_checkpoints_steps=2,
        num_train_epochs=1.3,
        warmup_proportion=0.5,
        verbose=False,
    )
    summary = run(task, settings)
    questions = summary["train_examples"]
    steps = int(questions / 8 * 1.3)
    assert (summary["train_step"], summary["warmup_step"]) == (steps, int(steps * 0.5))
    assert summary["history"][-1]["global_step"] == steps


# ---- 3. hidden_act: the original's names in any case, and HF's gelu_new -------------------------------
@pytest.mark.parametrize(
    "name,same_as",
    [
        ("GELU", "gelu"),
        ("gelu_new", "gelu"),
        ("Gelu_New", "gelu"),
        ("ReLU", "relu"),
        ("TANH", "tanh"),
        ("Linear", "linear"),
    ],
)
def test_hidden_act_is_case_insensitive_and_accepts_gelu_new(tmp_path, tiny_config_dict, name, same_as):
    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertBackbone

    config = dict(tiny_config_dict, hidden_act=name)
    (tmp_path / "albert_config.json").write_text(json.dumps(config))
    loaded = AlbertConfig.from_json_file(str(tmp_path / "albert_config.json"))
    assert loaded.hidden_act == name  # kept as written
    loaded.to_json_file(str(tmp_path / "saved.json"))
    assert json.loads((tmp_path / "saved.json").read_text())["hidden_act"] == name
    keras.utils.set_random_seed(0)
    model = AlbertBackbone.from_albert_config(str(tmp_path / "albert_config.json"))
    reference = AlbertBackbone.from_albert_config(AlbertConfig.from_dict(dict(tiny_config_dict, hidden_act=same_as)))
    reference.set_weights(model.get_weights())
    ids = np.random.default_rng(0).integers(5, 8000, size=(2, 12)).astype("int32")
    inputs = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
    np.testing.assert_array_equal(
        model(inputs)["sequence_output"].numpy(), reference(inputs)["sequence_output"].numpy()
    )


def test_gelu_new_is_the_tanh_approximation_and_unknown_names_are_named(tiny_config_dict):
    from albert_tf.config import AlbertConfig, ConfigError
    from albert_tf.layers.activations import get_activation

    x = keras.ops.convert_to_tensor(np.linspace(-4, 4, 41).astype("float32"))
    tanh_gelu = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(get_activation("gelu_new")(x), tanh_gelu, rtol=1e-5, atol=1e-6)
    for bad in ("swish", "gelu_erf", None, 3):
        with pytest.raises(ConfigError, match="field 'hidden_act': unknown activation"):
            AlbertConfig.from_dict(dict(tiny_config_dict, hidden_act=bad))


# ---- 4. run_pretraining: --init_from_group0 and --start_warmup_step ------------------------------------
def _group0_expected(source_values, name):
    import re

    return source_values[name] if name in source_values else source_values[re.sub(r"/group_\d+/", "/group_0/", name)]


@pytest.mark.parametrize("fmt", ["tf1", "ours"])
def test_g2_model_starts_with_both_groups_equal_to_the_checkpoints_group_0(tmp_path, tiny_config_dict, fmt):
    from albert_tf import formats
    from albert_tf.config import AlbertConfig
    from albert_tf.formats import original
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.pretrainer import AlbertPretrainer

    keras.utils.set_random_seed(1)
    shared = AlbertPretrainer(AlbertBackbone.from_albert_config(AlbertConfig.from_dict(tiny_config_dict)))
    if fmt == "tf1":
        path = original.save_original_checkpoint(shared, str(tmp_path / "g1" / "model.ckpt"))
    else:
        path = str(tmp_path / "g1")
        formats.save(shared, path)
    source = original.original_variables(shared)
    grown = AlbertPretrainer(
        AlbertBackbone.from_albert_config(AlbertConfig.from_dict(dict(tiny_config_dict, num_hidden_groups=2)))
    )
    with pytest.raises(formats.CheckpointError):  # without the flag: group_1 is missing
        formats.load_weights(grown, path)
    formats.load_weights(grown, path, from_group0=True)
    got = original.original_variables(grown)
    assert any("/group_1/" in name for name in got)
    for name, value in got.items():
        np.testing.assert_array_equal(value, _group0_expected(source, name), err_msg=name)
    # Into a bare backbone too (the heads are skipped, as without from_group0).
    backbone = AlbertBackbone.from_albert_config(AlbertConfig.from_dict(dict(tiny_config_dict, num_hidden_groups=2)))
    formats.load_weights(backbone, path, from_group0=True)
    for name, value in original.original_variables(backbone).items():
        np.testing.assert_array_equal(value, _group0_expected(source, name), err_msg=name)


def test_groups_the_checkpoint_holds_load_as_themselves(tmp_path, tiny_config_dict):
    from albert_tf import formats
    from albert_tf.config import AlbertConfig
    from albert_tf.formats import original
    from albert_tf.models.backbone import AlbertBackbone

    config = AlbertConfig.from_dict(dict(tiny_config_dict, num_hidden_groups=2))
    keras.utils.set_random_seed(2)
    two = AlbertBackbone.from_albert_config(config)
    path = original.save_original_checkpoint(two, str(tmp_path / "g2" / "model.ckpt"))
    other = AlbertBackbone.from_albert_config(config)
    formats.load_weights(other, path, from_group0=True)
    for a, b in zip(other.get_weights(), two.get_weights()):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(formats.CheckpointError, match="does not exist"):
        formats.load_weights(other, str(tmp_path / "nothing"), from_group0=True)


@pytest.mark.realdata
def test_pretraining_run_grows_groups_and_shifts_warmup(pretraining_data, tmp_path):
    from albert_tf.compute import make_compute
    from albert_tf.config import AlbertConfig
    from albert_tf.formats import original
    from albert_tf.inputs.shard_reader import resolve_input
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.pretrainer import AlbertPretrainer
    from albert_tf.pretraining.loop import PretrainingLoop
    from albert_tf.pretraining.run_state import CheckpointPolicy
    from albert_tf.pretraining.settings import PretrainSettings

    config = json.loads(open(pretraining_data["config"]).read())
    keras.utils.set_random_seed(4)
    shared = AlbertPretrainer(AlbertBackbone.from_albert_config(AlbertConfig.from_dict(config)))
    path = original.save_original_checkpoint(shared, str(tmp_path / "g1" / "model.ckpt"))
    settings = PretrainSettings(
        output_dir=str(tmp_path / "run"),
        train_batch_size=8,
        max_seq_length=64,
        num_train_steps=100,
        num_warmup_steps=10,
        learning_rate=1.0,
        start_warmup_step=5,
        init_from_group0=True,
        verbose=False,
    )
    run = PretrainingLoop(
        make_compute(),
        AlbertConfig.from_dict(dict(config, num_hidden_groups=2)),
        settings,
        resolve_input(pretraining_data["data"]),
    )
    assert "initialized from" in CheckpointPolicy(run, init_checkpoint=path).restore_or_initialize()
    source = original.original_variables(shared)
    for name, value in original.original_variables(run.model).items():
        np.testing.assert_array_equal(value, _group0_expected(source, name), err_msg=name)
    # The original's schedule: lr0·(t − start)/W while t − start < W (negative before start), else the decay.
    schedule = run.optimizer._learning_rate
    values = {t: float(schedule(t)) for t in (0, 5, 10, 14, 15, 50)}
    expected = {0: -0.5, 5: 0.0, 10: 0.5, 14: 0.9, 15: 0.85, 50: 0.5}
    for t, want in expected.items():
        assert values[t] == pytest.approx(want, abs=1e-6), t


def test_run_pretraining_has_the_originals_flags():
    from albert_tf import run_pretraining
    from albert_tf.cli.flags import settings_from_flags
    from albert_tf.pretraining.settings import PretrainSettings

    with command_flags() as FLAGS:
        run_pretraining.define_flags()
        defaults = {n: FLAGS[n].default for n in ("start_warmup_step", "init_from_group0", "poly_power")}
        FLAGS(["x", "--start_warmup_step=7", "--init_from_group0", "--poly_power=2"])
        s = settings_from_flags(PretrainSettings, max_seq_length=64, max_predictions_per_seq=10)
        parsed = [s.start_warmup_step, s.init_from_group0, s.poly_power]
    assert defaults == {"start_warmup_step": 0, "init_from_group0": False, "poly_power": 1.0}
    assert parsed == [7, True, 2.0]


# ---- 5. v2 null threshold, answer text, shuffle buffer ----------------------------------------------
def _original_find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
    """squad_utils.find_best_thresh (the official v2.0 script's), transcribed."""
    num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
    cur_score = num_no_ans
    best_score = cur_score
    best_thresh = 0.0
    qid_list = sorted(na_probs, key=lambda k: na_probs[k])
    for qid in qid_list:
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1 if preds[qid] else 0
        cur_score += diff
        if cur_score > best_score:
            best_score = cur_score
            best_thresh = na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


@pytest.mark.realdata
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_v2_threshold_is_tuned_and_applied_as_the_original(real_data, seed):
    from albert_tf.tasks import squad

    examples, _ = squad.read_examples(str(real_data / "squad_v2.0" / "dev-v2.0.Normans-Rhine.json"), False)
    examples = examples[:150]
    rng = np.random.default_rng(seed)
    predictions = {
        e.qas_id: (e.answers[0] if e.answers and rng.random() < 0.7 else ("" if rng.random() < 0.2 else "wrong words"))
        for e in examples
    }
    null_diff = {e.qas_id: float(rng.integers(-5, 5)) for e in examples}  # ties on purpose
    if seed == 2:  # abstaining on everything is best: the original's threshold stays 0.0
        predictions = {q: "wrong words" for q in predictions}
    has_ans = {e.qas_id: bool([t for t in e.answers if squad.normalize_answer(t)]) for e in examples}
    f1_raw = {
        e.qas_id: max(
            squad.f1_score(predictions[e.qas_id], t)
            for t in ([t for t in e.answers if squad.normalize_answer(t)] or [""])
        )
        for e in examples
    }
    best_f1, best_thresh = _original_find_best_thresh(predictions, f1_raw, null_diff, has_ans)
    threshold, f1 = squad.best_threshold(examples, predictions, null_diff)
    assert (threshold, f1) == (best_thresh, pytest.approx(best_f1))
    # write_predictions_v2: the span only when score_diff < threshold.
    original = {q: (p if null_diff[q] < best_thresh else "") for q, p in predictions.items()}
    assert squad.apply_threshold(predictions, null_diff, threshold) == original
    at_threshold = [q for q in predictions if null_diff[q] == threshold]
    if at_threshold:
        assert all(squad.apply_threshold(predictions, null_diff, threshold)[q] == "" for q in at_threshold)


def test_pretraining_shuffle_buffer_is_the_originals_100():
    import inspect

    from albert_tf.inputs.shard_reader import pretraining_dataset
    from albert_tf.pretraining.settings import PretrainSettings

    assert PretrainSettings(output_dir="x").shuffle_buffer == 100
    assert inspect.signature(pretraining_dataset).parameters["shuffle_buffer"].default == 100


def _original_char_alignment(paragraph_text, para_tokens, do_lower_case=True):
    """squad_utils.convert_examples_to_features' alignment of pieces to characters, transcribed."""
    from albert_tf.tasks.squad.decoding import convert_index
    from albert_tf.tokenization import preprocess_text

    tok_start_to_chartok_index, tok_end_to_chartok_index, char_cnt = [], [], 0
    for token in para_tokens:
        new_token = token.replace("\u2581", " ")
        tok_start_to_chartok_index.append(char_cnt)
        char_cnt += len(new_token)
        tok_end_to_chartok_index.append(char_cnt - 1)
    tok_cat_text = "".join(para_tokens).replace("\u2581", " ")
    n, m = len(paragraph_text), len(tok_cat_text)
    f = np.zeros((max(n, 1024), max(m, 1024)), dtype=np.float32)
    g = {}

    def _lcs_match(max_dist, n=n, m=m):
        f.fill(0)
        g.clear()
        for i in range(n):
            for j in range(i - max_dist, i + max_dist):
                if j >= m or j < 0:
                    continue
                if i > 0:
                    g[(i, j)] = 0
                    f[i, j] = f[i - 1, j]
                if j > 0 and f[i, j - 1] > f[i, j]:
                    g[(i, j)] = 1
                    f[i, j] = f[i, j - 1]
                f_prev = f[i - 1, j - 1] if i > 0 and j > 0 else 0
                if (
                    preprocess_text(paragraph_text[i], lower=do_lower_case, remove_space=False) == tok_cat_text[j]
                    and f_prev + 1 > f[i, j]
                ):
                    g[(i, j)] = 2
                    f[i, j] = f_prev + 1

    max_dist = abs(n - m) + 5
    for _ in range(2):
        _lcs_match(max_dist)
        if f[n - 1, m - 1] > 0.8 * n:
            break
        max_dist *= 2
    chartok_to_orig_index = [None] * m
    i, j = n - 1, m - 1
    while i >= 0 and j >= 0:
        if (i, j) not in g:
            break
        if g[(i, j)] == 2:
            chartok_to_orig_index[j] = i
            i, j = i - 1, j - 1
        elif g[(i, j)] == 1:
            j = j - 1
        else:
            i = i - 1
    starts = [convert_index(chartok_to_orig_index, s, n, is_start=True) for s in tok_start_to_chartok_index]
    ends = [convert_index(chartok_to_orig_index, e, n, is_start=False) for e in tok_end_to_chartok_index]
    return starts, ends


@pytest.mark.realdata
def test_answer_text_is_the_originals_character_span(real_data, wikitext_spm):
    """Every piece span of real SQuAD dev paragraphs with accents, odd characters or spacing."""
    from albert_tf.tasks import squad
    from albert_tf.tokenization import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(wikitext_spm)
    examples, _ = squad.read_examples(str(real_data / "squad_v1.1" / "dev-v1.1.json"), is_training=False)
    odd = {}
    for example in examples:
        context = example.context
        if (not context.isascii() or "  " in context or "\n" in context) and context not in odd:
            odd[context] = example
    chosen = list(odd.values())[:25]
    assert any("é" in e.context for e in chosen) and any(not e.context.isascii() for e in chosen)
    features = squad.convert_examples(
        chosen, tokenizer, max_seq_length=512, doc_stride=128, max_query_length=32, is_training=False
    )
    compared = differs_from_whole_words = 0
    for feature in features:
        example = chosen[feature.example_index]
        para_tokens = tokenizer.tokenize(example.context)
        starts, ends = _original_char_alignment(example.context, para_tokens)
        # Our pieces are those of the whole context (SentencePiece never crosses whitespace).
        pieces, piece_word = squad.windows.encode_words(tokenizer, example.words)
        assert pieces == tokenizer.convert_tokens_to_ids(para_tokens)
        first_piece = {w: piece_word.index(w) for w in set(piece_word)}

        def index(position):  # the position's piece in the whole context
            return first_piece[feature.piece_to_word[position]] + feature.piece_in_word[position]

        positions = sorted(feature.piece_to_word)
        for a in range(0, len(positions), 3):
            for b in range(a, min(a + 12, len(positions))):
                s, e = positions[a], positions[b]
                ours = squad.decoding.answer_text(example, tokenizer, feature, s, e)
                theirs = example.context[starts[index(s)] : ends[index(e)] + 1].strip()
                assert ours == theirs, (example.qas_id, s, e)
                compared += 1
                words = example.context[
                    example.word_starts[feature.piece_to_word[s]] : example.word_starts[feature.piece_to_word[e]]
                    + len(example.words[feature.piece_to_word[e]])
                ]
                differs_from_whole_words += ours != words
    assert compared > 2000 and differs_from_whole_words > 100


@pytest.mark.realdata
@pytest.mark.parametrize(
    "answer",
    [
        "Maria Skłodowska-Curie",
        "The Prince of Płock",
        "⅓ to Tesla, ⅓ to Peck and Brown, and ⅓ to fund development",
        "Sky+",
    ],
)
def test_gold_piece_span_gives_the_gold_text_next_to_punctuation(real_data, wikitext_spm, answer):
    """Words glued to punctuation, with non-ASCII letters: the span ends where the original's does."""
    from albert_tf.tasks import squad
    from albert_tf.tokenization import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(wikitext_spm)
    examples, _ = squad.read_examples(str(real_data / "squad_v1.1" / "dev-v1.1.json"), is_training=True)
    example = next(e for e in examples if e.answer_text == answer)
    features = squad.convert_examples(
        [example], tokenizer, max_seq_length=384, doc_stride=128, max_query_length=64, is_training=True
    )
    feature = next(f for f in features if f.start_position)
    assert (
        squad.decoding.answer_text(example, tokenizer, feature, feature.start_position, feature.end_position) == answer
    )


REQUIRED_FLAGS = {
    "run_squad": [],
    "run_race": ["--data_dir=x"],
    "run_classifier": ["--data_dir=x", "--task_name=sst-2"],
}


@pytest.mark.parametrize(
    "cli,cases",
    [
        # An explicit --train_step wins over the --num_train_epochs default (it used to train 569 steps).
        (
            "run_squad",
            [
                ([], [8212, 821]),
                (["--train_step=300"], [300, 30]),
                (["--train_step=300", "--warmup_step=7"], [300, 7]),
                (["--train_step=300", "--num_train_epochs=2"], [300, 30]),
                (["--num_train_epochs=1", "--warmup_proportion=0"], [2737, 0]),
            ],
        ),
        ("run_classifier", [([], [1000, 0]), (["--train_step=300", "--warmup_step=7"], [300, 7])]),
        ("run_race", [([], [12000, 1000]), (["--train_step=300"], [300, 1000])]),
    ],
)
def test_explicit_train_step_wins_in_every_runner(cli, cases):
    from albert_tf.cli import run_classifier, run_race, run_squad
    from albert_tf.cli.flags import settings_from_flags

    module = {"run_squad": run_squad, "run_classifier": run_classifier, "run_race": run_race}[cli]
    results = []
    with command_flags() as FLAGS:
        module.define_flags()
        for argv, _ in cases:
            FLAGS.unparse_flags()
            FLAGS(["prog", "--output_dir=x"] + REQUIRED_FLAGS[cli] + argv)
            if hasattr(module, "from_flags"):
                settings = module.from_flags()[1]
            else:
                settings = settings_from_flags(module.ClassifierSettings)
            results.append(list(settings.schedule(87599)))
    assert results == [expected for _, expected in cases]


def test_a_stop_signal_says_the_rerun_trains_from_step_0_and_a_finished_run_is_not_stopped(tmp_path):
    import os
    import signal

    import keras

    from albert_tf import AlbertBackbone, preemption
    from albert_tf.models.classifier import AlbertClassifier

    keras.utils.set_random_seed(0)
    model = AlbertClassifier(AlbertBackbone.from_albert_config("configs/albert_tiny.json"), 2)
    rng = np.random.default_rng(0)
    features = {
        "input_ids": rng.integers(5, 100, (16, 16)).astype("int32"),
        "input_mask": np.ones((16, 16), "int32"),
        "segment_ids": np.zeros((16, 16), "int32"),
    }
    labels = rng.integers(0, 2, 16).astype("int32")

    def run(name, signal_at_evaluation):
        evaluations = []

        def evaluate(predictions):
            evaluations.append(1)
            if len(evaluations) == signal_at_evaluation:
                os.kill(os.getpid(), signal.SIGTERM)  # deferred by stop_signals, like a preemption
            return {"accuracy": 0.1 * len(evaluations)}

        settings = FineTuneSettings(
            output_dir=str(tmp_path / name), train_step=4, save_checkpoints_steps=2, train_batch_size=8, verbose=False
        )
        with preemption.stop_signals():
            dataset = train_dataset(features, labels, 8, seed=0)
            return training.train(ScriptedTask(score=evaluate), model, dataset, settings, NO_DEV, no_predictions)

    with pytest.raises(preemption.Preempted) as stopped:
        run("stopped", signal_at_evaluation=1)
    message = str(stopped.value)
    checkpoint = tmp_path / "stopped" / "checkpoints" / "ckpt-2"
    assert message == (
        f"stopped by SIGTERM: checkpoint of step 2 saved ({checkpoint}); best/ of step 2 is whole; "
        "run the same command again to resume"
    )
    # The signal during the last evaluation: training is done, the run ends normally with its best/.
    result = run("finished", signal_at_evaluation=2)
    assert [h["global_step"] for h in result["history"]] == [2, 4] and (tmp_path / "finished" / "best").is_dir()
