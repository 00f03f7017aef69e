"""PL-BERT: the model, its masking and loss, and the checkpoint directory StyleTTS 2 loads.

Rows are synthetic, made here after the PL-BERT data contract (word phonemes then the
separator " ", `input_mask` numbering instances, `word_positions` numbering words).
"""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from plbert_helpers import load_the_way_styletts2_does

from albert_tf import formats
from albert_tf.config import AlbertConfig
from albert_tf.convert_checkpoint import convert
from albert_tf.formats import plbert as plbert_format
from albert_tf.models import plbert as plbert_model
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.models.plbert import PlbertPretrainer, plbert_config
from albert_tf.pretraining import plbert_masking, plbert_objective

from command_helpers import run_command
from paths import REPO

SEPARATOR, MASK = plbert_model.SEPARATOR_ID, plbert_model.MASK_ID
WORD_VOCAB = 50
LENGTH = 48


def tiny_model(seed=0, dropout=0.0):
    keras.utils.set_random_seed(seed)
    config = plbert_config(
        hidden_size=32,
        num_attention_heads=2,
        intermediate_size=64,
        num_hidden_layers=2,
        max_position_embeddings=64,
        dropout=dropout,
    )
    return PlbertPretrainer(AlbertBackbone.from_albert_config(config), word_vocab_size=WORD_VOCAB)


def synthetic_row(rng, length=LENGTH, instances=1):
    """One contract row: words of 1-5 phonemes, each followed by the separator; zero-padded."""
    ids, mask, word_ids, positions = [], [], [], []
    word = 0
    for instance in range(1, instances + 1):
        budget = rng.integers(length // (2 * instances), length // instances)
        start = len(ids)
        while len(ids) - start < budget - 6:
            word += 1
            phonemes = rng.integers(40, 178, rng.integers(1, 6))
            word_id = int(rng.integers(2, WORD_VOCAB))
            ids += [*phonemes, SEPARATOR]
            word_ids += [word_id] * len(phonemes) + [1]
            positions += [word] * (len(phonemes) + 1)
            mask += [instance] * (len(phonemes) + 1)
    pad = length - len(ids)
    return {
        "input_ids": np.array(ids + [0] * pad, np.int64),
        "input_mask": np.array(mask + [0] * pad, np.int64),
        "word_ids": np.array(word_ids + [0] * pad, np.int64),
        "word_positions": np.array(positions + [0] * pad, np.int64),
    }


def masked_rows(rows, seed):
    dataset = tf.data.Dataset.from_tensor_slices({k: np.stack([r[k] for r in rows]) for k in rows[0]})
    features, labels = [], []
    for f, l in plbert_masking.mask_dataset(dataset, seed):
        features.append({k: v.numpy() for k, v in f.items()})
        labels.append({k: v.numpy() for k, v in l.items()})
    return features, labels


# ---- the word loss in chunks ---------------------------------------------------------------
def full_word_nll(x, kernel, bias, labels, weights):
    log_probs = tf.nn.log_softmax(tf.matmul(x, kernel) + bias)
    return -tf.reduce_sum(weights * tf.gather(log_probs, labels, batch_dims=2))


def test_chunked_word_cross_entropy_equals_the_full_one_with_its_gradient():
    rng = np.random.default_rng(0)
    x = tf.Variable(rng.normal(size=(3, 11, 8)).astype("float32"))
    kernel = tf.Variable(rng.normal(size=(8, 37)).astype("float32"))
    bias = tf.Variable(rng.normal(size=(37,)).astype("float32"))
    labels = rng.integers(0, 37, (3, 11)).astype("int32")
    weights = (rng.random((3, 11)) < 0.7).astype("float32")
    with tf.GradientTape(persistent=True) as tape:
        full = full_word_nll(x, kernel, bias, labels, weights)
        chunked = {c: plbert_objective.word_stats(x, kernel, bias, labels, weights, c) for c in (1, 4, 32, 4096)}
    logits = (x.numpy() @ kernel.numpy() + bias.numpy()).argmax(-1)
    expected_correct = float(np.sum(weights * (logits == labels)))
    expected_gradients = tape.gradient(full, [x, kernel, bias])
    for chunk, stats in chunked.items():  # 4 and 32 do not divide the 33 positions: padded chunks
        np.testing.assert_allclose(float(stats["word_nll"]), float(full), rtol=1e-6, err_msg=f"chunk {chunk}")
        assert float(stats["word_correct"]) == expected_correct and float(stats["word_weight"]) == weights.sum()
        for got, want in zip(tape.gradient(stats["word_nll"], [x, kernel, bias]), expected_gradients):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6, err_msg=f"chunk {chunk}")
    # Shapes unknown while tracing (a tf.data batch): the chunk count is a tensor.
    traced = tf.function(
        lambda x: plbert_objective.word_stats(x, kernel, bias, labels, weights, 4)["word_nll"],
        input_signature=[tf.TensorSpec([None, None, 8], tf.float32)],
    )
    np.testing.assert_allclose(float(traced(x)), float(full), rtol=1e-6)


