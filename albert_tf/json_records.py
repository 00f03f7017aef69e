"""The JSON files albert_tf writes and reads back: written aside and renamed, read with the file named.

Every JSON file a later run or a user reads (`settings.json`, summaries, the
config record a resume checks, prediction files, data `metadata.json`) is
written through `write_json`, so a kill mid-write leaves the old file or the
new one, never a torn one; and read through `read_json`, so a file that is
still not valid JSON (cut by hand, written by another tool) is one error
naming the file and the place, never a `JSONDecodeError` traceback.

Example:

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "summary.json")
>>> write_json(path, {"step": 3})
>>> read_json(path)
{'step': 3}
>>> _ = open(path, "w").write('{"step": ')
>>> try:
...     read_json(path)
... except UnreadableJsonError as error:
...     print(str(error).replace(path, "summary.json"))
summary.json: not valid JSON (line 1, column 10: Expecting value); was its writer killed, or was it edited by hand?
"""

import json
from typing import Any

from albert_tf.errors import AlbertError
from albert_tf.publish import staged_file


class UnreadableJsonError(AlbertError, ValueError):
    """A JSON file albert_tf reads back that is not valid JSON (or not UTF-8)."""


def write_json(path: str, value: Any, *, indent: int = 2, **dump_options) -> None:
    """Writes `value` to `path` as JSON, whole or not at all (staged beside it, then renamed)."""
    with staged_file(path) as staging, open(staging, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=indent, **dump_options)
        f.write("\n")


def read_json(path: str) -> Any:
    """The JSON value in `path`; `UnreadableJsonError` naming the file when it is not valid JSON.

    A missing or unreadable file stays an `OSError` (which names the file too).
    """
    with open(path, "rb") as f:
        return parse_json(f.read(), path)


def parse_json(data: bytes, path: str) -> Any:
    """The JSON value in `data`, read from `path` (a remote file, say); errors as `read_json`'s."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise UnreadableJsonError(f"{path}: not UTF-8 text (byte {error.start}); not a JSON file") from None
    except json.JSONDecodeError as error:
        raise UnreadableJsonError(
            f"{path}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg}); "
            "was its writer killed, or was it edited by hand?"
        ) from None
