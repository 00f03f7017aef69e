"""The SentencePiece kind: Google's `tokenization.py` in SentencePiece mode (every English ALBERT).

`preprocess_text` (whitespace collapse, NFKD, combining marks dropped,
lowercase) followed by `encode_pieces` (SentencePiece plus the digit-comma
re-split); the word-start rule is the original's `_is_start_piece_sp`.
"""

import re
from typing import FrozenSet, List, Optional, Sequence

import sentencepiece as spm

from albert_tf.tokenization.base import (
    MAX_SEGMENTED_CHARS,
    Tokenizer,
    TokenizerError,
    file_or_bytes,
    too_long_to_segment,
    word_prefix,
)
from albert_tf.tokenization.registry import TokenizerKind, register
from albert_tf.tokenization.text import foreign_eligible, preprocess_text

SPIECE_UNDERLINE = "\u2581"
PAD_PIECE, UNK_PIECE = "<pad>", "<unk>"
CLS_PIECE, SEP_PIECE, MASK_PIECE = "[CLS]", "[SEP]", "[MASK]"
# The ids every released ALBERT vocabulary has (the original's `tokenization.py`).
ALBERT_SPECIAL_IDS = {PAD_PIECE: 0, UNK_PIECE: 1, CLS_PIECE: 2, SEP_PIECE: 3, MASK_PIECE: 4}
# The README's `spm_train --user_defined_symbols`.
ALBERT_USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac")


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


_START_PUNCTUATION = set('!"#$%&"()*+,-./:;?@[\\]^_`{|}~')
_ENGLISH = set("abcdefghijklmnopqrstuvwxyz")


def is_start_piece(piece: str) -> bool:
    """The original `_is_start_piece_sp`, quirks included.

    A piece starts a word if it begins with `▁` or `<`, is a single listed
    punctuation mark, or holds any character outside a–z and that punctuation
    (digits and non-Latin text start words; `'`, `<`, `=`, `>` are not listed).
    """
    return (
        piece.startswith("\u2581")
        or piece.startswith("<")
        or piece in _START_PUNCTUATION
        or not all(c.lower() in _ENGLISH or c.lower() in _START_PUNCTUATION for c in piece)
    )


