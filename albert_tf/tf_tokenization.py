"""In-graph twins of `albert_tf.tokenization` for tf.data and serving (tf-text).

The same steps as the Python tokenizer, as TensorFlow ops, so a SavedModel can
take text: Python's whitespace set collapsed, NFKD, combining marks dropped
(the character classes are generated from Python's own `unicodedata`, so both
sides agree on what a space or a combining mark is), lowercase, SentencePiece,
and the digit-comma re-split. Tests check identical ids on real text.

Example:

>>> import os, tempfile
>>> from data_prep.train_sentencepiece import train_sentencepiece
>>> prefix = os.path.join(tempfile.mkdtemp(), "toy")
>>> lines = ["the quick brown fox jumps over the lazy dog %d" % i for i in range(300)]
>>> model_file = train_sentencepiece(lines, prefix, vocab_size=60)
>>> tok = TFSentencePieceTokenizer(open(model_file, "rb").read())
>>> ids = tok(tf.constant(["The  quick fox", "Lazy dog"]))
>>> ids.shape.rank, int(ids.nrows())
(2, 2)
"""

import functools
import sys
import unicodedata
from typing import Optional

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf import tokenization
from albert_tf.tokenization import SPIECE_UNDERLINE


def _re2_class(predicate) -> str:
    """An RE2 character class of every code point where `predicate(chr(cp))` holds."""
    ranges, start, previous = [], None, None
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:  # surrogates never occur in valid UTF-8
            continue
        if predicate(chr(cp)):
            if start is None:
                start = cp
            previous = cp
        elif start is not None:
            ranges.append((start, previous))
            start = None
    if start is not None:
        ranges.append((start, previous))
    body = "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges)
    return f"[{body}]"


@functools.lru_cache(maxsize=None)
def _character_classes():
    return {
        "space": _re2_class(str.isspace),
        "combining": _re2_class(unicodedata.combining),
        "digit": _re2_class(str.isdigit),
    }


@functools.lru_cache(maxsize=None)
def _bert_character_classes():
    removed = _re2_class(lambda c: c in "\x00\ufffd" or tokenization.is_bert_control(c))
    # After the controls are gone, every character `str.split` splits on is a space.
    space = _re2_class(lambda c: tokenization.is_bert_whitespace(c) or c.isspace())
    split_off = _re2_class(lambda c: tokenization.is_bert_punctuation(c) or tokenization.is_cjk_character(c))
    return {
        "removed": removed,
        "space": space,
        "split_off": split_off,
        "accent": _re2_class(lambda c: unicodedata.category(c) == "Mn"),
    }


def _foreign_run_pattern(model_proto):
    """The RE2 twin of `SentencePieceTokenizer.shorten_foreign_runs`' pattern (None: not applicable)."""
    import sentencepiece as spm  # only to read a model proto given as bytes

    if isinstance(model_proto, tf.Tensor):
        if not hasattr(model_proto, "numpy"):
            return None  # a symbolic proto: the vocabulary is unknown here
        model_proto = model_proto.numpy()
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(model_proto)
    size = sp.get_piece_size()
    if any(sp.is_byte(i) for i in range(size)):
        return None  # byte fallback: unknown characters are not merged into one <unk>
    chars = frozenset("".join(sp.id_to_piece(i) for i in range(size)))
    return tokenization.foreign_run_pattern(chars, escape=lambda cp: f"\\x{{{cp:X}}}")


