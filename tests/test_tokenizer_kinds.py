"""A new tokenizer kind is one module plus one registration: every path then finds it.

The toy kind below (characters as pieces, a word's first marked with `▁`) is
the whole module a new kind needs; the test drives it through the same calls
the commands use: flag resolution, a model directory with and without
`tokenizer.json`, bytes (Beam workers), whole-word masking and the twin lookup.
"""

import json
import random
import subprocess
import sys

import pytest

from albert_tf.tokenization import (
    Tokenizer,
    TokenizerError,
    TokenizerKind,
    read_bytes,
    register,
    registry,
    resolve_tokenizer,
    tf_tokenizer_for,
    tokenizer_from_bytes,
    vocabulary_in,
)
from data_prep.masking import MaskingOptions, NgramMasker

from paths import REPO

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


# ---- the new kind: one module's worth -----------------------------------------------------------
class CharTokenizer(Tokenizer):
    """One piece per character; `▁` marks a word's first."""

    kind = "toy_chars"

    def __init__(self, chars_file=None, do_lower_case=True, chars_bytes=None):
        self.model_proto = chars_bytes if chars_bytes is not None else read_bytes(chars_file)
        self.model_file = chars_file or "<chars_bytes>"
        self.do_lower_case = do_lower_case
        self._pieces = self.model_proto.decode("utf-8").split("\n")
        if tuple(self._pieces[:5]) != SPECIALS:
            raise TokenizerError(f"{self.model_file}: the first five lines must be {', '.join(SPECIALS)}")
        self.vocab = {piece: index for index, piece in enumerate(self._pieces)}
        self.vocab_size = len(self._pieces)
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = range(5)

    def preprocess(self, text):
        return text.lower() if self.do_lower_case else text

    def tokenize(self, text):
        return [("\u2581" if i == 0 else "") + c for word in self.preprocess(text).split() for i, c in enumerate(word)]

    def encode(self, text, max_ids=None):
        ids = [self.vocab.get(piece, self.unk_id) for piece in self.tokenize(text)]
        return ids if max_ids is None else ids[:max_ids]

    def convert_ids_to_tokens(self, ids):
        return [self._pieces[int(i)] for i in ids]

    def pieces(self):
        return list(self._pieces)


def toy_twin(tokenizer):
    return ("twin of", tokenizer.kind, tokenizer.model_sha256)


TOY_KIND = TokenizerKind(
    name=CharTokenizer.kind,
    asset_name="chars.txt",
    flag="chars_file",
    description="character list",
    from_file=lambda path, do_lower_case: CharTokenizer(path, do_lower_case),
    from_bytes=lambda data, do_lower_case: CharTokenizer(chars_bytes=data, do_lower_case=do_lower_case),
    is_word_start=lambda piece: piece.startswith("\u2581") or piece in SPECIALS,
    tf_twin=f"{__name__}.toy_twin",
)
# ---- end of the new kind ------------------------------------------------------------------------


@pytest.fixture
def toy_kind():
    register(TOY_KIND)
    yield TOY_KIND
    registry.unregister(TOY_KIND.name)


@pytest.fixture
def wikitext_lines(real_data):
    lines = (real_data / "wikitext2" / "test.txt").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip()][:300]


@pytest.fixture
def chars_file(tmp_path, wikitext_lines):
    chars = sorted({c for line in wikitext_lines for c in line.lower() if not c.isspace()})
    path = tmp_path / "my_chars.txt"
    path.write_text("\n".join(list(SPECIALS) + chars + ["\u2581" + c for c in chars]), encoding="utf-8")
    return path


@pytest.mark.realdata
def test_a_registered_kind_loads_saves_and_masks_through_the_normal_paths(
    toy_kind, chars_file, wikitext_lines, tmp_path
):
    tokenizer = resolve_tokenizer(files={"chars_file": str(chars_file)})
    assert type(tokenizer) is CharTokenizer and tokenizer.asset_name == "chars.txt"
    ids = [tokenizer.encode(line) for line in wikitext_lines]
    assert sum(len(i) for i in ids) > 10_000 and tokenizer.unk_id not in {i for row in ids for i in row}
    # Two vocabularies given: the message lists the new kind's flag among the others.
    with pytest.raises(TokenizerError, match="exactly one of --spm_model_file .*--chars_file .*got both"):
        resolve_tokenizer(files={"vocab_file": str(chars_file), "chars_file": str(chars_file)})

    # Saved with a model, found again (tokenizer.json gives the kind and the lowercasing).
    cased = resolve_tokenizer(files={"chars_file": str(chars_file)}, do_lower_case=False)
    model_dir = tmp_path / "model"
    assert sorted(p.split("/")[-1] for p in cased.save(str(model_dir))) == ["chars.txt", "tokenizer.json"]
    again = resolve_tokenizer(model_dir=str(model_dir))
    assert type(again) is CharTokenizer and again.do_lower_case is False
    assert again.model_sha256 == tokenizer.model_sha256
    assert [again.encode(line) for line in wikitext_lines] == [cased.encode(line) for line in wikitext_lines]
    # A directory holding only the vocabulary file (no tokenizer.json) is searched by asset name.
    (model_dir / "tokenizer.json").unlink()
    assert vocabulary_in(str(model_dir)) == ("toy_chars", str(model_dir / "chars.txt"))
    assert resolve_tokenizer(model_dir=str(model_dir)).encode(wikitext_lines[0]) == ids[0]

    # Beam workers rebuild it from bytes; whole-word masking groups its pieces by its own rule.
    rebuilt = tokenizer_from_bytes("toy_chars", tokenizer.model_proto)
    assert [rebuilt.encode(line) for line in wikitext_lines] == ids
    masker = NgramMasker(tokenizer.pieces(), MaskingOptions(masked_lm_prob=0.15), vocab_type="toy_chars")
    for line, row in zip(wikitext_lines, ids):
        units, _ = masker.word_units(row)
        assert len(units) == len(line.split())
    longest = max(ids, key=len)
    masked = masker.mask(longest, random.Random(0))
    units, _ = masker.word_units(longest)
    chosen = set(masked.positions)
    assert chosen and all(chosen.isdisjoint(unit) or chosen.issuperset(unit) for unit in units)  # whole words

    # The in-graph twin is the registered dotted path, imported when asked for.
    assert tf_tokenizer_for(tokenizer) == ("twin of", "toy_chars", tokenizer.model_sha256)


