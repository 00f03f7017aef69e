"""Text normalisation shared by the tokenizers: the original's `preprocess_text` and foreign-run shortening.

Example:

>>> preprocess_text("  Café   au LAIT ", lower=True)
'cafe au lait'
"""

import functools
import re
import sys
import unicodedata
from typing import FrozenSet, List, Tuple


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


def foreign_eligible(char: str) -> bool:
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
    """Code point ranges of `foreign_eligible` characters."""
    ranges, start = [], None
    for cp in range(sys.maxunicode + 1):
        eligible = not 0xD800 <= cp <= 0xDFFF and foreign_eligible(chr(cp))
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
