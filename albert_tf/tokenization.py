"""ALBERT's tokenizers (pure Python): SentencePiece and WordPiece.

`SentencePieceTokenizer` is Google's `tokenization.py` in SentencePiece mode:
`preprocess_text` (whitespace collapse, NFKD, combining marks dropped,
lowercase) followed by `encode_pieces` (SentencePiece plus the digit-comma
re-split). `WordPieceTokenizer` is its `vocab_file` mode (BERT's basic
tokenizer and greedy WordPiece), used by the Chinese models. Both share one
interface (`encode`, `tokenize`, special ids, `pieces`, `kind`); build one with
`load_tokenizer`. No Keras or TensorFlow here, so Beam workers stay small;
`albert_tf.tf_tokenization` holds the in-graph tf-text twins.

Example:

>>> preprocess_text("  Café   au LAIT ", lower=True)
'cafe au lait'
"""

import functools
import hashlib
import json
import os
import re
import sys
import unicodedata
from typing import FrozenSet, List, Optional, Sequence, Tuple

import sentencepiece as spm

from albert_tf.confined import path_inside
from albert_tf.errors import AlbertError

SPIECE_UNDERLINE = "\u2581"
PAD_PIECE, UNK_PIECE = "<pad>", "<unk>"
CLS_PIECE, SEP_PIECE, MASK_PIECE = "[CLS]", "[SEP]", "[MASK]"
# The ids every released ALBERT vocabulary has (the original's `tokenization.py`).
ALBERT_SPECIAL_IDS = {PAD_PIECE: 0, UNK_PIECE: 1, CLS_PIECE: 2, SEP_PIECE: 3, MASK_PIECE: 4}
# The README's `spm_train --user_defined_symbols`.
ALBERT_USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac")


class TokenizerError(AlbertError, ValueError):
    """A vocabulary (SentencePiece model or vocab.txt) that cannot serve ALBERT, or none given."""


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
        text = _combining_marks().sub("", text)  # the characters with unicodedata.combining(c) != 0
    if lower:
        text = text.lower()
    return text


# ---- long runs of out-of-vocabulary characters -------------------------------------------------
# SentencePiece merges a run of unknown characters into one <unk> piece, and that
# merge takes time quadratic in the run's length (1 MB of emoji: 20 s; 10 MB: hours).
# Each run of two or more "foreign" characters (below) in the raw text is shortened
# to its first character before anything else. This never changes an id:
#  - foreign characters pass `preprocess_text` and SentencePiece's normaliser
#    unchanged and uncombined (NFKC- and NFKD-stable, in no canonical composition,
#    lowercase-invariant, not a space, control, format character or mark);
#  - no vocabulary piece contains one, so every segmentation has a piece boundary
#    before and after each (nothing outside the run moves);
#  - the run itself is one merged <unk> piece whatever its length (one id).
# So the text shrinks before any per-character work, and SentencePiece's <unk>
# merge, quadratic in the run's length (1 MB of emoji: 20 s), never sees a long run.
# tests/test_failures.py checks identical ids with and without it on real text.
_HANGUL_JAMO = ((0x1100, 0x11FF), (0xA960, 0xA97F), (0xD7B0, 0xD7FF))
_NOT_FOREIGN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zs", "Zl", "Zp", "Mn", "Mc", "Me"})


@functools.lru_cache(maxsize=None)
def _composition_components() -> FrozenSet[int]:
    """Code points in some canonical decomposition: NFKC may compose them with a neighbour."""
    components = set()
    for cp in range(sys.maxunicode + 1):
        decomposition = unicodedata.decomposition(chr(cp))
        if decomposition and not decomposition.startswith("<"):
            components.update(int(part, 16) for part in decomposition.split())
    return frozenset(components)


def _foreign_eligible(char: str) -> bool:
    """SentencePiece's normaliser passes `char` through unchanged and uncomposed (any vocabulary)."""
    if any(low <= ord(char) <= high for low, high in _HANGUL_JAMO):
        return False  # NFKC composes conjoining jamo algorithmically (not in unicodedata.decomposition)
    category = unicodedata.category(char)
    if category in ("Cn", "Co"):  # unassigned, private use: no decomposition, no composition
        return True
    return (
        category not in _NOT_FOREIGN_CATEGORIES
        and not char.isspace()
        and char.lower() == char
        and ord(char) not in _composition_components()
        and unicodedata.is_normalized("NFKC", char)
        and unicodedata.is_normalized("NFKD", char)
    )


