"""The in-graph twin of `WordPieceTokenizer` for tf.data and serving (tf-text).

Imported only through `registry.tf_tokenizer_for` (or directly): never by the
package's `__init__`, so Beam workers stay free of TensorFlow.
"""

import functools
import unicodedata
from typing import Optional

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.tokenization.tf_common import TOO_MUCH_TEXT, re2_class
from albert_tf.tokenization.wordpiece import (
    MAX_WORD_CHARS,
    WORDPIECE_CONTINUATION,
    is_bert_control,
    is_bert_punctuation,
    is_bert_whitespace,
    is_cjk_character,
)


@functools.lru_cache(maxsize=None)
def _bert_character_classes():
    removed = re2_class(lambda c: c in "\x00\ufffd" or is_bert_control(c))
    # After the controls are gone, every character `str.split` splits on is a space.
    space = re2_class(lambda c: is_bert_whitespace(c) or c.isspace())
    split_off = re2_class(lambda c: is_bert_punctuation(c) or is_cjk_character(c))
    return {
        "removed": removed,
        "space": space,
        "split_off": split_off,
        "accent": re2_class(lambda c: unicodedata.category(c) == "Mn"),
    }


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
            suffix_indicator=WORDPIECE_CONTINUATION,
            max_bytes_per_word=4 * MAX_WORD_CHARS + 4,
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
        too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > MAX_WORD_CHARS
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


def twin_of(tokenizer) -> TFWordPieceTokenizer:
    """The registry's `tf_twin` of the WordPiece kind."""
    return TFWordPieceTokenizer(tokenizer.pieces(), do_lower_case=tokenizer.do_lower_case)
