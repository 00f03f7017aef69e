"""Document readers: text files → documents (lists of sentences).

Formats:
  * `bert`: one sentence per line, a blank line between documents (the
    original `create_pretraining_data.py` input).
  * `jsonl`: one JSON object per line, its `text` field is one document,
    split into sentences.
  * `wikitext`: WikiText's layout: ` = Title = ` starts an article,
    ` = = Section = = ` lines are dropped, paragraphs are split into sentences
    and the `@-@`/`@,@`/`@.@` markers are undone. Its `<unk>` (a word outside
    WikiText's own vocabulary) is kept in the text and encoded as the
    tokenizer's unknown id (`encode_sentence`), not as the pieces `<`, `unk`, `>`;
    vocabularies are learnt without it (`vocabulary_text`).

Files are streamed line by line (never loaded whole). Bytes that are not UTF-8
are replaced with U+FFFD and counted per file in `ReadStats`. A sentence over
`MAX_SENTENCE_CHARS` characters (a minified blob, a run of emoji without
spaces: no instance uses more than 512 of its tokens anyway) is cut at its last
whitespace before that length, or at the length when it has none; cut sentences
and characters are counted per file (`cut_sentences`, `cut_chars`), so the
tokenizer's work per sentence stays bounded.

Example:

>>> import tempfile
>>> path = tempfile.mktemp()
>>> _ = open(path, "w").write("One.\\nTwo.\\n\\nThree.\\n")
>>> [doc for doc in read_documents(path, "bert")]
[['One.', 'Two.'], ['Three.']]
"""

import dataclasses
import glob
import json
import os
import re
from typing import Iterator, List

from data_prep.errors import DataPrepError

FORMATS = ("bert", "jsonl", "wikitext")
MAX_SENTENCE_CHARS = 10_000  # ~4 characters a token: 2,500 tokens, 5× the longest max_seq_length

# A sentence ends at . ! or ? (optionally closed by a quote or bracket) before
# whitespace and an uppercase letter, digit, quote or bracket: good enough for
# SOP's "consecutive segments", and independent of any language model.
_SENTENCE_END = re.compile(r"(?<=[.!?])([\"')\]]?)\s+(?=[\"'(\[]?[A-Z0-9\u00C0-\u024F\u0370-\u03FF\u0400-\u04FF])")
_WIKITEXT_TITLE = re.compile(r"^ ?= [^=].* = ?$")
_WIKITEXT_HEADING = re.compile(r"^ ?(= )+.*( =)+ ?$")
_WIKITEXT_MARKERS = ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."))
WIKITEXT_UNKNOWN = "<unk>"  # WikiText's marker of a word outside its vocabulary


class InputFormatError(DataPrepError):
    """An input line that the chosen format cannot read (names file and line)."""


@dataclasses.dataclass
class ReadStats:
    """What reading one file found: counts and replaced bytes."""

    path: str
    documents: int = 0
    sentences: int = 0
    lines: int = 0
    replaced_bytes: int = 0  # U+FFFD substitutions for invalid UTF-8
    cut_sentences: int = 0  # sentences over MAX_SENTENCE_CHARS, cut
    cut_chars: int = 0  # characters dropped by those cuts


def cap_sentence(sentence: str, stats: ReadStats, limit: int = MAX_SENTENCE_CHARS) -> str:
    """`sentence` cut to at most `limit` characters at its last whitespace (counted in `stats`).

    >>> stats = ReadStats("x")
    >>> cap_sentence("aa bb cc", stats, limit=6), stats.cut_sentences, stats.cut_chars
    ('aa bb', 1, 3)
    """
    if len(sentence) <= limit:
        return sentence
    head = sentence[: limit + 1]  # a space right after the limit keeps the whole last word
    parts = head.rsplit(None, 1)
    cut = parts[0].rstrip() if len(parts) == 2 and parts[0].strip() else sentence[:limit]
    stats.cut_sentences += 1
    stats.cut_chars += len(sentence) - len(cut)
    return cut


def split_sentences(text: str) -> List[str]:
    """Splits running text into sentences at `. ! ?` + space + capital.

    >>> split_sentences("It rained. Then it snowed! Did it? yes.")
    ['It rained.', 'Then it snowed!', 'Did it? yes.']
    """
    text = " ".join(text.split())
    if not text:
        return []
    parts = _SENTENCE_END.split(text)
    # re.split returns [sentence, closing-quote, sentence, ...]
    sentences = []
    for i in range(0, len(parts), 2):
        sentence = parts[i] + (parts[i + 1] if i + 1 < len(parts) else "")
        if sentence.strip():
            sentences.append(sentence.strip())
    return sentences


def _decoded_lines(raw, stats: ReadStats) -> Iterator[str]:
    """UTF-8 lines of a binary stream; bad bytes become U+FFFD and are counted."""
    for line in raw:
        try:
            yield line.decode("utf-8")
        except UnicodeDecodeError:
            text = line.decode("utf-8", errors="replace")
            stats.replaced_bytes += text.count("\ufffd") - line.count("\ufffd".encode("utf-8"))
            yield text