@functools.lru_cache(maxsize=None)
def _foreign_eligible_ranges() -> Tuple[Tuple[int, int], ...]:
    """Code point ranges of `_foreign_eligible` characters."""
    ranges, start = [], None
    for cp in range(sys.maxunicode + 1):
        eligible = not 0xD800 <= cp <= 0xDFFF and _foreign_eligible(chr(cp))
        if eligible and start is None:
            start = cp
        elif not eligible and start is not None:
            ranges.append((start, cp - 1))
            start = None
    if start is not None:
        ranges.append((start, sys.maxunicode))
    return tuple(ranges)


def foreign_ranges(vocabulary_chars: FrozenSet[str]) -> List[Tuple[int, int]]:
    """Code point ranges of the characters no piece of the vocabulary contains (and eligible, above)."""
    excluded = sorted({ord(c) for c in vocabulary_chars})
    result = []
    for low, high in _foreign_eligible_ranges():
        for cp in excluded:
            if cp > high:
                break
            if cp >= low:
                if cp > low:
                    result.append((low, cp - 1))
                low = cp + 1
        if low <= high:
            result.append((low, high))
    return result


def foreign_run_pattern(vocabulary_chars: FrozenSet[str], escape=lambda cp: f"\\U{cp:08X}") -> str:
    """A regex matching a run of two or more foreign characters; group 1 is its first one.

    `escape` writes a code point in the regex dialect (Python's `re` by default; RE2 for tf-text).
    """
    body = "".join(escape(a) if a == b else f"{escape(a)}-{escape(b)}" for a, b in foreign_ranges(vocabulary_chars))
    return f"([{body}])[{body}]+"


@functools.lru_cache(maxsize=None)
def _combining_marks() -> "re.Pattern":
    """A regex of every character with a non-zero canonical combining class (C speed on long texts)."""
    marks = [cp for cp in range(sys.maxunicode + 1) if unicodedata.combining(chr(cp))]
    ranges = []
    for cp in marks:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return re.compile("[" + "".join(f"\\U{a:08X}-\\U{b:08X}" for a, b in ranges) + "]")


def _needs_digit_comma_split(piece: str) -> bool:
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


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


TOKENIZER_FILE = "tokenizer.json"  # {kind, do_lower_case, vocabulary}: saved beside every model's vocabulary
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


def is_start_wordpiece(piece: str) -> bool:
    """BERT's rule for WordPiece vocabularies: every piece but a `##` continuation starts a word.

    >>> [is_start_wordpiece(p) for p in ["play", "##ing", "中", "[UNK]"]]
    [True, False, True, True]
    """
    return not piece.startswith("##")


class Tokenizer:
    """What every ALBERT tokenizer offers (SentencePiece and WordPiece implement it).

    `encode`/`tokenize`, the special ids, the word-start rule of whole-word
    masking, the in-graph twin (`to_tf`), and `save(dir)` / `load_tokenizer_dir(dir)`:
    the vocabulary file plus `tokenizer.json` (`kind`, `do_lower_case`), which
    every model we save carries, so that no command has to be told again.
    """

    kind = ""
    asset_name = ""
    model_proto: bytes = b""
    do_lower_case: bool = True

    @property
    def model_sha256(self) -> str:
        return hashlib.sha256(self.model_proto).hexdigest()

    @property
    def special_ids(self) -> dict:
        return {"pad": self.pad_id, "unk": self.unk_id, "cls": self.cls_id, "sep": self.sep_id, "mask": self.mask_id}

    def is_word_start(self, piece: str) -> bool:
        """The whole-word masking rule of this vocabulary."""
        raise NotImplementedError

    def to_tf(self):
        """The in-graph (tf-text) twin, for tf.data and the SavedModel's text signatures."""
        from albert_tf.tf_tokenization import tf_tokenizer_for  # TensorFlow only when asked for

        return tf_tokenizer_for(self)

    def metadata(self) -> dict:
        return {
            "kind": self.kind,
            "do_lower_case": self.do_lower_case,
            "vocabulary": self.asset_name,
            "vocab_size": self.vocab_size,
            "vocab_sha256": self.model_sha256,
        }

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
    asset_name = "spm.model"

    def __init__(
        self, model_file: Optional[str] = None, do_lower_case: bool = True, model_proto: Optional[bytes] = None
    ):
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
            self._foreign[char] = _foreign_eligible(char)
        if any(self._foreign[char] for char in new):
            seen = sorted(c for c, foreign in self._foreign.items() if foreign)
            self._seen_foreign = re.compile("[" + "".join(f"\\U{ord(c):08X}" for c in seen) + "]+")
        if all(self._foreign[char] for char in distinct):
            return run[0]
        kept, previous_foreign = [], False
        for char in run:
            foreign = self._foreign.get(char)
            if foreign is None:
                foreign = self._foreign[char] = _foreign_eligible(char)
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

    def is_word_start(self, piece: str) -> bool:
        return is_start_piece(piece)

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