def test_an_unregistered_kind_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="unknown tokenizer kind 'toy_chars'; known: sentencepiece, wordpiece"):
        tokenizer_from_bytes("toy_chars", b"")
    (tmp_path / "tokenizer.json").write_text('{"kind": "toy_chars"}')
    with pytest.raises(TokenizerError, match=r"tokenizer.json: field 'kind': expected one of \['sentencepiece'"):
        resolve_tokenizer(model_dir=str(tmp_path))


def test_the_tokenizers_and_beam_workers_import_no_tensorflow():
    code = (
        "import sys, albert_tf.tokenization, data_prep.pipeline, data_prep.masking; "
        "print('tensorflow' in sys.modules, 'tensorflow_text' in sys.modules)"
    )
    # A subprocess: what a fresh interpreter imports is under test; the test process has TensorFlow already.
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["False", "False"]


@pytest.mark.realdata
@pytest.mark.slow
def test_a_registered_kind_runs_through_data_prep_and_fine_tuning_commands(toy_kind, chars_file, real_data, tmp_path):
    """The new kind's own flag (`--chars_file`) is honoured by the commands, not only by the library calls."""
    from command_helpers import run_command
    from paths import CONFIGS

    tokenizer = resolve_tokenizer(files={"chars_file": str(chars_file)})
    data = tmp_path / "data"
    made = run_command(
        "data_prep.create_pretraining_data",
        [f"--input_file={real_data / 'wikitext2' / 'valid.txt'}", f"--output_dir={data}", f"--chars_file={chars_file}"]
        + ["--input_format=wikitext", "--max_seq_length=64", "--dupe_factor=1", "--num_shards=1"],
    )
    assert made.returncode == 0, made.stderr[-2000:]
    metadata = json.loads((data / "metadata.json").read_text())
    assert metadata["vocab_type"] == "toy_chars" and metadata["vocab_sha256"] == tokenizer.model_sha256
    assert metadata["settings"]["chars_file"] == str(chars_file) and metadata["settings"]["spm_model_file"] is None
    assert (data / "chars.txt").read_bytes() == chars_file.read_bytes()  # the vocabulary travels with the data
    recorded = json.loads((data / "settings.json").read_text())["input_sha256"]
    assert recorded["chars_file"] == {str(chars_file): tokenizer.model_sha256}

    # A fresh model of the toy vocabulary's size, fine-tuned on SST-2 rows: its tokenizer is the flag's.
    config = json.loads((CONFIGS / "albert_tiny.json").read_text()) | {"vocab_size": tokenizer.vocab_size}
    (tmp_path / "albert_config.json").write_text(json.dumps(config))
    glue = tmp_path / "sst2"
    glue.mkdir()
    for split, rows in (("train", 65), ("dev", 33)):
        lines = (real_data / "glue" / "SST-2" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()[:rows]
        (glue / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    tuned = run_command(
        "albert_tf.run_classifier",
        [f"--albert_config_file={tmp_path / 'albert_config.json'}", f"--chars_file={chars_file}"]
        + ["--task_name=sst-2", f"--data_dir={glue}", f"--output_dir={tmp_path / 'tuned'}", "--max_seq_length=64"]
        + ["--do_train", "--do_eval", "--train_step=2", "--save_checkpoints_steps=2", "--train_batch_size=8"],
    )
    assert tuned.returncode == 0, tuned.stderr[-2000:]
    best = tmp_path / "tuned" / "best"
    saved = json.loads((best / "tokenizer.json").read_text())
    assert saved["kind"] == "toy_chars" and (best / "chars.txt").read_bytes() == chars_file.read_bytes()
    assert json.loads((tmp_path / "tuned" / "summary.json").read_text())["eval"]["num_examples"] == 32
