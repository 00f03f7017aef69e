"""The WordPiece kind: BERT's `vocab.txt` (Google's Chinese ALBERT models, custom vocabularies).

The original's `FullTokenizer` without spm: BERT's basic tokenizer, then greedy
longest-match WordPiece; every piece but a `##` continuation starts a word.
"""

import unicodedata
from typing import List, Optional, Sequence

from albert_tf.tokenization.base import (
    MAX_SEGMENTED_CHARS,
    Tokenizer,
    TokenizerError,
    file_or_bytes,
    too_long_to_segment,
    word_prefix,
)
from albert_tf.tokenization.registry import TokenizerKind, register

WORDPIECE_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
WORDPIECE_CONTINUATION = "##"
MAX_WORD_CHARS = 200  # the original's max_input_chars_per_word: longer words become [UNK]


def is_start_wordpiece(piece: str) -> bool:
    """BERT's rule for WordPiece vocabularies: every piece but a `##` continuation starts a word.

    >>> [is_start_wordpiece(p) for p in ["play", "##ing", "中", "[UNK]"]]
    [True, False, True, True]
    """
    return not piece.startswith("##")


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

    def __init__(
        self, vocab_file: Optional[str] = None, do_lower_case: bool = True, vocab_bytes: Optional[bytes] = None
    ):
        # The file's bytes are `model_proto`, shipped as the SentencePiece tokenizer's model is.
        self.model_file, self.model_proto = file_or_bytes(vocab_file, vocab_bytes, "vocab_file", "vocab_bytes")
        vocab_bytes = self.model_proto
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


WORDPIECE = register(
    TokenizerKind(
        name=WordPieceTokenizer.kind,
        asset_name="vocab.txt",
        flag="vocab_file",
        description="WordPiece vocab.txt",
        from_file=lambda path, do_lower_case: WordPieceTokenizer(path, do_lower_case=do_lower_case),
        from_bytes=lambda data, do_lower_case: WordPieceTokenizer(vocab_bytes=data, do_lower_case=do_lower_case),
        is_word_start=is_start_wordpiece,
        tf_twin="albert_tf.tokenization.tf_wordpiece.twin_of",
    )
)