def read_bytes(path: str) -> bytes:
    """Reads a local or remote (`gs://`, `hdfs://`) file through Beam's file systems."""
    if "://" in path:
        from apache_beam.io.filesystems import FileSystems  # remote paths only

        with FileSystems.open(path) as f:
            return f.read()
    with open(path, "rb") as f:
        return f.read()


# ---- WordPiece (BERT's vocab.txt: Google's Chinese ALBERT models, custom vocabularies) --------
WORDPIECE_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
WORDPIECE_CONTINUATION = "##"
MAX_WORD_CHARS = 200  # the original's max_input_chars_per_word: longer words become [UNK]


def is_bert_whitespace(char: str) -> bool:
    """BERT's `_is_whitespace`; `str.split` also splits on the other `isspace` characters."""
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def is_bert_control(char: str) -> bool:
    """BERT's `_is_control`: Cc/Cf except tab, newline and carriage return."""
    return char not in "\t\n\r" and unicodedata.category(char) in ("Cc", "Cf")


def is_bert_punctuation(char: str) -> bool:
    """BERT's `_is_punctuation`: every non-alphanumeric ASCII symbol, and Unicode P*."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


# BERT's `_is_chinese_char` blocks (CJK ideographs; not Hangul, Kana or Latin).
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def is_cjk_character(char: str) -> bool:
    cp = ord(char)
    return any(low <= cp <= high for low, high in CJK_RANGES)


def bert_normalize(text: str, lower: bool) -> str:
    """BERT's `_clean_text`, then (if `lower`) lowercase, NFD and accents (Mn) dropped."""
    text = "".join(
        " " if is_bert_whitespace(c) else c for c in text if not (c == "\x00" or c == "\ufffd" or is_bert_control(c))
    )
    if lower:
        text = unicodedata.normalize("NFD", text.lower())
        text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    return text


def bert_basic_tokenize(text: str, lower: bool) -> List[str]:
    """BERT's `BasicTokenizer`: normalise, split on whitespace, punctuation and CJK characters."""
    words = []
    for token in bert_normalize(text, lower).split():
        current = []
        for char in token:
            if is_bert_punctuation(char) or is_cjk_character(char):
                if current:
                    words.append("".join(current))
                    current = []
                words.append(char)
            else:
                current.append(char)
        if current:
            words.append("".join(current))
    return words