JAX_WORD_STATS = """
import sys, jax, numpy as np
from albert_tf.pretraining import plbert_objective
a = dict(np.load(sys.argv[1]))
def nll(x, kernel, bias, labels, weights):
    return plbert_objective.word_stats(x, kernel, bias, labels, weights, 4)["word_nll"]
value, grads = jax.jit(jax.value_and_grad(nll, (0, 1, 2)))(a["x"], a["kernel"], a["bias"], a["labels"], a["weights"])
np.savez(sys.argv[2], nll=np.asarray(value), *[np.asarray(g) for g in grads])
"""


@pytest.mark.slow
def test_the_chunked_word_loss_and_its_gradient_are_the_same_on_jax(tmp_path):
    rng = np.random.default_rng(8)
    arrays = {
        "x": rng.normal(size=(2, 9, 8)).astype("float32"),
        "kernel": rng.normal(size=(8, 23)).astype("float32"),
        "bias": rng.normal(size=(23,)).astype("float32"),
        "labels": rng.integers(0, 23, (2, 9)).astype("int32"),
        "weights": (rng.random((2, 9)) < 0.8).astype("float32"),
    }
    np.savez(tmp_path / "in.npz", **arrays)
    variables = [tf.Variable(arrays[k]) for k in ("x", "kernel", "bias")]
    with tf.GradientTape() as tape:
        full = full_word_nll(*variables, arrays["labels"], arrays["weights"])
    expected = tape.gradient(full, variables)
    result = subprocess.run(
        [sys.executable, "-c", JAX_WORD_STATS, str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
        capture_output=True,
        text=True,
        env={**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"},
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    got = np.load(tmp_path / "out.npz")
    np.testing.assert_allclose(got["nll"], float(full), rtol=1e-6)
    for i, want in enumerate(expected):
        np.testing.assert_allclose(got[f"arr_{i}"], want.numpy(), rtol=1e-5, atol=1e-6)


# ---- masking ---------------------------------------------------------------------------------
def test_masking_picks_whole_words_at_the_reference_rates_and_labels_only_them():
    rng = np.random.default_rng(1)
    rows = [synthetic_row(rng, length=96, instances=1 + i % 2) for i in range(600)]
    features, labels = masked_rows(rows, seed=7)
    words = picked = masked = kept = randomized = 0
    for row, f, l in zip(rows, features, labels):
        real = row["input_mask"] > 0
        separator = row["input_ids"] == SEPARATOR
        weights = l["phoneme_weights"] > 0
        np.testing.assert_array_equal(l["phoneme_labels"], row["input_ids"])
        np.testing.assert_array_equal(l["word_labels"], row["word_ids"])
        np.testing.assert_array_equal(l["word_weights"], real.astype("float32"))
        np.testing.assert_array_equal(f["input_mask"], row["input_mask"])
        assert not weights[separator | ~real].any()  # never a separator or padding
        changed = f["input_ids"] != row["input_ids"]
        assert not changed[~weights].any()  # unpicked positions are as they were
        for w in range(1, row["word_positions"].max() + 1):
            phonemes = (row["word_positions"] == w) & ~separator
            words += 1
            if not weights[phonemes].any():
                continue
            assert weights[phonemes].all(), "a word is picked whole"
            picked += 1
            got = f["input_ids"][phonemes]
            if (got == MASK).all():
                masked += 1
            elif (got == row["input_ids"][phonemes]).all():
                kept += 1  # (or randomized into itself: rare with 138 symbols)
            else:
                randomized += 1
                instance = row["input_mask"][phonemes][0]
                pool = row["input_ids"][(row["input_mask"] == instance) & ~separator]
                assert np.isin(got, pool).all(), "random phonemes come from the word's own instance"
    assert words > 8000
    assert 0.14 < picked / words < 0.16  # word_mask_prob 0.15
    assert 0.75 < masked / picked < 0.85 and 0.06 < kept / picked < 0.14 and 0.06 < randomized / picked < 0.14


def test_masking_is_deterministic_per_seed_and_row():
    rng = np.random.default_rng(2)
    rows = [synthetic_row(rng) for _ in range(20)]
    first, again, other = (masked_rows(rows, seed)[0] for seed in (3, 3, 4))
    same = [np.array_equal(a["input_ids"], b["input_ids"]) for a, b in zip(first, again)]
    differs = [not np.array_equal(a["input_ids"], b["input_ids"]) for a, b in zip(first, other)]
    assert all(same) and sum(differs) >= 10
    row = {k: tf.constant(v) for k, v in rows[0].items()}
    by_index = [plbert_masking.mask_words(row, 3, i)[0]["input_ids"].numpy() for i in range(6)]
    assert len({a.tobytes() for a in by_index}) > 1  # keyed by the row's index too


# ---- training --------------------------------------------------------------------------------
def test_the_loss_falls_when_a_tiny_model_trains():
    rng = np.random.default_rng(3)
    features, labels = masked_rows([synthetic_row(rng, instances=2) for _ in range(16)], seed=0)
    x = {k: np.stack([f[k] for f in features]).astype("int32") for k in features[0]}
    y = {k: np.stack([lab[k] for lab in labels]) for k in labels[0]}
    model = PlbertPretrainer(tiny_model().backbone, word_vocab_size=WORD_VOCAB, packed_rows=True)
    optimizer = keras.optimizers.Adam(3e-3)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            stats = plbert_objective.batch_stats(model(x, training=True), y, chunk=128)
            loss = plbert_objective.loss(stats)
        gradients = tape.gradient(loss, model.trainable_variables)  # the pooler gets none, as in the reference
        optimizer.apply_gradients([(g, v) for g, v in zip(gradients, model.trainable_variables) if g is not None])
        return stats

    first = step()
    for _ in range(40):
        last = step()
    before = plbert_objective.summarize({k: float(v) for k, v in {**first, "loss": 0.0}.items()}, 1)
    after = plbert_objective.summarize({k: float(v) for k, v in {**last, "loss": 0.0}.items()}, 1)
    assert before["word_loss"] == pytest.approx(np.log(WORD_VOCAB), rel=0.1)  # untrained: near uniform
    assert after["word_loss"] < 0.6 * before["word_loss"] and after["phoneme_loss"] < before["phoneme_loss"]
    assert after["word_accuracy"] > before["word_accuracy"]


# ---- the checkpoint directory ----------------------------------------------------------------
def randomized(model, seed=0):
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(0, 0.2, w.shape).astype("float32") for w in model.get_weights()])
    return model


def test_the_export_loads_as_styletts2_loads_it_and_gives_our_outputs(tmp_path):
    torch = pytest.importorskip("torch")
    model = randomized(tiny_model())
    ours = tmp_path / "ours"
    formats.save(model, str(ours))  # our directory (model.keras) -> the converter, as a user runs it
    notes = []
    convert(str(ours), output_dir=str(tmp_path / "plbert"), output_format="plbert", notes=notes)
    assert sorted(os.listdir(tmp_path / "plbert")) == ["config.yml", "step_0.t7"]
    assert formats.detect(str(tmp_path / "plbert")) == "plbert"
    encoder, missing, unexpected = load_the_way_styletts2_does(str(tmp_path / "plbert"))
    assert unexpected == [] and missing == []  # strict=False, so check it: every weight came from the file
    ids = np.random.default_rng(4).integers(1, 178, (2, 12)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 7:] = 0  # a padded row
    with torch.no_grad():
        theirs = encoder(torch.tensor(ids, dtype=torch.long), attention_mask=torch.tensor(mask)).last_hidden_state
    inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}
    ours_out = model.backbone(inputs, training=False)["sequence_output"].numpy()
    np.testing.assert_allclose(theirs.numpy(), ours_out, atol=1e-5, rtol=0)
    state = torch.load(str(tmp_path / "plbert" / "step_0.t7"))["net"]
    assert state["module.word_predictor.weight"].shape == (WORD_VOCAB, 32)
    assert state["module.mask_predictor.weight"].shape == (178, 32)
    np.testing.assert_array_equal(state["module.word_predictor.weight"].numpy(), model.word_head.kernel.numpy().T)