class SentencePieceTokenizer(Tokenizer):
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

    kind = "sentencepiece"

    def __init__(
        self, model_file: Optional[str] = None, do_lower_case: bool = True, model_proto: Optional[bytes] = None
    ):
        self.model_file, self.model_proto = file_or_bytes(model_file, model_proto, "model_file", "model_proto")
        model_proto = self.model_proto
        self.do_lower_case = do_lower_case
        self.sp_model = spm.SentencePieceProcessor()
        try:
            self.sp_model.LoadFromSerializedProto(model_proto)
        except (RuntimeError, ValueError, TypeError) as error:  # sentencepiece raises a bare RuntimeError
            raise TokenizerError(f"{self.model_file}: not a SentencePiece model ({error})") from None
        self._check_albert_symbols()
        self.vocab_size = self.sp_model.get_piece_size()
        self.pad_id = self.sp_model.pad_id()
        self.unk_id = self.sp_model.unk_id()
        self.cls_id = self.sp_model.piece_to_id(CLS_PIECE)
        self.sep_id = self.sp_model.piece_to_id(SEP_PIECE)
        self.mask_id = self.sp_model.piece_to_id(MASK_PIECE)
        # Ids whose piece needs the digit-comma re-split: lets `encode` stay in C++ otherwise.
        self._resplit_ids = frozenset(
            i for i in range(self.vocab_size) if _needs_digit_comma_split(self.sp_model.id_to_piece(i))
        )
        self._unknown_run, self._foreign, self._seen_foreign = None, {}, None  # built when first needed
        # With byte fallback an unknown character is its UTF-8 bytes' pieces, not one merged <unk>.
        self._byte_fallback = any(self.sp_model.is_byte(i) for i in range(self.vocab_size))

    def vocabulary_chars(self) -> FrozenSet[str]:
        """Every character of every piece (what cannot be a foreign character)."""
        return frozenset("".join(self.pieces()))

    def shorten_foreign_runs(self, text: str) -> str:
        """`text` (raw) with each run of foreign characters cut to its first: the same ids, less work."""
        if len(text) < 2 or self._byte_fallback:
            return text
        if self._unknown_run is None:  # runs of characters in no piece; the foreign ones are shortened
            known = sorted(ord(c) for c in self.vocabulary_chars())
            self._unknown_run = re.compile("[^\\s" + "".join(f"\\U{cp:08X}" for cp in known) + "]{2,}")
        return self._unknown_run.sub(self._shorten_run, text)

    def _shorten_run(self, match) -> str:
        run = match.group()
        # The characters not yet classified (a regex of the foreign ones seen so far drops the rest
        # at C speed: `set` over a long run of non-Latin-1 characters is slow).
        unseen = self._seen_foreign.sub("", run) if self._seen_foreign is not None else run
        if not unseen:
            return run[0]  # the common case: a run of foreign characters already seen
        distinct = set(unseen)
        new = [char for char in distinct if char not in self._foreign]
        for char in new:
            self._foreign[char] = foreign_eligible(char)
        if any(self._foreign[char] for char in new):
            seen = sorted(c for c, foreign in self._foreign.items() if foreign)
            self._seen_foreign = re.compile("[" + "".join(f"\\U{ord(c):08X}" for c in seen) + "]+")
        if all(self._foreign[char] for char in distinct):
            return run[0]
        kept, previous_foreign = [], False
        for char in run:
            foreign = self._foreign.get(char)
            if foreign is None:
                foreign = self._foreign[char] = foreign_eligible(char)
            if not (foreign and previous_foreign):
                kept.append(char)
            previous_foreign = foreign
        return "".join(kept)

    def _check_albert_symbols(self):
        sp = self.sp_model
        missing = [
            p
            for p in (CLS_PIECE, SEP_PIECE, MASK_PIECE)
            if sp.piece_to_id(p) == sp.unk_id() or not sp.is_control(sp.piece_to_id(p))
        ]
        problems = []
        if missing:
            problems.append("missing control symbols " + ", ".join(missing))
        if sp.pad_id() != 0:
            problems.append(f"pad id is {sp.pad_id()}, ALBERT pads with id 0")
        if problems:
            raise TokenizerError(
                f"{self.model_file}: not an ALBERT SentencePiece model: {'; '.join(problems)}. "
                "Train one with `python -m data_prep.train_sentencepiece` "
                "(pad=0, unk=1, [CLS]=2, [SEP]=3, [MASK]=4)."
            )

    def preprocess(self, text: str) -> str:
        return preprocess_text(text, lower=self.do_lower_case)

    def _preprocess_for_spm(self, text: str) -> str:
        # Before preprocessing (less work), and after it (runs that lowercasing or NFKD made foreign).
        text = self.shorten_foreign_runs(self.preprocess(self.shorten_foreign_runs(text)))
        if len(text) > MAX_SEGMENTED_CHARS:
            raise TokenizerError(too_long_to_segment(len(text)))
        return text

    def tokenize(self, text: str) -> List[str]:
        """Pieces of `text` after `preprocess_text`."""
        return encode_pieces(self.sp_model, self._preprocess_for_spm(text))

    def encode(self, text: str, max_ids: Optional[int] = None) -> List[int]:
        """Ids of `text` after `preprocess_text` (no [CLS]/[SEP]).

        With `max_ids`, the first `max_ids` ids only, from bounded work: see `word_prefix`.
        """
        if max_ids is not None:
            prefix = word_prefix(text, max_ids)
            if prefix is not None:
                ids = self._encode(prefix)
                if len(ids) >= max_ids:
                    return ids[:max_ids]
            return self._encode(text)[:max_ids]
        return self._encode(text)

    def _encode(self, text: str) -> List[int]:
        text = self._preprocess_for_spm(text)
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

    @staticmethod
    def pieces_to_text(pieces: Sequence[str]) -> str:
        return "".join(pieces).replace(SPIECE_UNDERLINE, " ").strip()


SENTENCEPIECE = register(
    TokenizerKind(
        name=SentencePieceTokenizer.kind,
        asset_name="spm.model",
        asset_patterns=("*.model",),  # Google's archives: their one `30k-clean.model`
        flag="spm_model_file",
        description="SentencePiece model",
        from_file=lambda path, do_lower_case: SentencePieceTokenizer(path, do_lower_case=do_lower_case),
        from_bytes=lambda data, do_lower_case: SentencePieceTokenizer(model_proto=data, do_lower_case=do_lower_case),
        is_word_start=is_start_piece,
        tf_twin="albert_tf.tokenization.tf_sentencepiece.twin_of",
    )
)
