"""In-graph twin of `albert_tf.tokenization` for tf.data and serving (tf-text).

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

import tensorflow as tf
import tensorflow_text as tf_text

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

    def tokenize_pieces(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Pieces of a 1-D batch of texts: [batch, (pieces)]."""
        pieces = self._sp.tokenize(self.preprocess(texts))
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

    def __call__(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Ids of a 1-D batch of texts: int32 [batch, (ids)], no [CLS]/[SEP]."""
        return self._sp.string_to_id(self.tokenize_pieces(texts))
