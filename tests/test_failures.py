"""Hardening: each probe feeds one broken input and checks the error, and what is kept.

One test per probe. The serving probe runs the loaded SavedModel in a
subprocess, so a crash of the process (abort, segfault) fails the test
instead of killing pytest.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from command_helpers import run_command
from paths import CONFIGS, REPO

TOY_LINES = ["the quick brown fox jumps over the lazy dog %d" % i for i in range(300)]


@pytest.fixture(scope="module")
def toy_spm(tmp_path_factory):
    from data_prep.train_sentencepiece import train_sentencepiece

    prefix = tmp_path_factory.mktemp("spm") / "toy"
    return train_sentencepiece(TOY_LINES, str(prefix), vocab_size=60)


def tiny_backbone():
    from albert_tf.models.backbone import AlbertBackbone

    return AlbertBackbone.from_albert_config(str(CONFIGS / "albert_tiny.json"))


# ---- 1. serving: text_a and text_b of different batch sizes --------------------------------------
SERVE_MISMATCHED = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401
    serve = tf.saved_model.load(sys.argv[1]).signatures["serve_text_pair"]
    results = []
    for a, b in [(3, 1), (5, 0), (2, 1), (1, 2), (2, 2)]:
        try:
            out = serve(text_a=tf.constant(["x y z", "a b c", "d e f", "g", "h"][:a], tf.string),
                        text_b=tf.constant(["q", "r"][:b], tf.string))
            results.append({"a": a, "b": b, "rows": int(out["input_ids"].shape[0])})
        except tf.errors.InvalidArgumentError as error:
            results.append({"a": a, "b": b, "error": error.message})
    print(json.dumps(results))
""")


@pytest.mark.slow
def test_serve_text_pair_rejects_mismatched_batches_and_keeps_serving(toy_spm, tmp_path):
    from albert_tf.config import AlbertConfig
    from albert_tf.export import export_saved_model
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.tokenization import SentencePieceTokenizer

    config = json.loads((CONFIGS / "albert_tiny.json").read_text())
    backbone = AlbertBackbone.from_albert_config(AlbertConfig.from_dict(dict(config, vocab_size=60)))  # toy vocab
    export = export_saved_model(
        backbone, str(tmp_path / "export"), tokenizer=SentencePieceTokenizer(toy_spm), max_seq_length=16, warmup=False
    )
    # A fresh process loads and serves the export: a crash there (abort, segfault) fails this test, not pytest.
    done = subprocess.run(
        [sys.executable, "-c", SERVE_MISMATCHED, export],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert done.returncode == 0, f"the serving process died (rc {done.returncode}): {done.stderr[-2000:]}"
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for result in results[:-1]:
        assert "same number of rows" in result.get("error", ""), result
    assert results[-1] == {"a": 2, "b": 2, "rows": 2}  # the same loaded model answers the next good request


# ---- 4. model files -------------------------------------------------------------------------------
def test_config_unknown_key_is_an_error_naming_the_file(tmp_path, tiny_config_dict):
    from albert_tf.config import AlbertConfig, ConfigError

    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps({**tiny_config_dict, "shairng": "none", "hiden_size": 3}))
    with pytest.raises(ConfigError) as error:
        AlbertConfig.from_json_file(str(path))
    assert str(path) in str(error.value) and "hiden_size, shairng" in str(error.value)


def test_config_original_optional_keys_survive_a_saved_model_dir(tmp_path):
    from albert_tf import formats
    from albert_tf.config import AlbertConfig
    from albert_tf.formats.native import CONFIG_FILE
    from albert_tf.models.backbone import AlbertBackbone

    # A released config: gap_size, net_structure_type, num_memory_blocks (and layers_to_keep in xxlarge).
    source = json.loads((CONFIGS / "albert_xxlarge_v2.json").read_text())
    small = json.loads((CONFIGS / "albert_tiny.json").read_text())
    values = {**source, **{k: small[k] for k in small if k in source}, "gap_size": 7}
    path = tmp_path / "in.json"
    path.write_text(json.dumps(values))
    config = AlbertConfig.from_json_file(str(path))
    assert config.to_dict() == values
    saved = formats.save(AlbertBackbone.from_albert_config(str(path)), str(tmp_path / "model"))
    written = json.loads((tmp_path / "model" / CONFIG_FILE).read_text())
    assert written == values, saved


