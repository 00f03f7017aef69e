"""Parity with the real peers: the same weights give the same outputs in both libraries.

transformers (+ CPU torch) and keras-hub are test requirements; what is compared:
sequence and pooled outputs, MLM logits, SOP logits and classifier logits, to 1e-5,
in both directions (our files loaded by the peer, the peer's own files loaded by us).
"""

import numpy as np
import pytest

from albert_tf import formats
from albert_tf.convert_checkpoint import convert
from albert_tf.tokenization import SentencePieceTokenizer

from interop_helpers import build, inputs, tiny_config, train_toy_spm

pytestmark = pytest.mark.slow
ATOL = 1e-5


@pytest.fixture(scope="module")
def toy_spm(tmp_path_factory):
    return train_toy_spm(tmp_path_factory.mktemp("spm"))


def ours_outputs(model, x):
    backbone = getattr(model, "backbone", model)
    features = {k: x[k] for k in ("input_ids", "input_mask", "segment_ids")}
    out = {k: v.numpy() for k, v in backbone(features).items()}
    if type(model).__name__ == "AlbertPretrainer":
        out.update({k: v.numpy() for k, v in model(x).items()})
    elif model is not backbone:
        out.update({k: v.numpy() for k, v in model(features).items()})
    return out


def mlm_logits_with_epsilon(model, sequence_output, positions, epsilon):
    """Our MLM head in NumPy with another LayerNorm ε (keras-hub's MaskedLMHead uses 1e-5)."""
    head = model.mlm_head
    x = np.take_along_axis(sequence_output, positions[..., None], 1) @ head.transform.kernel.numpy()
    x = x + head.transform.bias.numpy()
    x = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + epsilon)
    x = x * head.layer_norm.gamma.numpy() + head.layer_norm.beta.numpy()
    embeddings = model.backbone.word_embeddings.embeddings.numpy()
    return x @ embeddings.T + head.output_bias.numpy()


def check_keras_hub_mlm(theirs, ours, model, x):
    """Same weights, keras-hub's ε: equal to 1e-5; with our ε the logits move by < 1e-3."""
    expected = mlm_logits_with_epsilon(model, ours["sequence_output"], x["masked_lm_positions"], 1e-5)
    close(theirs, expected, "mlm_logits (ε=1e-5)")
    np.testing.assert_allclose(theirs, ours["mlm_logits"], atol=1e-3, rtol=0)


def close(a, b, what):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=ATOL, rtol=0, err_msg=what)


# ---- HF transformers ------------------------------------------------------------------------
def torch_outputs(directory, x, architecture):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    args = dict(
        input_ids=torch.tensor(x["input_ids"], dtype=torch.long),
        attention_mask=torch.tensor(x["input_mask"], dtype=torch.long),
        token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long),
    )
    out = {}
    with torch.no_grad():
        base = transformers.AlbertModel.from_pretrained(directory).eval()(**args)
        out["sequence_output"], out["pooled_output"] = base.last_hidden_state, base.pooler_output
        model = getattr(transformers, architecture).from_pretrained(directory).eval()
        result = model(**args)
    if architecture == "AlbertForPreTraining":
        positions = x["masked_lm_positions"][..., None]
        out["mlm_logits"] = np.take_along_axis(result.prediction_logits.numpy(), positions, 1)
        out["sop_logits"] = result.sop_logits
    elif architecture == "AlbertForSequenceClassification":
        out["logits"] = result.logits
    return {k: np.asarray(v) for k, v in out.items()}


@pytest.mark.parametrize(
    "kind,architecture", [("pretrainer", "AlbertForPreTraining"), ("classifier", "AlbertForSequenceClassification")]
)
def test_transformers_loads_our_output_with_the_same_numbers(tmp_path, toy_spm, kind, architecture):
    model = build(kind)
    our_dir = tmp_path / "ours"
    our_dir.mkdir()
    from interop_helpers import save_ours

    save_ours(model, our_dir, toy_spm)
    convert(str(our_dir), output_dir=str(tmp_path / "hf"), output_format="hf")
    x = inputs()
    theirs, ours = torch_outputs(str(tmp_path / "hf"), x, architecture), ours_outputs(model, x)
    assert sorted(theirs) == sorted(k for k in ours if k in theirs) and len(theirs) >= 3
    for name in theirs:
        close(theirs[name], ours[name], name)