class TFSentencePieceTokenizer(tf.Module):
    """Strings → ALBERT ids (a RaggedTensor), all in-graph.

    Args:
        model_proto: the SentencePiece model's bytes (as a Python `bytes` or a
            scalar string tensor, e.g. read from a SavedModel asset).
        do_lower_case: lowercase, as the Python tokenizer.
    """

    def __init__(self, model_proto, do_lower_case: bool = True, name=None):
        super().__init__(name=name)
        self.do_lower_case = do_lower_case
        self._sp = tf_text.SentencepieceTokenizer(model=model_proto, out_type=tf.string)
        self._foreign_run = _foreign_run_pattern(model_proto)
        classes = _character_classes()
        self._space_run = classes["space"] + "+"
        self._combining = classes["combining"]
        self._digit_comma = "(?s).*" + classes["digit"] + ","

    def preprocess(self, texts: tf.Tensor) -> tf.Tensor:
        """`preprocess_text` on a string tensor of any shape."""
        texts = tf.strings.regex_replace(texts, self._space_run, " ")
        texts = tf.strings.regex_replace(texts, "^ | $", "")
        texts = tf_text.normalize_utf8(texts, "NFKD")
        texts = tf.strings.regex_replace(texts, self._combining, "")
        if self.do_lower_case:
            texts = tf.strings.lower(texts, encoding="utf-8")
        return texts

    def tokenize_pieces(self, texts: tf.Tensor, max_total_chars: Optional[int] = None) -> tf.RaggedTensor:
        """Pieces of a 1-D batch of texts: [batch, (pieces)].

        Each text may hand SentencePiece at most `tokenization.MAX_SEGMENTED_CHARS`
        characters, and all together at most `max_total_chars` (a serving request's
        bound); more is an `InvalidArgument`.
        """
        if self._foreign_run is not None:  # the same ids, less work (see tokenization.foreign_run_pattern)
            texts = tf.strings.regex_replace(texts, self._foreign_run, r"\1")
        texts = self.preprocess(texts)
        if self._foreign_run is not None:  # runs that lowercasing or NFKD made foreign
            texts = tf.strings.regex_replace(texts, self._foreign_run, r"\1")
        # Bounded memory (InvalidArgument), as the Python tokenizer's TokenizerError.
        lengths = tf.strings.length(texts, unit="UTF8_CHAR")
        limits = [tf.debugging.assert_less_equal(lengths, tokenization.MAX_SEGMENTED_CHARS, message=TOO_LONG_TEXT)]
        if max_total_chars is not None:
            limits.append(
                tf.debugging.assert_less_equal(tf.reduce_sum(lengths), max_total_chars, message=TOO_MUCH_TEXT)
            )
        with tf.control_dependencies(limits):
            texts = tf.identity(texts)
        pieces = self._sp.tokenize(texts)
        flat = pieces.flat_values
        needs_split = tf.strings.regex_full_match(flat, self._digit_comma)
        # Re-encode `▁3,000,` as "3,000" (no ▁) and append "," (see encode_pieces).
        to_split = tf.boolean_mask(flat, needs_split)
        without_comma = tf.strings.regex_replace(to_split, ",$", "")
        reencoded = self._sp.tokenize(tf.strings.regex_replace(without_comma, SPIECE_UNDERLINE, ""))
        commas = tf.RaggedTensor.from_tensor(tf.fill([tf.size(to_split), 1], ","))
        split_rows = tf.concat([reencoded, commas], axis=1)
        kept_rows = tf.RaggedTensor.from_tensor(tf.expand_dims(tf.boolean_mask(flat, ~needs_split), 1))
        rows = tf.concat([kept_rows, split_rows], axis=0)
        kept_rank = tf.cumsum(tf.cast(~needs_split, tf.int64)) - 1
        split_rank = tf.cumsum(tf.cast(needs_split, tf.int64)) - 1 + tf.shape(kept_rows, out_type=tf.int64)[0]
        order = tf.where(needs_split, split_rank, kept_rank)
        return pieces.with_flat_values(tf.gather(rows, order)).merge_dims(-2, -1)

    def __call__(
        self, texts: tf.Tensor, max_ids: Optional[int] = None, max_total_chars: Optional[int] = None
    ) -> tf.RaggedTensor:
        """Ids of a 1-D batch of texts: int32 [batch, (ids)], no [CLS]/[SEP].

        With `max_ids`, each row's first `max_ids` ids only, tokenising each text
        up to its `max_ids`-th word (exact: see `tokenization.word_prefix`); a row
        whose prefix yields fewer ids than that is tokenised whole. `max_total_chars`:
        see `tokenize_pieces`.
        """
        if max_ids is None or max_ids > MAX_REGEX_REPEAT:
            ids = self._sp.string_to_id(self.tokenize_pieces(texts, max_total_chars))
            return ids if max_ids is None else ids[:, :max_ids]
        space = _character_classes()["space"]
        pattern = f"(?s)^({space}*(?:[^{space[1:]}+{space}+){{{max_ids - 1}}}[^{space[1:]}+){space}*[^{space[1:]}.*"
        prefixes = tf.strings.regex_replace(texts, pattern, r"\1")
        ids = self._sp.string_to_id(self.tokenize_pieces(prefixes, max_total_chars))
        short = (tf.strings.length(prefixes) < tf.strings.length(texts)) & (ids.row_lengths() < max_ids)
        ids = tf.cond(
            tf.reduce_any(short),
            lambda: self._sp.string_to_id(self.tokenize_pieces(tf.where(short, texts, prefixes), max_total_chars)),
            lambda: ids,
        )
        return ids[:, :max_ids]


