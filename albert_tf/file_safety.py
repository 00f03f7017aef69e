"""Paths a job must not follow or overwrite: names from a model's own metadata that leave its directory,
and outputs that are one of the job's inputs or sit among the model's files.

A crafted `tokenizer.json` or shard index could otherwise point at any file on
the machine (an absolute path, `../`), and `export` would copy it into a
SavedModel's assets.

Example:

>>> path_inside("/models/m", "spm.model", "tokenizer.json: field 'vocabulary'")
'/models/m/spm.model'
>>> try:
...     path_inside("/models/m", "../../etc/passwd", "tokenizer.json")
... except OutsideDirectoryError as error:
...     print(error)
tokenizer.json: '../../etc/passwd' is not a file name inside /models/m
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "lines.txt")
>>> _ = open(path, "w").write("a line")
>>> same_file(path, os.path.join(os.path.dirname(path), ".", "lines.txt"))
True
"""

import os

from albert_tf.errors import AlbertError


class OutsideDirectoryError(AlbertError, ValueError):
    """Metadata that names a file outside its own directory."""


def is_inside(path: str, directory: str) -> bool:
    """Whether `path` is `directory` or under it, after links and `..`."""
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return os.path.commonpath([path, directory]) == directory


def path_inside(directory: str, name, where: str) -> str:
    """`directory/name`, refusing a `name` that is not a relative path staying inside `directory`."""
    if (
        not isinstance(name, str)
        or not name
        or os.path.isabs(name)
        or not is_inside(os.path.join(directory, name), directory)
    ):
        raise OutsideDirectoryError(f"{where}: {name!r} is not a file name inside {directory}")
    return os.path.join(directory, name)


def same_file(a: str, b: str) -> bool:
    """Whether the paths name one file: after links and `..`, or as hard links of one inode."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): not the same file
        return False