class WordPieceTokenizer(Tokenizer):
    """Text → ids with a BERT `vocab.txt`, as the original's `FullTokenizer` without spm.

    Basic tokenization (control characters dropped, whitespace split,
    lowercasing with NFD accent stripping when `do_lower_case`, punctuation and
    CJK characters split off), then greedy longest-match WordPiece with `##`
    continuations; a word with no match, or longer than 200 characters, is
    `[UNK]`. Special ids come from the vocabulary.

    Args:
        vocab_file: a `vocab.txt`, one token per line (line number = id).
        do_lower_case: lowercase and strip accents (False for cased and
            Korean vocabularies: NFD would split Hangul into jamo).
        vocab_bytes: the file's bytes instead of `vocab_file`.

    Raises:
        TokenizerError: the file is not UTF-8 text or lacks one of `[PAD]`,
            `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`; the message names the file.

    Example:

    >>> vocab = "[PAD]\\n[UNK]\\n[CLS]\\n[SEP]\\n[MASK]\\n阿\\n尔\\nal\\n##bert\\n!\\n".encode()
    >>> tok = WordPieceTokenizer(vocab_bytes=vocab)
    >>> tok.tokenize("ALBERT阿尔! Älbert xyz")
    ['al', '##bert', '阿', '尔', '!', 'al', '##bert', '[UNK]']
    >>> tok.encode("albert!"), tok.cls_id, tok.mask_id
    ([7, 8, 9], 2, 4)
    """

    kind = "wordpiece"
    asset_name = "vocab.txt"

    def __init__(
        self, vocab_file: Optional[str] = None, do_lower_case: bool = True, vocab_bytes: Optional[bytes] = None
    ):
        if (vocab_file is None) == (vocab_bytes is None):
            raise ValueError("Pass exactly one of vocab_file and vocab_bytes.")
        if vocab_bytes is None:
            vocab_bytes = read_bytes(vocab_file)
        self.model_file = vocab_file or "<vocab_bytes>"
        self.model_proto = vocab_bytes  # the file's bytes, shipped as the spm tokenizer's model
        self.do_lower_case = do_lower_case
        try:
            lines = vocab_bytes.decode("utf-8").split("\n")
        except UnicodeDecodeError as error:
            raise TokenizerError(f"{self.model_file}: not a UTF-8 vocab.txt (byte {error.start})") from None
        if lines and lines[-1] == "":
            lines.pop()
        self._tokens = [line.strip() for line in lines]
        self.vocab = {}
        for index, token in enumerate(self._tokens):
            self.vocab[token] = index  # a repeated token keeps its last id, as BERT's load_vocab
        missing = [t for t in WORDPIECE_SPECIALS if t not in self.vocab]
        if missing:
            raise TokenizerError(
                f"{self.model_file}: not a WordPiece vocab.txt for ALBERT: missing "
                f"{', '.join(missing)} (one token per line; build one with "
                "`python -m data_prep.build_wordpiece_vocab`)"
            )
        self.vocab_size = len(self._tokens)
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (self.vocab[t] for t in WORDPIECE_SPECIALS)

    def is_word_start(self, piece: str) -> bool:
        return is_start_wordpiece(piece)

    def preprocess(self, text: str) -> str:
        return bert_normalize(text, self.do_lower_case)

    def _wordpieces(self, word: str) -> List[str]:
        if len(word) > MAX_WORD_CHARS:
            return ["[UNK]"]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else WORDPIECE_CONTINUATION + word[start:end]
                if piece in self.vocab:
                    break
                end -= 1
            if end == start:
                return ["[UNK]"]
            pieces.append(piece)
            start = end
        return pieces

    def tokenize(self, text: str) -> List[str]:
        if len(text) > MAX_SEGMENTED_CHARS:  # CJK: ~100 bytes per character (each is a word)
            raise TokenizerError(too_long_to_segment(len(text)))
        return [p for word in bert_basic_tokenize(text, self.do_lower_case) for p in self._wordpieces(word)]

    def encode(self, text: str, max_ids: Optional[int] = None) -> List[int]:
        """Ids of `text`; with `max_ids`, its first `max_ids` from bounded work (see `word_prefix`)."""
        if max_ids is not None:
            prefix = word_prefix(text, max_ids)
            if prefix is not None:
                ids = self.convert_tokens_to_ids(self.tokenize(prefix))
                if len(ids) >= max_ids:
                    return ids[:max_ids]
            return self.convert_tokens_to_ids(self.tokenize(text))[:max_ids]
        return self.convert_tokens_to_ids(self.tokenize(text))

    def convert_tokens_to_ids(self, pieces: Sequence[str]) -> List[int]:
        return [self.vocab.get(p, self.unk_id) for p in pieces]

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> List[str]:
        return [self._tokens[int(i)] for i in ids]

    def pieces(self) -> List[str]:
        return list(self._tokens)

    @staticmethod
    def pieces_to_text(pieces: Sequence[str]) -> str:
        return " ".join(pieces).replace(" " + WORDPIECE_CONTINUATION, "").strip()


def load_tokenizer(spm_model_file: Optional[str] = None, vocab_file: Optional[str] = None, do_lower_case: bool = True):
    """The tokenizer of exactly one of a SentencePiece model and a WordPiece `vocab.txt`."""
    if (spm_model_file is None) == (vocab_file is None):
        given = "both" if spm_model_file else "neither"
        raise TokenizerError(
            f"give exactly one of --spm_model_file (SentencePiece) and --vocab_file (WordPiece vocab.txt); got {given}"
        )
    flag, path = ("--vocab_file", vocab_file) if vocab_file is not None else ("--spm_model_file", spm_model_file)
    try:
        if vocab_file is not None:
            return WordPieceTokenizer(vocab_file, do_lower_case=do_lower_case)
        return SentencePieceTokenizer(spm_model_file, do_lower_case=do_lower_case)
    except OSError as error:
        raise TokenizerError(f"{flag} {path}: cannot be read ({error.strerror or error})") from None


def tokenizer_from_bytes(kind: str, data: bytes, do_lower_case: bool = True):
    """Rebuilds a tokenizer from its `kind` and `model_proto` (Beam workers, SavedModel assets)."""
    if kind == WordPieceTokenizer.kind:
        return WordPieceTokenizer(vocab_bytes=data, do_lower_case=do_lower_case)
    return SentencePieceTokenizer(model_proto=data, do_lower_case=do_lower_case)


TOKENIZER_KINDS = {SentencePieceTokenizer.kind: SentencePieceTokenizer, WordPieceTokenizer.kind: WordPieceTokenizer}


