"""ALBERT's tokenizers (pure Python): one module per kind, behind one registry.

- `base`: the `Tokenizer` interface, `TokenizerError`, `tokenizer.json`, bounded work;
- `text`: the original's `preprocess_text` and the foreign-run shortening;
- `sentencepiece`, `wordpiece`: the two kinds, each registering its `TokenizerKind`;
- `registry`: the kinds (asset name, flag, loaders, word-start rule, tf-text twin);
- `resolve`: a vocabulary from a flag, bytes or a model directory, once per command;
- `tf_sentencepiece`, `tf_wordpiece` (+ `tf_common`): the in-graph twins. Never
  imported here, so Beam workers stay free of TensorFlow: `registry.tf_tokenizer_for`
  imports one when asked.

Adding a kind: a module that defines its `Tokenizer` subclass and calls
`registry.register(TokenizerKind(...))`, plus its import below.

Example:

>>> preprocess_text("  Café   au LAIT ", lower=True)
'cafe au lait'
"""

from albert_tf.tokenization.base import (
    MAX_SEGMENTED_CHARS,
    TOKENIZER_FILE,
    Tokenizer,
    TokenizerError,
    read_bytes,
    tokenizer_json,
    too_long_to_segment,
    word_prefix,
)
from albert_tf.tokenization.registry import TokenizerKind, kind_named, kinds, register, tf_tokenizer_for
from albert_tf.tokenization.resolve import (
    check_vocab_size,
    load_tokenizer,
    load_tokenizer_dir,
    load_vocabulary,
    resolve_tokenizer,
    tokenizer_from_bytes,
    tokenizer_from_files,
    vocabulary_flags,
    vocabulary_in,
)
from albert_tf.tokenization.sentencepiece import (
    ALBERT_SPECIAL_IDS,
    ALBERT_USER_DEFINED_SYMBOLS,
    CLS_PIECE,
    MASK_PIECE,
    PAD_PIECE,
    SEP_PIECE,
    SPIECE_UNDERLINE,
    UNK_PIECE,
    SentencePieceTokenizer,
    encode_pieces,
    is_start_piece,
)
from albert_tf.tokenization.text import foreign_ranges, foreign_run_pattern, preprocess_text
from albert_tf.tokenization.wordpiece import (
    CJK_RANGES,
    MAX_WORD_CHARS,
    WORDPIECE_CONTINUATION,
    WORDPIECE_SPECIALS,
    WordPieceTokenizer,
    bert_basic_tokenize,
    bert_normalize,
    is_bert_control,
    is_bert_punctuation,
    is_bert_whitespace,
    is_cjk_character,
    is_start_wordpiece,
)

__all__ = [
    "ALBERT_SPECIAL_IDS",
    "ALBERT_USER_DEFINED_SYMBOLS",
    "CJK_RANGES",
    "CLS_PIECE",
    "MASK_PIECE",
    "MAX_SEGMENTED_CHARS",
    "MAX_WORD_CHARS",
    "PAD_PIECE",
    "SEP_PIECE",
    "SPIECE_UNDERLINE",
    "TOKENIZER_FILE",
    "UNK_PIECE",
    "WORDPIECE_CONTINUATION",
    "WORDPIECE_SPECIALS",
    "SentencePieceTokenizer",
    "Tokenizer",
    "TokenizerError",
    "TokenizerKind",
    "WordPieceTokenizer",
    "bert_basic_tokenize",
    "bert_normalize",
    "check_vocab_size",
    "encode_pieces",
    "foreign_ranges",
    "foreign_run_pattern",
    "is_bert_control",
    "is_bert_punctuation",
    "is_bert_whitespace",
    "is_cjk_character",
    "is_start_piece",
    "is_start_wordpiece",
    "kind_named",
    "kinds",
    "load_tokenizer",
    "load_tokenizer_dir",
    "load_vocabulary",
    "preprocess_text",
    "read_bytes",
    "register",
    "resolve_tokenizer",
    "vocabulary_flags",
    "tf_tokenizer_for",
    "tokenizer_from_bytes",
    "tokenizer_from_files",
    "tokenizer_json",
    "too_long_to_segment",
    "vocabulary_in",
    "word_prefix",
]
