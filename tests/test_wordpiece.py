"""WordPiece vocabularies: the original's rules, the tf-text twin, the vocab builder, bad vocab files."""

import json

import pytest

pytestmark = pytest.mark.realdata


def _toy(tmp_path, tokens):
    path = tmp_path / "vocab.txt"
    path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    return str(path)


def test_python_tokenizer_follows_bert_rules(tmp_path):
    from albert_tf.tokenization import WordPieceTokenizer

    vocab = _toy(
        tmp_path,
        [
            "[PAD]",
            "[UNK]",
            "[CLS]",
            "[SEP]",
            "[MASK]",
            "un",
            "##aff",
            "##able",
            "runn",
            "##ing",
            ",",
            "!",
            "cafe",
            "Café",
            "中",
            "国",
            "a",
            "##a",
        ],
    )
    uncased = WordPieceTokenizer(vocab)
    # Accents stripped and lowercased; punctuation and CJK characters split; greedy longest match.
    assert uncased.tokenize(" UNaffable\trunning,Café!中国 ") == [
        "un",
        "##aff",
        "##able",
        "runn",
        "##ing",
        ",",
        "cafe",
        "!",
        "中",
        "国",
    ]
    # A word with an unmatchable piece is one [UNK]; control characters vanish, U+3000 is a space.
    assert uncased.tokenize("unxable un\u200baff\x07able\u3000aa") == ["[UNK]", "un", "##aff", "##able", "a", "##a"]
    assert uncased.tokenize("a" * 200) == ["a"] + ["##a"] * 199 and uncased.tokenize("a" * 201) == ["[UNK]"]
    cased = WordPieceTokenizer(vocab, do_lower_case=False)
    assert cased.tokenize("Café cafe UN") == ["Café", "cafe", "[UNK]"]
    assert (uncased.pad_id, uncased.unk_id, uncased.cls_id, uncased.sep_id, uncased.mask_id) == (0, 1, 2, 3, 4)


def test_special_ids_come_from_the_vocab(tmp_path):
    from albert_tf.tokenization import WordPieceTokenizer

    # Google's Chinese vocab.txt layout: [PAD]=0, [unused*], then [UNK]=100 ... [MASK]=103.
    tokens = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]", "中"]
    tok = WordPieceTokenizer(_toy(tmp_path, tokens))
    assert (tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id, tok.encode("中x")) == (100, 101, 102, 103, [104, 100])


