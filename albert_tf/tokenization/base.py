"""What every tokenizer kind shares: the `Tokenizer` interface, its error, `tokenizer.json`, bounded work."""

import hashlib
import json
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from albert_tf.errors import AlbertError
from albert_tf.tokenization import registry
from albert_tf.tokenization.packing import pack_segments

TOKENIZER_FILE = "tokenizer.json"  # {kind, do_lower_case, vocabulary}: saved beside every model's vocabulary


class TokenizerError(AlbertError, ValueError):
    """A vocabulary (SentencePiece model or vocab.txt) that cannot serve ALBERT, or none given."""


_NON_SPACE = re.compile(r"\S+")  # `\s` is `str.isspace`, the whitespace `preprocess_text` splits on


def word_prefix(text: str, words: int) -> Optional[str]:
    """`text` up to its `words`-th whitespace-separated word, or None when nothing follows it.

    The budget of `encode(text, max_ids)`. Cutting at whitespace never changes
    the ids before the cut: `preprocess_text` keeps every whitespace a word
    boundary, and SentencePiece (split_by_whitespace, as every ALBERT model) and
    WordPiece never let a piece cross one; so the prefix's ids begin the full
    text's ids. A word gives at least one id unless normalisation empties it,
    so the prefix's first `max_ids` ids are the text's whenever the prefix
    yields that many; `encode` checks this and otherwise tokenises the whole text.
    """
    match = None
    for index, match in enumerate(_NON_SPACE.finditer(text), start=1):  # noqa: B007  (read after the loop)
        if index == words:
            break
    if match is None or _NON_SPACE.search(text, match.end()) is None:
        return None
    return text[: match.end()]


# SentencePiece holds ~200 bytes per character of what it segments at once (tf-text ~370; WordPiece
# ~100 on CJK): one text, after `encode`'s word budget and the foreign-run shortening, may hand it at
# most this many (~200 MB; a serving request, all its texts together: ~370 MB). Far above any real
# field (GLUE's are under csv's 131,072), so only text without spaces reaches it.
MAX_SEGMENTED_CHARS = 1_000_000


def too_long_to_segment(chars) -> str:
    return (
        f"a text of {chars:,} characters to segment at once, over the limit of {MAX_SEGMENTED_CHARS:,} "
        "(the tokenizer needs ~100-370 bytes per character; only text up to the max_seq_length-th "
        "space-separated word is segmented, so this text has too few spaces): split it or shorten it"
    )


