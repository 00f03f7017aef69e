"""The examples in the docstrings run and print what they say.

The modules are found in the tree, not listed by hand: every module under albert_tf/ and data_prep/
with a `>>>` in any docstring is collected, so no module's examples are silently never run.
"""

import ast
import doctest
import importlib
import os

import pytest

from paths import REPO

PACKAGES = ("albert_tf", "data_prep")


def has_examples(source):
    tree = ast.parse(source)
    documented = [
        tree,
        *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))),
    ]
    return any(">>>" in (ast.get_docstring(node, clean=False) or "") for node in documented)


def modules_with_examples():
    names = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if has_examples(path.read_text(encoding="utf-8")):
                parts = path.relative_to(REPO).with_suffix("").parts
                names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = modules_with_examples()


def test_the_scan_finds_the_modules_with_examples():
    assert {"albert_tf.config", "albert_tf.tokenization", "data_prep.masking"} <= set(MODULES)
    assert has_examples('def f():\n    """Doubles.\n\n    >>> f()\n    2\n    """\n')
    assert not has_examples('"""No examples here."""\n# >>> in a comment is not an example\n')


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, monkeypatch):
    monkeypatch.chdir(REPO)  # examples name configs/ relative to the repo
    module = importlib.import_module(name)
    result = doctest.testmod(module, extraglobs={"tempfile": importlib.import_module("tempfile"), "os": os})
    assert result.attempted > 0, f"{name} has no example"
    assert result.failed == 0