def test_bad_vocab_files_and_flags_are_clear_errors(tmp_path):
    from albert_tf.tokenization import TokenizerError, WordPieceTokenizer, load_tokenizer

    with pytest.raises(TokenizerError, match=r"vocab.txt: not a WordPiece vocab.txt for ALBERT: missing \[MASK\]"):
        WordPieceTokenizer(_toy(tmp_path, ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"]))
    (tmp_path / "binary.txt").write_bytes(b"[PAD]\n\xff\xfe\n")
    with pytest.raises(TokenizerError, match="binary.txt: not a UTF-8 vocab.txt"):
        WordPieceTokenizer(str(tmp_path / "binary.txt"))
    with pytest.raises(TokenizerError, match="exactly one of --spm_model_file .* and --vocab_file .*got neither"):
        load_tokenizer()
    with pytest.raises(TokenizerError, match="got both"):
        load_tokenizer("spm.model", "vocab.txt")
    with pytest.raises(TokenizerError, match=r"--vocab_file .*missing.txt: cannot be read \(No such file"):
        load_tokenizer(vocab_file=str(tmp_path / "missing.txt"))
    with pytest.raises(TokenizerError, match=r"--spm_model_file .*missing.model: cannot be read \(No such file"):
        load_tokenizer(spm_model_file=str(tmp_path / "missing.model"))


@pytest.mark.slow
@pytest.mark.parametrize("do_lower_case", [True, False])
def test_tf_twin_gives_identical_ids(wordpiece_vocab, wordpiece_corpus, do_lower_case):
    import tensorflow as tf

    from albert_tf.tokenization import WordPieceTokenizer, tf_tokenizer_for
    from albert_tf.tokenization.tf_wordpiece import TFWordPieceTokenizer

    python = WordPieceTokenizer(wordpiece_vocab, do_lower_case=do_lower_case)
    graph = tf_tokenizer_for(python)
    assert isinstance(graph, TFWordPieceTokenizer)
    for name, lines in wordpiece_corpus.items():
        lines = lines[:1500] + ["", "  \t ", "x" * 250 + " ok", "a\u00a0b\u2028c\x00d\ufffde"]
        got = graph(tf.constant(lines)).to_list()
        expected = [python.encode(line) for line in lines]
        mismatches = [(line, g, e) for line, g, e in zip(lines, got, expected) if g != e]
        assert not mismatches, (name, mismatches[:3])
        known = sum(len(e) - e.count(python.unk_id) for e in expected) / max(1, sum(len(e) for e in expected))
        assert known > 0.95, (name, known)  # the vocab covers the text it was learned from


@pytest.mark.slow
def test_vocab_builder_cli(real_data, tmp_path, monkeypatch):
    from albert_tf.tokenization import WordPieceTokenizer

    from command_helpers import run_command
    from paths import REPO

    monkeypatch.chdir(REPO)

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(
        "\n".join((real_data / "wikitext2" / "test.txt").read_text(encoding="utf-8").splitlines()[:800]),
        encoding="utf-8",
    )
    out = tmp_path / "vocab" / "vocab.txt"
    result = run_command(
        "data_prep.build_wordpiece_vocab",
        [f"--input={corpus}", "--input_format=wikitext", f"--output_file={out}", "--vocab_size=1000"],
    )
    assert result.returncode == 0, result.stderr[-2000:]
    tokens = out.read_text(encoding="utf-8").splitlines()
    assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and len(set(tokens)) == len(tokens)
    assert any(t.startswith("##") for t in tokens) and len(tokens) == 1000  # exactly --vocab_size
    tok = WordPieceTokenizer(str(out))
    ids = tok.encode("The game was released in Japan in 2010 .")
    assert tok.unk_id not in ids and len(ids) >= 9
    small = run_command(
        "data_prep.build_wordpiece_vocab",
        [f"--input={corpus}", f"--output_file={tmp_path / 'v3.txt'}", "--vocab_size=50"],
    )
    assert small.returncode != 0 and not (tmp_path / "v3.txt").exists()
    assert "--vocab_size 50: the reserved tokens and the corpus's" in small.stderr, small.stderr[-2000:]
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    result = run_command(
        "data_prep.build_wordpiece_vocab", [f"--input={empty}", f"--output_file={tmp_path / 'v2.txt'}"]
    )
    assert result.returncode != 0 and "no text" in result.stderr and not (tmp_path / "v2.txt").exists()


def test_the_vocabulary_size_is_reached_in_a_few_learner_passes_and_placeholders_are_said(
    wordpiece_corpus, tmp_path, monkeypatch
):
    """Korean at 1,800 tokens: the learner's own 5 % search left 87 [unusedN] in four full searches (hardening V);
    a bounded search on its threshold cuts its nearest larger vocabulary to size. A corpus too small is padded,
    and the command says how many tokens are placeholders."""
    from albert_tf.tokenization import bert_normalize
    from data_prep.build_wordpiece_vocab import build_wordpiece_vocab

    from command_helpers import run_command
    from paths import REPO

    lines = [bert_normalize(line, False).strip() for line in wordpiece_corpus["korean"][:400]]
    lines = [line for line in lines if line]
    tokens = build_wordpiece_vocab(lines, 1800)
    assert len(tokens) == len(set(tokens)) == 1800 and not [t for t in tokens if t.startswith("[unused")]
    assert {char for line in lines for char in line if not char.isspace()} <= set(tokens)  # every character kept

    from data_prep.build_wordpiece_vocab import MAX_TRIES, placeholders

    monkeypatch.chdir(REPO)
    corpus = tmp_path / "small.txt"
    corpus.write_text("\n".join(lines[:20]), encoding="utf-8")
    result = run_command(
        "data_prep.build_wordpiece_vocab",
        [f"--input={corpus}", f"--output_file={tmp_path / 'vocab.txt'}", "--vocab_size=1800", "--nodo_lower_case"],
    )
    written = (tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines()
    unused = placeholders(written)
    assert result.returncode == 0 and len(written) == 1800 and 0 < unused == len([t for t in written if "unused" in t])
    assert f"(1800 tokens, {unused} of them [unusedN] placeholders" in result.stdout, result.stdout
    passes = [line for line in result.stderr.splitlines() if line.startswith("pieces seen at least")]
    assert 1 <= len(passes) <= MAX_TRIES, result.stderr  # each learner pass is said


@pytest.mark.slow
def test_chinese_style_model_end_to_end(real_data, wordpiece_vocab, wordpiece_corpus, tmp_path):
    """WordPiece + ReLU: data_prep → pretraining → fine-tuning on NSMC → export with the text signature."""
    import json
    import os

    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the text signatures' ops)

    from albert_tf import formats
    from albert_tf.export import export_pretraining_run, export_saved_model
    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import PretrainSettings
    from albert_tf.run_classifier import ClassifierSettings
    from albert_tf.run_classifier import run as run_classifier
    from albert_tf.tokenization import WordPieceTokenizer
    from data_prep.pipeline import Settings
    from data_prep.pipeline import run as create_data

    from paths import CONFIGS
    from pretraining_helpers import read_dataset

    tokenizer = WordPieceTokenizer(wordpiece_vocab, do_lower_case=False)
    # Corpus: one document per Chinese sentence pair, per 20 Korean reviews, per 40 WikiText sentences.
    chinese, korean, english = (wordpiece_corpus[k] for k in ("chinese", "korean", "english"))
    documents = [chinese[i : i + 2] for i in range(0, len(chinese), 2)]
    documents += [korean[i : i + 20] for i in range(0, 600, 20)] + [english[i : i + 40] for i in range(0, 400, 40)]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(d) for d in documents), encoding="utf-8")
    metadata = create_data(
        Settings(
            input_file=str(corpus),
            output_dir=str(tmp_path / "data"),
            tokenizer=WordPieceTokenizer(wordpiece_vocab, do_lower_case=False),
            max_seq_length=64,
            dupe_factor=2,
            num_shards=2,
        )
    )
    assert metadata["vocab_type"] == "wordpiece" and metadata["vocab_sha256"] == tokenizer.model_sha256
    _, data = read_dataset(tmp_path / "data")
    ids = data["input_ids"].copy()
    weights = data["masked_lm_weights"] > 0
    ids[np.nonzero(weights)[0], data["masked_lm_positions"][weights]] = data["masked_lm_ids"][weights]
    continuation = np.vectorize(lambda i: tokenizer.convert_ids_to_tokens([i])[0].startswith("##"))(ids)
    real = data["input_mask"] == 1
    specials = np.isin(ids, [tokenizer.cls_id, tokenizer.sep_id])
    # Word starts follow the ## rule, and a masked ## piece always has its word's previous piece masked too.
    assert np.array_equal(data["token_boundary"][real] == 1, (~continuation | specials)[real])
    masked = np.zeros_like(ids, bool)
    masked[np.nonzero(weights)[0], data["masked_lm_positions"][weights]] = True
    rows, cols = np.nonzero(masked & continuation)
    # The previous piece, skipping a [SEP] (a truncated segment may start mid-word; BERT joins it across);
    # a segment cut mid-word right after [CLS] has no previous piece.
    previous = np.where(specials[rows, cols - 1], cols - 2, cols - 1)
    inside = previous > 0
    assert inside.sum() > 1000 and masked[rows[inside], previous[inside]].all()
    assert np.isin([tokenizer.vocab["模"], tokenizer.vocab["型"]], ids).all()  # the Chinese text made it in

    config = json.loads((CONFIGS / "albert_tiny.json").read_text())
    config.update(hidden_act="relu", vocab_size=tokenizer.vocab_size)
    (tmp_path / "albert_config.json").write_text(json.dumps(config))
    settings = PretrainSettings(
        output_dir=str(tmp_path / "pretrain"),
        input_file=str(tmp_path / "data"),
        albert_config_file=str(tmp_path / "albert_config.json"),
        train_batch_size=8,
        max_seq_length=64,
        num_train_steps=3,
        num_warmup_steps=1,
        save_checkpoints_steps=3,
        verbose=False,
    )
    summary = pretrain(settings, tokenizer=tokenizer)
    summary["outputs"].update(export_pretraining_run(settings.output_dir, version=3, max_seq_length=64))
    served = tf.saved_model.load(summary["outputs"]["saved_model_pretrainer"])
    assert "vocab.txt" in os.listdir(os.path.join(summary["outputs"]["saved_model_pretrainer"], "assets"))
    text = "ALBERT是一种轻量级的[MASK]模型。"
    out = served.signatures["serve_text"](text_a=tf.constant([text]))
    expected = (
        [tokenizer.cls_id]
        + tokenizer.encode("ALBERT是一种轻量级的")
        + [tokenizer.mask_id]
        + tokenizer.encode("模型。")
        + [tokenizer.sep_id]
    )
    assert out["input_ids"].numpy()[0].tolist() == expected

    # Fine-tuning: NSMC reviews as a two-class GLUE-format task (rating ≥ 8 is positive).
    reviews = json.loads((real_data / "nsmc" / "raw" / "10001.json").read_text(encoding="utf-8"))
    rows = [
        (r["review"].replace("\t", " ").strip(), int(int(r["rating"]) >= 8)) for r in reviews if r["review"].strip()
    ]
    glue = tmp_path / "nsmc"
    glue.mkdir()
    for split, chosen in (("train", rows[:48]), ("dev", rows[48:80])):
        (glue / f"{split}.tsv").write_text(
            "sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in chosen), encoding="utf-8"
        )
    tuned = run_classifier(
        ClassifierSettings(
            do_train=True,
            do_eval=True,
            output_dir=str(tmp_path / "tuned"),
            task_name="sst-2",
            data_dir=str(glue),
            init_checkpoint=str(tmp_path / "pretrain"),
            do_lower_case=False,
            tokenizer=WordPieceTokenizer(wordpiece_vocab, do_lower_case=False),
            max_seq_length=64,
            train_batch_size=8,
            eval_batch_size=16,
            train_step=4,
            save_checkpoints_steps=2,
            verbose=False,
        )
    )
    assert tuned["eval"]["num_examples"] == 32
    loaded = formats.load(str(tmp_path / "tuned" / "best"))
    assert loaded.vocab_file.endswith("vocab.txt") and loaded.spm_model_file is None
    assert loaded.model.backbone.albert_config.hidden_act == "relu"
    path = export_saved_model(
        loaded.model,
        str(tmp_path / "export"),
        tokenizer=WordPieceTokenizer(loaded.vocab_file, do_lower_case=False),
        max_seq_length=64,
    )
    classifier = tf.saved_model.load(path).signatures["serve_text"]
    review = rows[-1][0]
    result = classifier(text_a=tf.constant([review, "這部電影非常好看"]))
    packed = [tokenizer.cls_id] + tokenizer.encode(review)[:62] + [tokenizer.sep_id]
    assert result["input_ids"].numpy()[0][: len(packed)].tolist() == packed
    logits = loaded.model.predict(
        {k: result[k].numpy() for k in ("input_ids", "input_mask", "segment_ids")}, verbose=0
    )["logits"]
    np.testing.assert_allclose(result["logits"].numpy(), logits, atol=1e-5)
    assert set(result["label"].numpy().tolist()) <= {0, 1}


@pytest.mark.slow
def test_cased_model_keeps_its_case_through_fine_tuning_and_export_without_flags(
    wordpiece_vocab, tmp_path, monkeypatch
):
    """The tokenizer travels with the model: no casing flag after fine-tuning (the trap of lowercasing)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the text signatures' ops)

    from albert_tf.run_classifier import ClassifierSettings
    from albert_tf.run_classifier import run as run_classifier
    from albert_tf.tokenization import WordPieceTokenizer

    from command_helpers import run_command
    from paths import CONFIGS, REPO

    cased = WordPieceTokenizer(wordpiece_vocab, do_lower_case=False)
    text = "Seoul and PARIS"
    assert cased.encode(text) != WordPieceTokenizer(wordpiece_vocab).encode(text)  # casing changes the ids
    config = json.loads((CONFIGS / "albert_tiny.json").read_text())
    config["vocab_size"] = cased.vocab_size
    (tmp_path / "albert_config.json").write_text(json.dumps(config))
    glue = tmp_path / "task"
    glue.mkdir()
    rows = [(f"Row {i} in Seoul", i % 2) for i in range(24)]
    for split in ("train", "dev"):
        (glue / f"{split}.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows))
    run_classifier(
        ClassifierSettings(
            do_train=True,
            do_eval=True,
            output_dir=str(tmp_path / "tuned"),
            task_name="sst-2",
            data_dir=str(glue),
            albert_config_file=str(tmp_path / "albert_config.json"),
            tokenizer=WordPieceTokenizer(wordpiece_vocab, do_lower_case=False),
            do_lower_case=False,
            max_seq_length=32,
            train_batch_size=8,
            eval_batch_size=8,
            train_step=2,
            save_checkpoints_steps=2,
            verbose=False,
        )
    )
    saved = json.loads((tmp_path / "tuned" / "best" / "tokenizer.json").read_text())
    assert saved["kind"] == "wordpiece" and saved["do_lower_case"] is False
    monkeypatch.chdir(REPO)
    result = run_command(
        "albert_tf.cli.export_model",  # what `python -m albert_tf.export` runs
        [f"--model_dir={tmp_path / 'tuned'}", f"--output_dir={tmp_path / 'served'}", "--max_seq_length=32"],
    )
    assert result.returncode == 0, result.stderr[-3000:]
    served = tf.saved_model.load(str(tmp_path / "served" / "1"))
    ids = served.signatures["serve_text"](text_a=tf.constant([text]))["input_ids"].numpy()[0].tolist()
    assert ids == [cased.cls_id] + cased.encode(text) + [cased.sep_id]