class Tokenizer:
    """What every ALBERT tokenizer offers (SentencePiece and WordPiece implement it).

    Calling it on texts (and second segments) gives the model's padded input
    dict, packed as fine-tuning packs it:

        batch = tokenizer(["a fine film", "a dull one"], max_length=128)
        batch["input_ids"].shape  # (2, longest row); padding="max_length": (2, 128)

    `encode`/`tokenize`, the special ids, and `save(dir)` / `load_tokenizer_dir(dir)`:
    the vocabulary file plus `tokenizer.json` (`kind`, `do_lower_case`), which
    every model we save carries, so that no command has to be told again.
    What differs by kind (asset name, flag, word-start rule, tf-text twin) is
    its `registry.TokenizerKind`, found by `kind`.
    """

    kind = ""  # the name of its registry entry
    model_proto: bytes = b""
    do_lower_case: bool = True

    @property
    def model_sha256(self) -> str:
        return hashlib.sha256(self.model_proto).hexdigest()

    @property
    def special_ids(self) -> dict:
        return {"pad": self.pad_id, "unk": self.unk_id, "cls": self.cls_id, "sep": self.sep_id, "mask": self.mask_id}

    @property
    def asset_name(self) -> str:
        """The vocabulary's file name in a model directory (`spm.model`, `vocab.txt`)."""
        return registry.kind_named(self.kind).asset_name

    def is_word_start(self, piece: str) -> bool:
        """The whole-word masking rule of this vocabulary."""
        return registry.kind_named(self.kind).is_word_start(piece)

    def metadata(self) -> dict:
        return {
            "kind": self.kind,
            "do_lower_case": self.do_lower_case,
            "vocabulary": self.asset_name,
            "vocab_size": self.vocab_size,
            "vocab_sha256": self.model_sha256,
        }

    def __call__(
        self,
        texts: Union[str, Sequence[str]],
        texts_b: Union[None, str, Sequence[str]] = None,
        max_length: int = 128,
        padding: str = "longest",
    ) -> Dict[str, np.ndarray]:
        """`input_ids`, `input_mask`, `segment_ids` (int32 `[n, length]`) of `[CLS] a [SEP] (b [SEP])`.

        Each row is truncated to `max_length` as the original (a pair: the longer
        segment loses its last piece first). `padding="longest"` pads to the
        longest row, `"max_length"` to `max_length`; the padding is 0.
        """
        if isinstance(texts, str):
            texts = [texts]
        if isinstance(texts_b, str):
            texts_b = [texts_b]
        if padding not in ("longest", "max_length"):
            raise TokenizerError(f"padding={padding!r}: expected 'longest' or 'max_length'")
        if max_length < (5 if texts_b is not None else 3):
            raise TokenizerError(f"max_length={max_length}: too short for [CLS], a piece of each text and [SEP]")
        if texts_b is not None and len(texts_b) != len(texts):
            raise TokenizerError(f"{len(texts)} texts but {len(texts_b)} second texts (texts_b)")
        rows = []
        for index, text in enumerate(texts):
            # Each segment's first max_length ids: all packing keeps, from bounded work.
            ids_b = None if texts_b is None else self.encode(texts_b[index], max_ids=max_length)
            ids_a = self.encode(text, max_ids=max_length)
            rows.append(pack_segments(ids_a, ids_b, max_length, self.cls_id, self.sep_id))
        width = max_length if padding == "max_length" else max((len(ids) for ids, _ in rows), default=0)
        batch = {name: np.zeros((len(rows), width), np.int32) for name in ("input_ids", "input_mask", "segment_ids")}
        for row, (ids, segments) in enumerate(rows):
            batch["input_ids"][row, : len(ids)] = ids
            batch["input_mask"][row, : len(ids)] = 1
            batch["segment_ids"][row, : len(ids)] = segments
        return batch

    def save(self, directory: str) -> List[str]:
        """Writes the vocabulary (`spm.model` / `vocab.txt`) and `tokenizer.json` into `directory`."""
        os.makedirs(directory, exist_ok=True)
        vocabulary = os.path.join(directory, self.asset_name)
        with open(vocabulary, "wb") as f:
            f.write(self.model_proto)
        settings = os.path.join(directory, TOKENIZER_FILE)
        with open(settings, "wb") as f:
            f.write(tokenizer_json(self))
        return [vocabulary, settings]


def tokenizer_json(tokenizer: Tokenizer) -> bytes:
    """The bytes of `tokenizer.json` for `tokenizer`."""
    return json.dumps(tokenizer.metadata(), indent=2).encode("utf-8")


def file_or_bytes(path: Optional[str], data: Optional[bytes], path_arg: str, data_arg: str) -> Tuple[str, bytes]:
    """A tokenizer's model given as exactly one of a file and its bytes: (the name errors show, the bytes)."""
    if (path is None) == (data is None):
        raise ValueError(f"Pass exactly one of {path_arg} and {data_arg}.")
    return (path, read_bytes(path)) if data is None else (f"<{data_arg}>", data)


def read_bytes(path: str) -> bytes:
    """Reads a local or remote (`gs://`, `hdfs://`) file through Beam's file systems."""
    if "://" in path:
        from apache_beam.io.filesystems import FileSystems  # remote paths only

        with FileSystems.open(path) as f:
            return f.read()
    with open(path, "rb") as f:
        return f.read()
