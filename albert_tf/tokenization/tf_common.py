"""What the tf-text twins share: RE2 character classes generated from Python's `unicodedata`, request bounds.

Used only by the twins (which import TensorFlow), never by `albert_tf.tokenization` itself.
"""

import sys

from albert_tf.tokenization.base import MAX_SEGMENTED_CHARS


def re2_class(predicate) -> str:
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


TOO_MUCH_TEXT = (
    f"the texts of the request (text_a, or text_b) have more than {MAX_SEGMENTED_CHARS:,} "
    "characters to segment in all (only text up to the max_seq_length-th space-separated word of each is "
    "segmented: some have too few spaces); the limit bounds the memory of the server: send fewer or "
    "shorter texts"
)