@pytest.fixture
def saved_backbone(tmp_path):
    from albert_tf import formats
    from albert_tf.formats.native import BACKBONE_WEIGHTS

    directory = str(tmp_path / "model")
    formats.save(tiny_backbone(), directory)
    return os.path.join(directory, BACKBONE_WEIGHTS)


def _poke_h5(weights_file, dataset_suffix, value):
    """Writes `value` into one element of the first dataset whose name ends with `dataset_suffix`."""
    import h5py

    with h5py.File(weights_file, "r+") as f:
        names = []
        f.visititems(lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None)
        name = next(n for n in sorted(names) if n.endswith(dataset_suffix))
        data = f[name][()]
        data.flat[0] = value
        f[name][...] = data


@pytest.mark.parametrize("value,what", [(1e24, "above 10000"), (np.nan, "non-finite"), (np.inf, "non-finite")])
def test_corrupt_weights_h5_values_are_rejected_naming_file_and_variable(saved_backbone, value, what):
    from albert_tf.formats import CheckpointError, load_weights

    _poke_h5(saved_backbone, "word_embeddings/vars/0", value)
    with pytest.raises(CheckpointError) as error:
        load_weights(tiny_backbone(), saved_backbone)
    message = str(error.value)
    assert saved_backbone in message and "word_embeddings" in message and what in message, message