def _open_binary(path: str):
    if "://" in path:
        from apache_beam.io.filesystems import FileSystems  # Beam only for remote paths

        return FileSystems.open(path)
    return open(path, "rb")


def read_documents(path: str, input_format: str, stats: ReadStats = None) -> Iterator[List[str]]:
    """Yields the documents of one file, each a list of sentences (raw text).

    Args:
        path: a local path or a Beam file-system URL.
        input_format: one of `FORMATS`.
        stats: filled in as the file is read (counts, replaced bytes).

    Raises:
        InputFormatError: a `jsonl` line that is not a JSON object with a
            string `text` field (the message names the file and line).
    """
    if input_format not in FORMATS:
        raise DataPrepError(f"input_format must be one of {FORMATS}, got {input_format!r}")
    stats = stats if stats is not None else ReadStats(path)
    reader = {"bert": _read_bert, "jsonl": _read_jsonl, "wikitext": _read_wikitext}[input_format]
    with _open_binary(path) as raw:
        for document in reader(path, _decoded_lines(raw, stats), stats):
            document = [cap_sentence(sentence, stats) for sentence in document]
            if document:
                stats.documents += 1
                stats.sentences += len(document)
                yield document


def _read_bert(path, lines, stats):
    document = []
    for line in lines:
        stats.lines += 1
        line = line.strip()
        if not line:
            yield document
            document = []
        else:
            document.append(line)
    yield document


def _read_jsonl(path, lines, stats):
    for line_number, line in enumerate(lines, start=1):
        stats.lines += 1
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputFormatError(f"{path}:{line_number}: not JSON ({error.msg})") from None
        text = record.get("text") if isinstance(record, dict) else None
        if not isinstance(text, str):
            raise InputFormatError(f"{path}:{line_number}: expected an object with a string field 'text'")
        yield [s for paragraph in text.splitlines() for s in split_sentences(paragraph)]


def is_wikitext_title(line: str) -> bool:
    """Whether a WikiText line is an article title (` = Title = `): where one article ends and the next starts.

    >>> is_wikitext_title(" = Valkyria Chronicles III = "), is_wikitext_title(" = = Gameplay = = ")
    (True, False)
    """
    return bool(_WIKITEXT_TITLE.match(line.rstrip("\n")))


def _undo_wikitext_markers(line: str) -> str:
    for marker, replacement in _WIKITEXT_MARKERS:
        line = line.replace(marker, replacement)
    return line


def _read_wikitext(path, lines, stats):
    document = []
    for line in lines:
        stats.lines += 1
        line = line.rstrip("\n")
        if is_wikitext_title(line):
            yield document
            document = []
        elif _WIKITEXT_HEADING.match(line) or not line.strip():
            continue
        else:
            document.extend(split_sentences(_undo_wikitext_markers(line)))
    yield document


def encode_sentence(tokenizer, sentence: str, input_format: str) -> List[int]:
    """The ids of one sentence of `input_format`: WikiText's `<unk>` is `tokenizer.unk_id`.

    >>> class Chars:
    ...     unk_id = 1
    ...     def encode(self, text):
    ...         return [ord(c) for c in text.strip()]
    >>> encode_sentence(Chars(), "a <unk> b", "wikitext"), encode_sentence(Chars(), "a <unk>", "bert")
    ([97, 1, 98], [97, 32, 60, 117, 110, 107, 62])
    """
    if input_format != "wikitext" or WIKITEXT_UNKNOWN not in sentence:
        return tokenizer.encode(sentence)
    ids = []
    for index, part in enumerate(sentence.split(WIKITEXT_UNKNOWN)):
        if index:
            ids.append(tokenizer.unk_id)
        if part.strip():
            ids.extend(tokenizer.encode(part))
    return ids


def vocabulary_text(sentence: str, input_format: str) -> str:
    """`sentence` as a vocabulary learns from it: without WikiText's `<unk>` (no pieces for a marker)."""
    if input_format != "wikitext" or WIKITEXT_UNKNOWN not in sentence:
        return sentence
    return " ".join(sentence.replace(WIKITEXT_UNKNOWN, " ").split())


def expand_input_patterns(patterns: str) -> List[str]:
    """Comma-separated files/globs (local or any Beam file system) → sorted paths.

    Raises:
        FileNotFoundError: a pattern that matches no file (named in the message).
    """
    paths = []
    for pattern in [p.strip() for p in patterns.split(",") if p.strip()]:
        if "://" in pattern:
            from apache_beam.io.filesystems import FileSystems  # Beam only for remote paths

            matched = [m.path for m in FileSystems.match([pattern])[0].metadata_list]
        else:
            matched = [p for p in glob.glob(os.path.expanduser(pattern)) if os.path.isfile(p)]
        if not matched:
            raise FileNotFoundError(f"input pattern {pattern!r} matches no file")
        paths.extend(matched)
    if not paths:
        raise FileNotFoundError("no input files given")
    return sorted(set(paths))
