"""ALBERT's text normalisation and SentencePiece tokenization (pure Python).

This is the tokenizer of Google's `tokenization.py` in SentencePiece mode:
`preprocess_text` (whitespace collapse, NFKD, combining marks dropped,
lowercase) followed by `encode_pieces` (SentencePiece plus the digit-comma
re-split). It imports neither Keras nor TensorFlow, so Beam workers stay small;
`albert_tf.tf_tokenization` is its in-graph tf-text twin.

Example:

>>> preprocess_text("  Café   au LAIT ", lower=True)
'cafe au lait'
"""

import hashlib
import unicodedata
from typing import List, Optional, Sequence

import sentencepiece as spm

SPIECE_UNDERLINE = "\u2581"
PAD_PIECE, UNK_PIECE = "<pad>", "<unk>"
CLS_PIECE, SEP_PIECE, MASK_PIECE = "[CLS]", "[SEP]", "[MASK]"
# The ids every released ALBERT vocabulary has (spec §4).
ALBERT_SPECIAL_IDS = {PAD_PIECE: 0, UNK_PIECE: 1, CLS_PIECE: 2, SEP_PIECE: 3, MASK_PIECE: 4}
# The README's `spm_train --user_defined_symbols`.
ALBERT_USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac")


class TokenizerError(ValueError):
    """A SentencePiece model that cannot serve as an ALBERT vocabulary."""


def preprocess_text(text: str, lower: bool = True, remove_space: bool = True) -> str:
    """Normalises text exactly as the original ALBERT `preprocess_text`.

    Args:
        text: the raw text.
        lower: lowercase (the released English models are uncased).
        remove_space: collapse runs of whitespace and strip the ends.

    Returns:
        The normalised text. No quote replacement: that is XLNet's and
        Hugging Face's, and it changes ids.
    """
    if remove_space:
        text = " ".join(text.strip().split())
    if not text.isascii():  # ASCII is its own NFKD and has no combining marks
        text = unicodedata.normalize("NFKD", text)
        text = "".join(c for c in text if not unicodedata.combining(c))
    if lower:
        text = text.lower()
    return text


def _needs_digit_comma_split(piece: str) -> bool:
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def encode_pieces(sp_model: spm.SentencePieceProcessor, text: str) -> List[str]:
    """SentencePiece pieces with the original's digit-comma re-split.

    A piece such as `▁3,000,` is re-encoded without `▁` and the trailing comma,
    and the comma becomes its own piece. The original's attempt to drop the
    `▁` that re-encoding adds compares str with bytes and never fires under
    Python 3; we keep that behaviour so the ids match released models' data.
    """
    pieces = sp_model.encode(text, out_type=str)
    if not any(_needs_digit_comma_split(p) for p in pieces):
        return pieces
    new_pieces = []
    for piece in pieces:
        if _needs_digit_comma_split(piece):
            new_pieces.extend(sp_model.encode(piece[:-1].replace(SPIECE_UNDERLINE, ""), out_type=str))
            new_pieces.append(piece[-1])
        else:
            new_pieces.append(piece)
    return new_pieces


