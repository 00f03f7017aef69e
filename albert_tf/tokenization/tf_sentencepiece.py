"""The in-graph twin of `SentencePieceTokenizer` for tf.data and serving (tf-text).

The same steps as the Python tokenizer, as TensorFlow ops, so a SavedModel can
take text: Python's whitespace set collapsed, NFKD, combining marks dropped
(the character classes are generated from Python's own `unicodedata`, so both
sides agree on what a space or a combining mark is), lowercase, SentencePiece,
and the digit-comma re-split. Tests check identical ids on real text.
Imported only through `registry.tf_tokenizer_for` (or directly): never by the
package's `__init__`, so Beam workers stay free of TensorFlow.

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
import unicodedata
from typing import Optional

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.tokenization.base import MAX_SEGMENTED_CHARS
from albert_tf.tokenization.sentencepiece import SPIECE_UNDERLINE
from albert_tf.tokenization.text import foreign_run_pattern
from albert_tf.tokenization.tf_common import TOO_MUCH_TEXT, re2_class


@functools.lru_cache(maxsize=None)
def _character_classes():
    return {
        "space": re2_class(str.isspace),
        "combining": re2_class(unicodedata.combining),
        "digit": re2_class(str.isdigit),
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
    return foreign_run_pattern(chars, escape=lambda cp: f"\\x{{{cp:X}}}")


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

        Each text may hand SentencePiece at most `MAX_SEGMENTED_CHARS`
        characters, and all together at most `max_total_chars` (a serving request's
        bound); more is an `InvalidArgument`.
        """
        if self._foreign_run is not None:  # the same ids, less work (see foreign_run_pattern)
            texts = tf.strings.regex_replace(texts, self._foreign_run, r"\1")
        texts = self.preprocess(texts)
        if self._foreign_run is not None:  # runs that lowercasing or NFKD made foreign
            texts = tf.strings.regex_replace(texts, self._foreign_run, r"\1")
        # Bounded memory (InvalidArgument), as the Python tokenizer's TokenizerError.
        lengths = tf.strings.length(texts, unit="UTF8_CHAR")
        limits = [tf.debugging.assert_less_equal(lengths, MAX_SEGMENTED_CHARS, message=TOO_LONG_TEXT)]
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
        up to its `max_ids`-th word (exact: see `base.word_prefix`); a row
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
    f"a text has more than {MAX_SEGMENTED_CHARS:,} characters to segment at once (only text up "
    "to its max_seq_length-th space-separated word is segmented: it has too few spaces); the limit bounds "
    "memory: split or shorten it"
)

# RE2's largest counted repetition: a longer budget tokenises whole texts.
MAX_REGEX_REPEAT = 1000


def twin_of(tokenizer) -> TFSentencePieceTokenizer:
    """The registry's `tf_twin` of the SentencePiece kind."""
    return TFSentencePieceTokenizer(tokenizer.model_proto, do_lower_case=tokenizer.do_lower_case)
