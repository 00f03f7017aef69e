"""The tokenizer kinds: each declared once, in one `TokenizerKind`, by the module that implements it.

Everything that differs by kind is looked up here (by the kind's name, as
`tokenizer.json` and `metadata.json` record it), never switched on: which
file a model directory holds, which flag names it, how to build the
tokenizer from a path or from bytes (Beam workers, SavedModel assets), the
whole-word masking rule, and the in-graph tf-text twin. The twin is a dotted
path imported only when asked for, so this module (and everything Beam
workers import) stays free of TensorFlow.

Example:

>>> import albert_tf.tokenization  # registers the built-in kinds
>>> [(k.name, k.asset_name, k.flag) for k in kinds()]
[('sentencepiece', 'spm.model', 'spm_model_file'), ('wordpiece', 'vocab.txt', 'vocab_file')]
"""

import dataclasses
import importlib
from typing import Callable, Dict, List, Tuple

from albert_tf.errors import AlbertError


@dataclasses.dataclass(frozen=True)
class TokenizerKind:
    """One tokenizer kind.

    Attributes:
        name: the kind's name (the tokenizer class's `kind`, `tokenizer.json`'s "kind").
        asset_name: the vocabulary's file name in a model directory we write.
        flag: the command-line flag naming a vocabulary file of this kind (no dashes).
        description: what the file is, for messages ("SentencePiece model").
        from_file: (path, do_lower_case) -> Tokenizer.
        from_bytes: (the file's bytes, do_lower_case) -> Tokenizer.
        is_word_start: piece -> whether it starts a word (whole-word masking).
        tf_twin: dotted path of a function tokenizer -> its in-graph tf-text twin.
        asset_patterns: other names (globs) this kind's file has in directories we did not write,
            used when exactly one file matches.
    """

    name: str
    asset_name: str
    flag: str
    description: str
    from_file: Callable
    from_bytes: Callable
    is_word_start: Callable[[str], bool]
    tf_twin: str
    asset_patterns: Tuple[str, ...] = ()


class UnknownTokenizerKind(AlbertError, ValueError):
    """A kind name no module registered."""


_KINDS: Dict[str, TokenizerKind] = {}


def register(kind: TokenizerKind) -> TokenizerKind:
    """Adds `kind` (a module-level call in the kind's own module); returns it."""
    if kind.name in _KINDS and _KINDS[kind.name] != kind:
        raise ValueError(f"tokenizer kind {kind.name!r} is already registered")
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Removes a kind (tests that register a toy one)."""
    _KINDS.pop(name, None)


def kinds() -> List[TokenizerKind]:
    """Every registered kind, in registration order (the order a model directory is searched in)."""
    return list(_KINDS.values())


def kind_names() -> List[str]:
    return sorted(_KINDS)


def kind_named(name: str) -> TokenizerKind:
    try:
        return _KINDS[name]
    except KeyError:
        raise UnknownTokenizerKind(f"unknown tokenizer kind {name!r}; known: {', '.join(kind_names())}") from None


def tf_tokenizer_for(tokenizer):
    """The in-graph (tf-text) twin of `tokenizer`, for tf.data and the SavedModel's text signatures.

    Imports TensorFlow (the twin's module) only now.
    """
    module, _, function = kind_named(tokenizer.kind).tf_twin.rpartition(".")
    return getattr(importlib.import_module(module), function)(tokenizer)