def test_transformers_tokenizer_loads_our_vocabulary(tmp_path, toy_spm):
    transformers = pytest.importorskip("transformers")
    our_dir = tmp_path / "ours"
    our_dir.mkdir()
    from interop_helpers import save_ours

    save_ours(build("backbone"), our_dir, toy_spm)
    convert(str(our_dir), output_dir=str(tmp_path / "hf"), output_format="hf")
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    ours = SentencePieceTokenizer(toy_spm)
    for text in ("The quick brown fox jumps.", "paris is the CAPITAL of france"):
        assert theirs(text)["input_ids"] == [ours.cls_id] + ours.encode(text) + [ours.sep_id]


def test_we_load_transformers_own_files_with_the_same_numbers(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = tiny_config()
    hf_config = transformers.AlbertConfig(
        vocab_size=config.vocab_size,
        embedding_size=config.embedding_size,
        hidden_size=config.hidden_size,
        num_hidden_layers=config.num_hidden_layers,
        num_hidden_groups=config.num_hidden_groups,
        inner_group_num=config.inner_group_num,
        num_attention_heads=config.num_attention_heads,
        intermediate_size=config.intermediate_size,
        max_position_embeddings=config.max_position_embeddings,
        hidden_act="gelu",
    )  # the erf GELU of HF's v1 configs: our gelu_exact
    torch.manual_seed(0)
    model = transformers.AlbertForPreTraining(hf_config)
    with torch.no_grad():
        for index, parameter in enumerate(model.parameters()):
            parameter.normal_(0.001 * index, 0.2)
    model.save_pretrained(str(tmp_path / "hf"))
    loaded = formats.load(str(tmp_path / "hf"))
    assert loaded.model.backbone.albert_config.hidden_act == "gelu_exact"
    x = inputs()
    theirs, ours = torch_outputs(str(tmp_path / "hf"), x, "AlbertForPreTraining"), ours_outputs(loaded.model, x)
    for name in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
        close(theirs[name], ours[name], name)


# ---- keras-hub ------------------------------------------------------------------------------------
def keras_hub_outputs(preset, x, task):
    keras_hub = pytest.importorskip("keras_hub")
    features = {"token_ids": x["input_ids"], "padding_mask": x["input_mask"], "segment_ids": x["segment_ids"]}
    out = {k: v.numpy() for k, v in keras_hub.models.AlbertBackbone.from_preset(preset)(features).items()}
    if task == "masked_lm":
        model = keras_hub.models.AlbertMaskedLM.from_preset(preset)
        out["mlm_logits"] = model({**features, "mask_positions": x["masked_lm_positions"]}).numpy()
    elif task == "classifier":
        out["logits"] = keras_hub.models.AlbertTextClassifier.from_preset(preset)(features).numpy()
    return out


@pytest.mark.parametrize("kind,task", [("pretrainer", "masked_lm"), ("classifier", "classifier")])
def test_keras_hub_loads_our_output_with_the_same_numbers(tmp_path, toy_spm, kind, task):
    keras_hub = pytest.importorskip("keras_hub")
    model = build(kind)
    our_dir = tmp_path / "ours"
    our_dir.mkdir()
    from interop_helpers import save_ours

    save_ours(model, our_dir, toy_spm)
    convert(str(our_dir), output_dir=str(tmp_path / "kh"), output_format="keras_hub")
    x = inputs()
    theirs, ours = keras_hub_outputs(str(tmp_path / "kh"), x, task), ours_outputs(model, x)
    assert len(theirs) == 3
    for name in theirs:
        if name == "mlm_logits":  # keras-hub's head LayerNorm has ε=1e-5, ours 1e-12
            check_keras_hub_mlm(theirs[name], ours, model, x)
        else:
            close(theirs[name], ours[name], name)
    tokenizer = keras_hub.models.AlbertTokenizer.from_preset(str(tmp_path / "kh"))
    text = "the quick brown fox jumps over the lazy dog"  # keras-hub does no lowercasing: lowercase text
    assert list(np.asarray(tokenizer(text))) == SentencePieceTokenizer(toy_spm).encode(text)


def _keras_hub_structure(path):
    import h5py

    names = []
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: names.append((name, obj.shape if hasattr(obj, "shape") else None)))
    return sorted(names)


