"""Bazel's `py_test` main: runs the test file given as its argument under pytest.

A py_test whose `main` is the test file itself would import it and exit 0
without running a test; this wrapper makes `bazel test` run it for real.
"""

import sys

import pytest

if __name__ == "__main__":
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
