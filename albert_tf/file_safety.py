"""Outputs that must never be one of the job's inputs.

Example:

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "lines.txt")
>>> _ = open(path, "w").write("a line")
>>> same_file(path, os.path.join(os.path.dirname(path), ".", "lines.txt"))
True
"""

import os


def same_file(a: str, b: str) -> bool:
    """Whether the paths name one file: after links and `..`, or as hard links of one inode."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): not the same file
        return False
