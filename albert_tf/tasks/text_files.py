"""Reading task files: invalid UTF-8 replaced by U+FFFD, counted, and reported with its file and line.

As Python's `bytes.decode(errors="replace")`, and as data_prep and serving do.
"""

import codecs
import logging
import re
from typing import Iterable, Iterator, Optional, Tuple

REPLACEMENT = "\ufffd"
# What `errors="surrogateescape"` turns each undecodable byte into.
_ESCAPED = re.compile("[\udc80-\udcff]")


# The byte-order marks of Unicode's other encodings; UTF-32's first, as its little-endian mark starts with UTF-16's.
_OTHER_MARKS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def not_utf8(path: str) -> Optional[str]:
    """Why `path` is not UTF-8 but UTF-16 or UTF-32 text (its byte-order mark, or NUL bytes), and what to do; or None.

    Read as UTF-8, such a file gives garbled column names and labels. UTF-8's own mark is UTF-8.
    """
    with open(path, "rb") as f:
        head = f.read(4096)
    name = next((name for mark, name in _OTHER_MARKS if head.startswith(mark)), None)
    if name:
        return f"{name} text (its byte-order mark says so), not UTF-8: convert it (iconv -f {name} -t UTF-8)"
    if b"\x00" in head:  # UTF-8 text never holds NUL; UTF-16/32 text without a mark always does
        return "NUL bytes: UTF-16 or UTF-32 text without a byte-order mark (or not text), not UTF-8: save it as UTF-8"
    return None


def decode_replacing(raw: bytes, path: str, encoding: str = "utf-8") -> Tuple[str, int]:
    """(text, replaced): `raw` decoded with invalid byte sequences replaced by U+FFFD, and how many."""
    try:
        return raw.decode(encoding), 0
    except UnicodeDecodeError as error:
        text = raw.decode(encoding, errors="replace")
        replaced = text.count(REPLACEMENT) - raw.count(REPLACEMENT.encode("utf-8"))
        line = raw.count(b"\n", 0, error.start) + 1
        logging.warning(
            "%s:%d: invalid UTF-8; %d byte sequence(s) in the file replaced by U+FFFD", path, line, replaced
        )
        return text, replaced


class ReplacedLines:
    """Lines of a file opened with `errors="surrogateescape"`, invalid UTF-8 replaced and counted.

    Iterating yields the lines as `bytes.decode(errors="replace")` would give
    them; `replaced` counts the U+FFFD substitutions and `first_line` is the
    1-based line of the first one.
    """

    def __init__(self, lines: Iterable[str], path: str):
        self._lines, self.path = lines, path
        self.replaced, self.first_line = 0, None

    def __iter__(self) -> Iterator[str]:
        for number, line in enumerate(self._lines, start=1):
            if _ESCAPED.search(line):
                fixed = line.encode("utf-8", "surrogateescape").decode("utf-8", errors="replace")
                self.replaced += fixed.count(REPLACEMENT) - line.count(REPLACEMENT)
                if self.first_line is None:
                    self.first_line = number
                    logging.warning("%s:%d: invalid UTF-8 replaced by U+FFFD", self.path, number)
                line = fixed
            yield line