TOO_LONG_TEXT = (
    f"a text has more than {tokenization.MAX_SEGMENTED_CHARS:,} characters to segment at once (only text up "
    "to its max_seq_length-th space-separated word is segmented: it has too few spaces); the limit bounds "
    "memory: split or shorten it"
)
TOO_MUCH_TEXT = (
    f"the texts of the request (text_a, or text_b) have more than {tokenization.MAX_SEGMENTED_CHARS:,} "
    "characters to segment in all (only text up to the max_seq_length-th space-separated word of each is "
    "segmented: some have too few spaces); the limit bounds the memory of the server: send fewer or "
    "shorter texts"
)

# RE2's largest counted repetition: a longer budget tokenises whole texts.
MAX_REGEX_REPEAT = 1000


class TFWordPieceTokenizer(tf.Module):
    """Strings → ids with a WordPiece vocabulary, in-graph: the twin of `WordPieceTokenizer`.

    Normalisation with character classes generated from Python's
    `unicodedata` (so both sides agree), splitting with `tf_text.regex_split`,
    and tf-text's `FastWordpieceTokenizer` (greedy longest match, TFLite-ready).

    Args:
        vocab: the tokens in id order (`WordPieceTokenizer.pieces()`).
        do_lower_case: lowercase and strip accents, as the Python tokenizer.

    Example:

    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "阿", "尔", "al", "##bert", "!"]
    >>> tok = TFWordPieceTokenizer(vocab)
    >>> tok(tf.constant(["ALBERT阿尔! Älbert xyz", ""])).to_list()
    [[7, 8, 5, 6, 9, 7, 8, 1], []]
    """

    def __init__(self, vocab, do_lower_case: bool = True, name=None):
        super().__init__(name=name)
        self.do_lower_case = do_lower_case
        self._classes = _bert_character_classes()
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=list(vocab),
            suffix_indicator=tokenization.WORDPIECE_CONTINUATION,
            max_bytes_per_word=4 * tokenization.MAX_WORD_CHARS + 4,
            token_out_type=tf.int32,
            unknown_token="[UNK]",
            no_pretokenization=True,
        )

    def preprocess(self, texts: tf.Tensor) -> tf.Tensor:
        """`bert_normalize` on a string tensor of any shape."""
        texts = tf.strings.regex_replace(texts, self._classes["removed"], "")
        texts = tf.strings.regex_replace(texts, self._classes["space"], " ")
        if self.do_lower_case:
            texts = tf_text.normalize_utf8(tf.strings.lower(texts, encoding="utf-8"), "NFD")
            texts = tf.strings.regex_replace(texts, self._classes["accent"], "")
        return texts

    def words(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Basic tokens of a 1-D batch: [batch, (words)]; words over 200 characters become `[UNK]`."""
        split_off = self._classes["split_off"]
        words = tf_text.regex_split(self.preprocess(texts), f"( +|{split_off})", split_off)
        too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > tokenization.MAX_WORD_CHARS
        return words.with_flat_values(tf.where(too_long, "[UNK]", words.flat_values))

    def __call__(
        self, texts: tf.Tensor, max_ids: Optional[int] = None, max_total_chars: Optional[int] = None
    ) -> tf.RaggedTensor:
        """Ids of a 1-D batch of texts: int32 [batch, (ids)], no [CLS]/[SEP] (`max_ids`: the first only).

        More than `max_total_chars` characters in all is an `InvalidArgument` (a serving request's bound).

        WordPiece's work is linear in the text (words over 200 characters are
        `[UNK]` before any matching), so there is no budget before tokenising.
        """
        if max_total_chars is not None:
            within_limit = tf.debugging.assert_less_equal(
                tf.reduce_sum(tf.strings.length(texts, unit="UTF8_CHAR")), max_total_chars, message=TOO_MUCH_TEXT
            )
            with tf.control_dependencies([within_limit]):
                texts = tf.identity(texts)
        words = self.words(texts)
        pieces = self._wordpiece.tokenize(words.flat_values)
        ids = words.with_flat_values(pieces).merge_dims(1, 2)
        return ids if max_ids is None else ids[:, :max_ids]


def tf_tokenizer_for(python_tokenizer) -> tf.Module:
    """The in-graph twin of a `SentencePieceTokenizer` or `WordPieceTokenizer`."""
    if python_tokenizer.kind == tokenization.WordPieceTokenizer.kind:
        return TFWordPieceTokenizer(python_tokenizer.pieces(), do_lower_case=python_tokenizer.do_lower_case)
    return TFSentencePieceTokenizer(python_tokenizer.model_proto, do_lower_case=python_tokenizer.do_lower_case)