class SentencePieceTokenizer:
    """Text → ALBERT ids: `preprocess_text`, then SentencePiece.

    Args:
        model_file: path of a SentencePiece `.model` (read through Beam's or the
            local file system, so `gs://` paths work on Beam workers).
        do_lower_case: lowercase in `preprocess_text` (True for every released
            English ALBERT).
        model_proto: the model's bytes instead of `model_file`.

    Raises:
        TokenizerError: the model lacks `[CLS]`/`[SEP]`/`[MASK]` or does not
            pad with id 0; the message names the file.

    Example:

    >>> import os, tempfile
    >>> from data_prep.train_sentencepiece import train_sentencepiece
    >>> prefix = os.path.join(tempfile.mkdtemp(), "toy")
    >>> lines = ["the quick brown fox jumps over the lazy dog %d" % i for i in range(300)]
    >>> _ = train_sentencepiece(lines, prefix, vocab_size=60)
    >>> tok = SentencePieceTokenizer(prefix + ".model")
    >>> [tok.cls_id, tok.sep_id, tok.mask_id, tok.pad_id]
    [2, 3, 4, 0]
    >>> "".join(tok.tokenize("The QUICK  fox")).replace("\u2581", " ")
    ' the quick fox'
    """

    def __init__(self, model_file: Optional[str] = None, do_lower_case: bool = True,
                 model_proto: Optional[bytes] = None):
        if (model_file is None) == (model_proto is None):
            raise ValueError("Pass exactly one of model_file and model_proto.")
        if model_proto is None:
            model_proto = read_bytes(model_file)
        self.model_file = model_file or "<model_proto>"
        self.model_proto = model_proto
        self.do_lower_case = do_lower_case
        self.sp_model = spm.SentencePieceProcessor()
        try:
            self.sp_model.LoadFromSerializedProto(model_proto)
        except Exception as error:  # sentencepiece raises a bare RuntimeError
            raise TokenizerError(f"{self.model_file}: not a SentencePiece model ({error})") from None
        self._check_albert_symbols()
        self.vocab_size = self.sp_model.get_piece_size()
        self.pad_id = self.sp_model.pad_id()
        self.unk_id = self.sp_model.unk_id()
        self.cls_id = self.sp_model.piece_to_id(CLS_PIECE)
        self.sep_id = self.sp_model.piece_to_id(SEP_PIECE)
        self.mask_id = self.sp_model.piece_to_id(MASK_PIECE)
        # Ids whose piece needs the digit-comma re-split: lets `encode` stay in C++ otherwise.
        self._resplit_ids = frozenset(i for i in range(self.vocab_size)
                                      if _needs_digit_comma_split(self.sp_model.id_to_piece(i)))

    def _check_albert_symbols(self):
        sp = self.sp_model
        missing = [p for p in (CLS_PIECE, SEP_PIECE, MASK_PIECE)
                   if sp.piece_to_id(p) == sp.unk_id() or not sp.is_control(sp.piece_to_id(p))]
        problems = []
        if missing:
            problems.append("missing control symbols " + ", ".join(missing))
        if sp.pad_id() != 0:
            problems.append(f"pad id is {sp.pad_id()}, ALBERT pads with id 0")
        if problems:
            raise TokenizerError(
                f"{self.model_file}: not an ALBERT SentencePiece model: {'; '.join(problems)}. "
                "Train one with `python -m data_prep.train_sentencepiece` "
                "(pad=0, unk=1, [CLS]=2, [SEP]=3, [MASK]=4).")

    @property
    def model_sha256(self) -> str:
        return hashlib.sha256(self.model_proto).hexdigest()

    def preprocess(self, text: str) -> str:
        return preprocess_text(text, lower=self.do_lower_case)

    def tokenize(self, text: str) -> List[str]:
        """Pieces of `text` after `preprocess_text`."""
        return encode_pieces(self.sp_model, self.preprocess(text))

    def encode(self, text: str) -> List[int]:
        """Ids of `text` after `preprocess_text` (no [CLS]/[SEP])."""
        text = self.preprocess(text)
        ids = self.sp_model.encode(text)
        if self._resplit_ids.isdisjoint(ids):
            return ids
        return self.convert_tokens_to_ids(encode_pieces(self.sp_model, text))

    def convert_tokens_to_ids(self, pieces: Sequence[str]) -> List[int]:
        return [self.sp_model.piece_to_id(p) for p in pieces]

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> List[str]:
        return [self.sp_model.id_to_piece(int(i)) for i in ids]

    def pieces(self) -> List[str]:
        """Every piece in id order (specials included, as the original's vocab)."""
        return [self.sp_model.id_to_piece(i) for i in range(self.vocab_size)]


def read_bytes(path: str) -> bytes:
    """Reads a local or remote (`gs://`, `hdfs://`) file through Beam's file systems."""
    if "://" in path:
        from apache_beam.io.filesystems import FileSystems  # remote paths only
        with FileSystems.open(path) as f:
            return f.read()
    with open(path, "rb") as f:
        return f.read()