def test_truncated_weights_h5_is_one_clear_error(saved_backbone):
    from albert_tf import formats
    from albert_tf.formats import CheckpointError

    data = open(saved_backbone, "rb").read()
    with open(saved_backbone, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(CheckpointError) as error:
        formats.load(os.path.dirname(saved_backbone))
    assert saved_backbone in str(error.value) and "truncated or corrupt" in str(error.value)


@pytest.fixture
def tf1_checkpoint(tmp_path):
    from albert_tf.formats.original import original_variables

    values = original_variables(tiny_backbone())
    shutil.copy(CONFIGS / "albert_tiny.json", tmp_path / "albert_config.json")
    return values, str(tmp_path / "model.ckpt")


def test_tf1_variable_full_of_nan_is_rejected(tf1_checkpoint):
    from albert_tf.formats import CheckpointError
    from albert_tf.formats.original import load_original_checkpoint, write_original_checkpoint

    values, prefix = tf1_checkpoint
    values["bert/pooler/dense/kernel"] = np.full_like(values["bert/pooler/dense/kernel"], np.nan)
    write_original_checkpoint(values, prefix)
    model = tiny_backbone()
    before = [w.copy() for w in model.get_weights()]
    with pytest.raises(CheckpointError) as error:
        load_original_checkpoint(model, prefix)
    assert prefix in str(error.value) and "bert/pooler/dense/kernel" in str(error.value)
    assert "non-finite" in str(error.value)
    for a, b in zip(before, model.get_weights()):  # nothing assigned
        np.testing.assert_array_equal(a, b)


def test_truncated_tf1_data_file_is_one_clear_error(tf1_checkpoint):
    from albert_tf import formats
    from albert_tf.formats import CheckpointError
    from albert_tf.formats.original import write_original_checkpoint

    values, prefix = tf1_checkpoint
    write_original_checkpoint(values, prefix)
    data_file = prefix + ".data-00000-of-00001"
    data = open(data_file, "rb").read()
    with open(data_file, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(CheckpointError) as error:
        formats.load(prefix)
    assert prefix in str(error.value) and "truncated or corrupt" in str(error.value)


def test_keras_file_that_is_not_an_albert_model_is_a_clear_error(tmp_path):
    import keras

    from albert_tf import formats
    from albert_tf.formats import ModelFileError

    inputs = keras.Input((4,))
    path = str(tmp_path / "other.keras")
    keras.Model(inputs, keras.layers.Dense(2)(inputs)).save(path)
    with pytest.raises(ModelFileError) as error:
        formats.load(path)
    assert path in str(error.value) and "not an albert_tf model" in str(error.value)


def test_max_seq_length_above_position_embeddings_fails_before_any_work(tmp_path, monkeypatch):
    from albert_tf import run_classifier
    from albert_tf.finetuning import runner
    from albert_tf.finetuning.settings import FineTuneError

    def no_work(*args, **kwargs):
        raise AssertionError("work started before the check")

    monkeypatch.setattr(runner, "_run", no_work)
    settings = run_classifier.ClassifierSettings(
        do_train=True,
        do_eval=True,
        output_dir=str(tmp_path / "out"),
        max_seq_length=256,
        task_name="sst-2",
        data_dir=str(tmp_path),
        albert_config_file=str(CONFIGS / "albert_tiny.json"),
    )
    with pytest.raises(FineTuneError) as error:
        run_classifier.run(settings)
    message = str(error.value)
    assert "--max_seq_length 256" in message and "albert_tiny.json" in message and "= 128" in message
    assert not (tmp_path / "out").exists()


# ---- 3. invalid UTF-8 in fine-tuning data --------------------------------------------------------
def test_glue_tsv_with_invalid_utf8_is_replaced_and_counted(tmp_path):
    from albert_tf.tasks import glue

    path = tmp_path / "dev.tsv"
    path.write_bytes(b"\xef\xbb\xbfsentence\tlabel\r\na fine film\t1\r\nbad \xff\xfe bytes \xe2\x82\t0\r\nok\t1\r\n")
    examples, report = glue.read_examples(glue.TASKS["sst-2"], str(path), "dev")
    assert [e.text_a for e in examples] == ["a fine film", "bad \ufffd\ufffd bytes \ufffd", "ok"]
    assert [e.label for e in examples] == [1, 0, 1]
    assert report.replaced_bytes == 3 and report.first_replaced == f"{path}:3" and report.skipped == 0


def test_squad_json_with_invalid_utf8_is_replaced_and_counted(tmp_path):
    from albert_tf.tasks import squad

    data = {
        "data": [
            {
                "paragraphs": [
                    {
                        "context": "Paris is in France.",
                        "qas": [
                            {
                                "id": "q1",
                                "question": "Where is PLACEHOLDER?",
                                "answers": [{"text": "France", "answer_start": 12}],
                            }
                        ],
                    }
                ]
            }
        ]
    }
    raw = json.dumps(data, ensure_ascii=False).encode("utf-8").replace(b"PLACEHOLDER", b"Par\xc3is")
    path = tmp_path / "train.json"
    path.write_bytes(raw)
    examples, report = squad.read_examples(str(path), is_training=True)
    assert examples[0].question == "Where is Par\ufffdis?" and examples[0].answer_text == "France"
    assert report["replaced_bytes"] == 1


def test_race_files_with_invalid_utf8_are_replaced_and_counted(tmp_path):
    from albert_tf.tasks import race

    record = {
        "id": "r1",
        "article": "An ARTICLE.",
        "questions": ["Why?"],
        "options": [["a", "b", "c", "d"]],
        "answers": ["B"],
    }
    raw = json.dumps(record).encode("utf-8").replace(b"ARTICLE", b"ART\x80ICLE")
    (tmp_path / "dev" / "middle").mkdir(parents=True)
    (tmp_path / "dev" / "middle" / "all.txt").write_bytes(raw + b"\n")
    (tmp_path / "dev" / "high").mkdir(parents=True)
    (tmp_path / "dev" / "high" / "1.txt").write_bytes(raw.replace(b"r1", b"r2").replace(b"Why", b"Wh\xf0\x9fy"))
    examples, report = race.read_examples(str(tmp_path), "dev")
    assert [e.article for e in examples] == ["An ART\ufffdICLE."] * 2
    assert report["replaced_bytes"] == 3 and report["skipped"] == 0
    assert sorted(report["replaced_by_file"].values()) == [1, 2]


# ---- 2. long texts without spaces: bounded work, the same ids ------------------------------------
EMOJI, CJK = "\U0001f600\U0001f680\U0001f44d", "\u4e2d\u6587\u5b57\u7b26\u6d4b\u8bd5"


def long_run_texts(lines):
    """Real lines with long runs of out-of-vocabulary characters put where a cut could hurt."""
    texts = []
    for i, line in enumerate(lines):
        words = line.split()
        run = (EMOJI if i % 2 else CJK) * (300 + 37 * i)
        middle = len(words) // 2
        texts += [
            run + " " + line,
            line + " " + run,
            " ".join(words[:middle] + [run] + words[middle:]),
            " ".join(words[:middle]) + run + " ".join(words[middle:]),  # inside a word
            "\u0301 " * 300 + line,  # 300 words that normalise to nothing before the real ones
            "A\u00a8" * 50 + run + "\u03a3" + run + "x\u00b4y",  # NFKD adds spaces; final sigma
            # uppercase Cyrillic: foreign once lowercased
            "\u041f\u0420\u0418\u0412\u0415\u0422" * 200 + " " + line,
        ]
    return texts


@pytest.mark.realdata
def test_long_runs_and_the_word_budget_never_change_surviving_ids(real_data, wikitext_spm):
    import tensorflow as tf

    from albert_tf.tokenization import SentencePieceTokenizer, encode_pieces
    from albert_tf.tokenization.tf_sentencepiece import TFSentencePieceTokenizer

    lines = [
        l.strip()
        for l in (real_data / "wikitext2" / "test.txt").read_text(encoding="utf-8").splitlines()
        if len(l.split()) > 20 and not l.startswith(" =")
    ][:12]
    texts = long_run_texts(lines) + lines
    tok = SentencePieceTokenizer(wikitext_spm)
    # The reference: the original's steps on the whole text, nothing shortened.
    reference = [tok.convert_tokens_to_ids(encode_pieces(tok.sp_model, tok.preprocess(t))) for t in texts]
    assert [tok.encode(t) for t in texts] == reference
    assert len(tok.shorten_foreign_runs(EMOJI * 300_000)) == 1
    twin = TFSentencePieceTokenizer(tok.model_proto)
    assert twin(tf.constant(texts)).to_list() == reference
    for max_ids in (1, 8, 64, 128):
        expected = [ids[:max_ids] for ids in reference]
        assert [tok.encode(t, max_ids=max_ids) for t in texts] == expected, max_ids
        assert twin(tf.constant(texts), max_ids=max_ids).to_list() == expected, max_ids


def test_data_prep_cuts_over_long_sentences_and_counts_them_per_file(tmp_path):
    from data_prep.documents import MAX_SENTENCE_CHARS, ReadStats, read_documents

    path = tmp_path / "corpus.txt"
    blob = " ".join([EMOJI * 1000] * 20)  # 20 "words" of 3,000 characters
    nospace = CJK * 5000  # 30,000 characters without a space
    path.write_text(f"A normal sentence.\n{blob}\n{nospace}\n\nNext document.\n", encoding="utf-8")
    stats = ReadStats(str(path))
    documents = list(read_documents(str(path), "bert", stats))
    first, blob_cut, nospace_cut = documents[0]
    assert first == "A normal sentence." and documents[1] == ["Next document."]
    assert len(blob_cut) <= MAX_SENTENCE_CHARS and blob.startswith(blob_cut) and blob_cut.endswith(EMOJI)
    assert blob_cut == " ".join([EMOJI * 1000] * 3)  # whole words only
    assert nospace_cut == nospace[:MAX_SENTENCE_CHARS]
    assert stats.cut_sentences == 2
    assert stats.cut_chars == len(blob) - len(blob_cut) + len(nospace) - MAX_SENTENCE_CHARS


@pytest.mark.parametrize(
    "exprs,says",
    [
        ('text_a=["a"', 'error: Expression "["a"" is not a valid python literal.'),
        ("text_a", 'error: --input_exprs "text_a" format is incorrect.'),
    ],
)
def test_saved_model_cli_bad_expression_is_one_line(tmp_path, monkeypatch, exprs, says):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    run = run_command(
        "albert_tf.saved_model_cli",
        ["run", "--dir", tmp_path, "--tag_set", "serve", "--signature_def", "serve_text", "--input_exprs", exprs],
    )
    assert run.returncode == 1
    assert len(run.stderr.strip().splitlines()) == 1 and run.stderr.startswith(says), run.stderr


def test_saved_model_cli_reads_its_command_line_before_tensorflow():
    """It took 14-17 s and 860 MB (TensorFlow loaded with the module) before it read --help or a flag.
    A subprocess: what a fresh process imports is under test."""
    code = textwrap.dedent(
        """
        import contextlib, io, json, sys
        from albert_tf.cli.saved_model_cli import cli
        for argv in (["--help"], ["run", "--dri", "x"], ["run", "--dir", "x"], ["sow", "--dir", "x"]):
            sys.argv, out, err, status = ["saved_model_cli", *argv], io.StringIO(), io.StringIO(), None
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    cli()
                except SystemExit as exit_:
                    status = exit_.code
            print(json.dumps([status, out.getvalue(), err.getvalue()]))
        print("tensorflow" in sys.modules)
        """
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    *answers, imported = result.stdout.splitlines()
    (help_status, help_text, _), *errors = [json.loads(answer) for answer in answers]
    assert help_status == 0 and "run              needs --dir, --tag_set, --signature_def" in help_text
    assert [(status, out, err.splitlines()[0]) for status, out, err in errors] == [
        (1, "", "FATAL Flags parsing error: Unknown command line flag 'dri'. Did you mean: dir ?"),
        (1, "", "error: saved_model_cli run needs --tag_set, --signature_def"),
        (1, "", "error: sow: not a command of saved_model_cli; one of show, run, scan, convert, freeze_model, "
         "aot_compile_cpu"),
    ]  # fmt: skip
    assert imported == "False"


def test_saved_model_cli_knows_tensorflows_commands_and_flags():
    """What the wrapper checks before TensorFlow loads is what TensorFlow's tool defines (read from its source)."""
    import ast
    import importlib.util

    from albert_tf.cli.saved_model_cli import COMMANDS, TOOL_FLAGS

    package = importlib.util.find_spec("tensorflow").submodule_search_locations[0]  # finds, does not import
    tree = ast.parse(open(os.path.join(package, "python", "tools", "saved_model_cli.py"), encoding="utf-8").read())
    defined = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "").startswith("DEFINE_"):
            keywords = {k.arg: k.value for k in node.keywords}
            kind = node.func.attr.removeprefix("DEFINE_")
            values = tuple(ast.literal_eval(keywords["enum_values"])) if kind == "enum" else kind
            defined[ast.literal_eval(keywords["name"])] = values
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "command_required_flags":
            required = {name: tuple(flags) for name, flags in ast.literal_eval(node.value).items()}
    assert TOOL_FLAGS == defined and COMMANDS == required


def test_one_dimensional_ids_are_named_not_blamed_on_the_positions():
    import tensorflow as tf

    from albert_tf.config import AlbertConfig
    from albert_tf.export.input_checks import serving_tensors

    config = AlbertConfig.from_json_file(str(CONFIGS / "albert_tiny.json"))
    request = {
        "input_ids": tf.constant([2, 50, 3]),
        "input_mask": tf.ones(3, tf.int32),
        "segment_ids": tf.zeros(3, tf.int32),
        "masked_lm_positions": tf.constant([[1]]),
    }
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"input_ids must be 2-D: \[batch size, sequence length\]"):
        serving_tensors(request, config)
    good = {name: value[tf.newaxis] for name, value in request.items() if name != "masked_lm_positions"}
    assert serving_tensors({**good, "masked_lm_positions": tf.constant([[1]])}, config)["input_ids"].shape == (1, 3)
