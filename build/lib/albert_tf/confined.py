"""File names that a model directory's own metadata gives must stay inside that directory.

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
"""

import os

from albert_tf.errors import AlbertError


class OutsideDirectoryError(AlbertError, ValueError):
    """Metadata that names a file outside its own directory."""


def path_inside(directory: str, name, where: str) -> str:
    """`directory/name`, refusing a `name` that is not a relative path staying inside `directory`."""
    if not isinstance(name, str) or not name or os.path.isabs(name):
        raise OutsideDirectoryError(f"{where}: {name!r} is not a file name inside {directory}")
    root = os.path.realpath(directory)
    joined = os.path.realpath(os.path.join(root, name))
    if os.path.commonpath([root, joined]) != root:
        raise OutsideDirectoryError(f"{where}: {name!r} is not a file name inside {directory}")
    return os.path.join(directory, name)