@pytest.mark.parametrize("task", [None, "masked_lm", "classifier"])
def test_we_load_keras_hub_own_presets_with_the_same_numbers(tmp_path, task):
    keras_hub = pytest.importorskip("keras_hub")
    config = tiny_config()
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=config.vocab_size,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        embedding_dim=config.embedding_size,
        hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        num_groups=config.num_hidden_groups,
        num_inner_repetitions=config.inner_group_num,
        max_sequence_length=config.max_position_embeddings,
    )
    model = {
        None: lambda: backbone,
        "masked_lm": lambda: keras_hub.models.AlbertMaskedLM(backbone, preprocessor=None),
        "classifier": lambda: keras_hub.models.AlbertTextClassifier(backbone, 3, preprocessor=None),
    }[task]()
    rng = np.random.default_rng(3)
    model.set_weights(
        [rng.normal(0.001 * i, 0.2, w.shape).astype(np.float32) for i, w in enumerate(model.get_weights())]
    )
    model.save_to_preset(str(tmp_path / "kh"))
    loaded = formats.load(str(tmp_path / "kh"))
    x = inputs()
    theirs, ours = keras_hub_outputs(str(tmp_path / "kh"), x, task), ours_outputs(loaded.model, x)
    for name in theirs:
        if name == "mlm_logits":
            check_keras_hub_mlm(theirs[name], ours, loaded.model, x)
        else:
            close(theirs[name], ours[name], name)
    # Our writer gives the file layout keras-hub's own saver gives.
    convert(str(tmp_path / "kh"), output_dir=str(tmp_path / "again"), output_format="keras_hub")
    files = ["model.weights.h5"] + (["task.weights.h5"] if task else [])
    for name in files:
        assert _keras_hub_structure(tmp_path / "again" / name) == _keras_hub_structure(tmp_path / "kh" / name)


def real_texts(real_data, name):
    """SST-2 dev sentences, SQuAD dev contexts and questions, or NSMC reviews (Korean)."""
    import csv
    import json

    if name == "sst2":
        with open(real_data / "glue" / "SST-2" / "dev.tsv", encoding="utf-8") as f:
            return [row[0] for row in list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]]
    if name == "squad":
        articles = json.loads((real_data / "squad_v1.1" / "dev-v1.1.json").read_text(encoding="utf-8"))["data"]
        return [
            t for a in articles[:8] for p in a["paragraphs"] for t in [p["context"]] + [q["question"] for q in p["qas"]]
        ]
    reviews = []
    for path in sorted((real_data / "nsmc" / "raw").glob("*.json"))[40:70]:  # not the vocabulary's own reviews
        reviews += [r["review"] for r in json.loads(path.read_text(encoding="utf-8"))]
    return reviews


@pytest.mark.realdata
@pytest.mark.parametrize(
    "data",
    [
        "sst2",
        pytest.param(
            "squad",
            marks=pytest.mark.xfail(
                strict=True, reason="open: a SQuAD context differs at a digit-comma piece (hf_tokenizer)"
            ),
        ),
        "nsmc",
    ],
)
def test_auto_tokenizer_on_our_hf_export_gives_our_ids_on_real_text(
    tmp_path, real_data, wikitext_spm, korean_spm, data
):
    transformers = pytest.importorskip("transformers")
    ours = SentencePieceTokenizer(korean_spm if data == "nsmc" else wikitext_spm)
    (tmp_path / "hf").mkdir()
    formats.save(build("classifier"), str(tmp_path / "hf"), "hf", ours)
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    texts = real_texts(real_data, data)
    assert len(texts) > 800
    differing = []
    for text in texts:
        expected = [ours.cls_id] + ours.encode(text) + [ours.sep_id]
        got = theirs(text)["input_ids"]
        if got != expected:
            differing.append((text, expected, got))
    # The one documented difference (albert_tf.formats.hf_tokenizer): a tie between two orders of the
    # same pieces with the same score (runs like ㅜㅜㅜ), which SentencePiece and tokenizers break apart.
    score = ours.sp_model.get_score
    for text, expected, got in differing:
        assert sorted(got) == sorted(expected), (text, ours.sp_model.id_to_piece(expected), got)
        assert sum(map(score, got)) == pytest.approx(sum(map(score, expected)), abs=1e-4), text
    assert len(differing) <= len(texts) // 100, f"{len(differing)} ties of {len(texts)}"
    if data == "squad":  # pairs: [CLS] question [SEP] context [SEP] with segment ids 0 then 1
        question, context = texts[1], texts[0]
        pair = theirs(question, context)
        a, b = ours.encode(question), ours.encode(context)
        assert pair["input_ids"] == [ours.cls_id, *a, ours.sep_id, *b, ours.sep_id]
        assert pair["token_type_ids"] == [0] * (len(a) + 2) + [1] * (len(b) + 1)