def test_round_trip_is_bitwise_and_the_heads_load_or_not_as_asked(tmp_path):
    torch = pytest.importorskip("torch")
    model = randomized(tiny_model(), seed=5)
    for name in ("a", "b"):
        os.makedirs(tmp_path / name)
    plbert_format.save_plbert_dir(model, str(tmp_path / "a"), step=1200)
    loaded = formats.load(str(tmp_path / "a"))
    assert type(loaded.model) is PlbertPretrainer and loaded.model.word_vocab_size == WORD_VOCAB
    plbert_format.save_plbert_dir(loaded.model, str(tmp_path / "b"), step=1200)
    first = torch.load(str(tmp_path / "a" / "step_1200.t7"))
    second = torch.load(str(tmp_path / "b" / "step_1200.t7"))
    assert first["step"] == 1200 and list(first["net"]) == list(second["net"])
    for key, tensor in first["net"].items():
        assert tensor.dtype == second["net"][key].dtype and torch.equal(tensor, second["net"][key]), key
    for a, b in zip(model.weights, loaded.model.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    backbone, report, _ = plbert_format.read_plbert_dir(str(tmp_path / "a"), backbone_only=True)
    assert type(backbone) is AlbertBackbone and len(report.skipped_heads) == 4
    # The highest step is the one read, as StyleTTS 2 does.
    torch.save({"net": {}, "step": 5}, str(tmp_path / "a" / "step_5.t7"))
    assert formats.load(str(tmp_path / "a")).source.endswith("step_1200.t7")


def test_a_broken_directory_is_one_line_naming_the_file(tmp_path):
    pytest.importorskip("torch")
    directory = tmp_path / "plbert"
    directory.mkdir()
    plbert_format.save_plbert_dir(randomized(tiny_model()), str(directory), step=3)
    step_file = directory / "step_3.t7"
    step_file.write_bytes(step_file.read_bytes()[:200])  # truncated
    failed = run_command("albert_tf.convert_checkpoint", [f"--input={directory}", f"--output_dir={tmp_path / 'out'}"])
    assert failed.returncode != 0
    assert failed.stderr.strip().startswith(f"error: {step_file}: not a readable PyTorch checkpoint")
    assert len(failed.stderr.strip().splitlines()) == 1
    (directory / "config.yml").write_text("model_params: [unclosed\n")
    with pytest.raises(plbert_format.PlbertFileError, match=f"^{directory / 'config.yml'}: not YAML"):
        formats.load(str(directory))
    (directory / "config.yml").write_text("log_dir: x\n")
    with pytest.raises(plbert_format.PlbertFileError, match="config.yml: has no 'model_params' mapping"):
        formats.load(str(directory))
    step_file.unlink()
    with pytest.raises(formats.ModelFileError, match="has config.yml but no step_<N>.t7"):
        formats.load(str(directory))
    (directory / "config.yml").unlink()
    (directory / "step_9.t7").write_bytes(b"")
    with pytest.raises(formats.ModelFileError, match="has step_<N>.t7 but no config.yml"):
        formats.load(str(directory))
    with pytest.raises(formats.CheckpointError, match="has step_<N>.t7 but no config.yml"):  # a warm start's read
        formats.load_weights(tiny_model(), str(directory))


def test_the_shipped_config_is_the_references():
    from albert_tf.config import AlbertConfig

    from paths import CONFIGS

    assert AlbertConfig.from_json_file(str(CONFIGS / "plbert_base.json")) == plbert_config()
    # What StyleTTS 2 gives transformers' AlbertConfig: the reference's model_params, with HF's defaults.
    params = plbert_format.config_yml(plbert_config())["model_params"]
    assert {k: params[k] for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers")} == {
        "vocab_size": 178,
        "hidden_size": 768,
        "intermediate_size": 2048,
        "num_hidden_layers": 12,
    }
    assert params["hidden_act"] == "gelu_new" and params["embedding_size"] == 128


def test_an_encoder_alone_is_written_without_heads_and_torch_is_asked_for_by_name(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    backbone = randomized(tiny_model()).backbone
    plbert_format.save_plbert_dir(backbone, str(tmp_path))
    keys = list(torch.load(str(tmp_path / "step_0.t7"))["net"])
    assert all(k.startswith("module.encoder.") for k in keys) and "module.encoder.embeddings.position_ids" in keys
    loaded = formats.load(str(tmp_path))
    assert type(loaded.model) is AlbertBackbone
    assert plbert_format.FORMAT.unwritten(backbone) == []
    from albert_tf import AlbertPretrainer

    [note] = plbert_format.FORMAT.unwritten(AlbertPretrainer(backbone))
    assert "AlbertPretrainer's heads are not written" in note
    monkeypatch.setitem(sys.modules, "torch", None)  # as if PyTorch were not installed
    with pytest.raises(plbert_format.PlbertFileError, match=r"^the plbert format needs PyTorch: pip install torch$"):
        formats.load(str(tmp_path))


def test_a_checkpoint_saved_as_the_reference_trains_loads_with_its_outputs(tmp_path):
    """The reference's train.ipynb: MultiTaskModel(AlbertModel, 2 Linears) under DataParallel, AdamW state kept."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    yaml = pytest.importorskip("yaml")
    params = {
        "vocab_size": 178,
        "hidden_size": 32,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "max_position_embeddings": 64,
        "num_hidden_layers": 2,
        "dropout": 0.1,  # the reference's key, which HF's AlbertConfig stores and never reads
    }
    torch.manual_seed(0)
    net = torch.nn.Module()
    net.encoder = transformers.AlbertModel(transformers.AlbertConfig(**params))
    net.mask_predictor = torch.nn.Linear(32, 178)
    net.word_predictor = torch.nn.Linear(32, WORD_VOCAB)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
    ids = torch.randint(1, 178, (2, 10))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    out = net.encoder(ids, attention_mask=mask).last_hidden_state
    (net.mask_predictor(out).sum() + net.word_predictor(out).sum()).backward()
    optimizer.step()
    state = {"module." + k: v for k, v in net.state_dict().items()}
    torch.save({"net": state, "step": 99, "optimizer": optimizer.state_dict()}, str(tmp_path / "step_100.t7"))
    (tmp_path / "config.yml").write_text(yaml.safe_dump({"log_dir": "Checkpoint", "model_params": params}))
    loaded = formats.load(str(tmp_path)).model
    assert type(loaded) is PlbertPretrainer and loaded.backbone.albert_config.hidden_dropout_prob == 0.0
    with torch.no_grad():
        hidden = net.eval().encoder(ids, attention_mask=mask).last_hidden_state
        phoneme_logits = net.mask_predictor(hidden).numpy()
        word_logits = net.word_predictor(hidden).numpy()
    ours = loaded({"input_ids": ids.numpy().astype("int32"), "input_mask": mask.numpy().astype("int32")})
    np.testing.assert_allclose(ours["phoneme_logits"].numpy(), phoneme_logits, atol=1e-5, rtol=0)
    np.testing.assert_allclose(loaded.word_head.logits(ours["sequence_output"]).numpy(), word_logits, atol=1e-5, rtol=0)


def phonemized_sst2(real_data, count):
    """The first `count` short SST-2 train sentences as Kokoro frames them: 0, phoneme ids (words split
    by the separator), 0; with their labels."""
    pytest.importorskip("phonemizer")
    from albert_tf.tokenization.plbert_symbols import PAD_ID, symbol_ids
    from data_prep.phonemes import WordPhonemizer, words

    lines = (real_data / "glue" / "SST-2" / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]
    pairs = [line.rsplit("\t", 1) for line in lines]
    pairs = [(text, int(label)) for text, label in pairs if len(text.split()) <= 8][:count]
    phonemizer = WordPhonemizer("en-us")
    rows = []
    for text, _ in pairs:
        ids = [symbol_ids(phonemes)[0] for phonemes in phonemizer.phonemes(words(text))]
        rows.append([PAD_ID, *sum((word + [SEPARATOR] for word in ids), [])[:-1], PAD_ID])
    width = max(map(len, rows))
    inputs = {name: np.zeros((len(rows), width), "int32") for name in ("input_ids", "input_mask", "segment_ids")}
    for index, row in enumerate(rows):
        inputs["input_ids"][index, : len(row)] = row
        inputs["input_mask"][index, : len(row)] = 1
    return inputs, np.array([label for _, label in pairs], "int32")


@pytest.mark.realdata
def test_a_plbert_directory_fine_tunes_as_a_classifier_and_saves_as_ours(tmp_path, real_data):
    from albert_tf.models.classifier import AlbertClassifier

    inputs, labels = phonemized_sst2(real_data, 32)
    assert inputs["input_ids"].shape[1] <= 64 and set(labels) == {0, 1}
    source = tmp_path / "plbert"
    os.makedirs(source)
    plbert_format.save_plbert_dir(tiny_model(seed=6), str(source), step=40)
    loaded = formats.load(str(source))
    keras.utils.set_random_seed(1)
    classifier = AlbertClassifier(formats.backbone_of(loaded.model), num_classes=2, dropout=0.0)
    classifier.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss={"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
    )
    before = classifier.evaluate(inputs, {"logits": labels}, verbose=0, return_dict=True)["loss"]
    classifier.fit(inputs, {"logits": labels}, batch_size=8, epochs=40, shuffle=False, verbose=0)
    after = classifier.evaluate(inputs, {"logits": labels}, verbose=0, return_dict=True)["loss"]
    assert after < 0.5 * before, (before, after)
    formats.save(classifier, str(tmp_path / "fine_tuned"))
    again = formats.load(str(tmp_path / "fine_tuned")).model
    assert type(again) is AlbertClassifier
    np.testing.assert_allclose(again(inputs)["logits"].numpy(), classifier(inputs)["logits"].numpy(), atol=1e-6)


def test_a_plbert_directory_converts_to_an_hf_albert_model_and_says_the_heads_stay(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model = randomized(tiny_model(), seed=7)
    os.makedirs(tmp_path / "plbert")
    plbert_format.save_plbert_dir(model, str(tmp_path / "plbert"), step=9)
    notes = []
    convert(str(tmp_path / "plbert"), output_dir=str(tmp_path / "hf"), output_format="hf", notes=notes)
    assert "HF's AlbertModel is the encoder alone: the PlbertPretrainer's heads are not written" in notes
    assert any("not text; see docs/plbert.md" in note for note in notes), notes
    encoder = transformers.AlbertModel.from_pretrained(str(tmp_path / "hf")).eval()
    ids = np.random.default_rng(8).integers(1, 178, (2, 10)).astype("int32")
    mask = np.ones_like(ids)
    mask[0, 6:] = 0
    with torch.no_grad():
        theirs = encoder(torch.tensor(ids, dtype=torch.long), attention_mask=torch.tensor(mask)).last_hidden_state
    ours = model.backbone({"input_ids": ids, "input_mask": mask, "segment_ids": 0 * ids})["sequence_output"]
    np.testing.assert_allclose(theirs.numpy(), ours.numpy(), atol=1e-5, rtol=0)


def test_fine_tuning_commands_say_a_plbert_directory_reads_phonemes_not_text(tmp_path):
    pytest.importorskip("torch")
    from albert_tf.finetuning import start
    from albert_tf.finetuning.settings import FineTuneError, FineTuneSettings

    os.makedirs(tmp_path / "plbert")
    plbert_format.save_plbert_dir(tiny_model(), str(tmp_path / "plbert"), step=1)
    settings = FineTuneSettings(output_dir=str(tmp_path / "out"), init_checkpoint=str(tmp_path / "plbert"))
    with pytest.raises(FineTuneError, match=r"plbert: holds no text tokenizer \(PL-BERT reads phoneme ids .*\.md\)$"):
        start.for_training(settings)


def test_the_export_is_what_kokoro_holds_as_its_bert(tmp_path):
    """hexgrad/kokoro's KModel: `AlbertModel(AlbertConfig(vocab_size=n_token, **config["plbert"]))`, its
    state dict loaded strictly (Kokoro's first try), phonemes framed as `[0, *ids, 0]`."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    yaml = pytest.importorskip("yaml")
    model = randomized(tiny_model(), seed=11)
    os.makedirs(tmp_path / "plbert")
    plbert_format.save_plbert_dir(model, str(tmp_path / "plbert"), step=3)
    params = yaml.safe_load((tmp_path / "plbert" / "config.yml").read_text())["model_params"]
    plbert = {key: value for key, value in params.items() if key != "vocab_size"}  # Kokoro's config["plbert"]
    bert = transformers.AlbertModel(transformers.AlbertConfig(vocab_size=178, **plbert)).eval()
    net = torch.load(str(tmp_path / "plbert" / "step_3.t7"))["net"]
    prefix = "module.encoder."
    state = {k[len(prefix) :]: v for k, v in net.items() if k.startswith(prefix) and "position_ids" not in k}
    bert.load_state_dict(state)  # strict: every weight of Kokoro's bert, nothing else
    ids = [0, *np.random.default_rng(12).integers(1, 178, 14).tolist(), 0]
    with torch.no_grad():
        theirs = bert(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.int32)).last_hidden_state
    row = np.array([ids], "int32")
    ours = model.backbone({"input_ids": row, "input_mask": np.ones_like(row), "segment_ids": 0 * row})
    np.testing.assert_allclose(theirs.numpy(), ours["sequence_output"].numpy(), atol=1e-5, rtol=0)


def test_a_warm_start_keeps_a_word_head_of_other_words_grows_groups_and_refuses_a_broken_head(tmp_path):
    torch = pytest.importorskip("torch")
    source = randomized(tiny_model(), seed=13)  # 1 group, WORD_VOCAB words
    os.makedirs(tmp_path / "plbert")
    plbert_format.save_plbert_dir(source, str(tmp_path / "plbert"), step=2)
    config = dict(source.backbone.albert_config.to_dict(), num_hidden_groups=2)
    grown = PlbertPretrainer(AlbertBackbone.from_albert_config(AlbertConfig(**config)), word_vocab_size=9)
    initial = [w.numpy() for w in grown.word_head.weights]
    with pytest.raises(formats.CheckpointError, match="albert_layer_groups.1"):  # all or nothing: untouched
        formats.load_weights(grown, str(tmp_path / "plbert"))
    np.testing.assert_array_equal(grown.word_head.kernel.numpy(), initial[0])
    report = formats.load_weights(grown, str(tmp_path / "plbert"), from_group0=True)
    assert report.fresh_heads == [
        f"the word head starts fresh: {tmp_path / 'plbert'} has {WORD_VOCAB} words, this model 9"
    ]
    for kept, now in zip(initial, grown.word_head.weights):
        np.testing.assert_array_equal(kept, now.numpy())
    np.testing.assert_array_equal(grown.phoneme_head.kernel.numpy(), source.phoneme_head.kernel.numpy())
    groups = {w.path: w.numpy() for w in grown.backbone.weights if "group" in w.path}
    for path, value in groups.items():  # group 1 starts as the directory's group 0
        if "group_1" in path:
            np.testing.assert_array_equal(value, groups[path.replace("group_1", "group_0")], err_msg=path)
    state = torch.load(str(tmp_path / "plbert" / "step_2.t7"))
    state["net"]["module.word_predictor.weight"] = torch.tensor(1.0)  # a 0-D head: refused, not skipped
    torch.save(state, str(tmp_path / "plbert" / "step_2.t7"))
    with pytest.raises(formats.CheckpointError, match=r"word_predictor.weight has shape \[\]"):
        formats.load_weights(grown, str(tmp_path / "plbert"), from_group0=True)