def _vocabulary_in(directory: str) -> Optional[tuple]:
    """(kind, path) of the vocabulary file in `directory`: spm.model, Google's one *.model, or vocab.txt."""
    spm_model = os.path.join(directory, SentencePieceTokenizer.asset_name)
    if os.path.isfile(spm_model):
        return SentencePieceTokenizer.kind, spm_model
    models = sorted(n for n in os.listdir(directory) if n.endswith(".model"))
    if len(models) == 1:
        return SentencePieceTokenizer.kind, os.path.join(directory, models[0])
    vocab = os.path.join(directory, WordPieceTokenizer.asset_name)
    if os.path.isfile(vocab):
        return WordPieceTokenizer.kind, vocab
    return None


def load_tokenizer_dir(directory: str, do_lower_case: Optional[bool] = None) -> Optional[Tokenizer]:
    """The tokenizer saved in a model directory (None when it holds no vocabulary).

    `tokenizer.json` gives the kind and `do_lower_case`; a directory without
    it (Google's archives, older runs) uses its vocabulary file with
    `do_lower_case` True, as the released models. `do_lower_case` overrides.

    Raises:
        TokenizerError: an unreadable `tokenizer.json` or vocabulary file.
    """
    if not os.path.isdir(directory):
        return None
    settings_file = os.path.join(directory, TOKENIZER_FILE)
    saved = {}
    if os.path.isfile(settings_file):
        try:
            with open(settings_file, encoding="utf-8") as f:
                saved = json.load(f)
        except (OSError, ValueError) as error:
            raise TokenizerError(f"{settings_file}: not readable JSON ({error})") from None
        if not isinstance(saved, dict):
            raise TokenizerError(f"{settings_file}: expected a JSON object, got {type(saved).__name__}")
        if not isinstance(saved.get("kind"), str) or saved["kind"] not in TOKENIZER_KINDS:
            raise TokenizerError(
                f"{settings_file}: field 'kind': expected one of {sorted(TOKENIZER_KINDS)}, got {saved.get('kind')!r}"
            )
        name = saved.get("vocabulary") or TOKENIZER_KINDS[saved["kind"]].asset_name
        found = (saved["kind"], path_inside(directory, name, f"{settings_file}: field 'vocabulary'"))
    else:
        found = _vocabulary_in(directory)
        if found is None:
            return None
    kind, path = found
    lower = do_lower_case if do_lower_case is not None else saved.get("do_lower_case", True)
    try:
        tokenizer = TOKENIZER_KINDS[kind](path, do_lower_case=lower)
    except OSError as error:
        raise TokenizerError(f"{path}: cannot be read ({error.strerror or error})") from None
    recorded = saved.get("vocab_sha256")
    if recorded is not None and recorded != tokenizer.model_sha256:
        raise TokenizerError(
            f"{path}: not the vocabulary this model was saved with ({settings_file} records vocab_sha256 "
            f"{str(recorded)[:12]}…, the file has {tokenizer.model_sha256[:12]}…); restore the model's own file"
        )
    return tokenizer


def resolve_tokenizer(
    spm_model_file: Optional[str] = None,
    vocab_file: Optional[str] = None,
    do_lower_case: Optional[bool] = None,
    model_dir: Optional[str] = None,
    required: bool = True,
) -> Optional[Tokenizer]:
    """The one place a command picks its tokenizer.

    A vocabulary given by flag wins (`do_lower_case` default True); otherwise
    the one saved with the model in `model_dir` (its own `do_lower_case`
    unless the flag is given).

    Raises:
        TokenizerError: both files given, or none found when `required`.
    """
    if spm_model_file or vocab_file:
        return load_tokenizer(spm_model_file, vocab_file, True if do_lower_case is None else do_lower_case)
    tokenizer = load_tokenizer_dir(model_dir, do_lower_case) if model_dir else None
    if tokenizer is None and required:
        where = f" and {model_dir} holds none" if model_dir else ""
        raise TokenizerError(f"no vocabulary: give --spm_model_file or --vocab_file{where}")
    return tokenizer


def check_vocab_size(vocab_size: int, tokenizer: Optional[Tokenizer], where: str) -> None:
    """The config's `vocab_size` must be the tokenizer's (ids beyond the table would crash or mislead)."""
    if tokenizer is not None and tokenizer.vocab_size != vocab_size:
        raise TokenizerError(
            f"{where}: the config's vocab_size is {vocab_size} but {tokenizer.model_file} has "
            f"{tokenizer.vocab_size} pieces"
        )
