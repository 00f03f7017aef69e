"""BUILD lists every Python module and test file of the tree, and nothing else."""

import ast
import re

from conftest import REPO

PACKAGES = ("albert_tf", "data_prep", "bench", "tests")


def build_sources():
    """Every `*.py` string literal in BUILD (srcs and the test list)."""
    tree = ast.parse((REPO / "BUILD").read_text())  # Starlark parses as Python here
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and re.fullmatch(r"[\w/]+\.py", node.value)}


def test_every_module_and_test_has_a_target():
    on_disk = {str(p.relative_to(REPO)) for package in PACKAGES
               for p in (REPO / package).rglob("*.py")}
    listed = build_sources()
    assert sorted(on_disk - listed) == [], "files without a Bazel target"
    assert sorted(listed - on_disk) == [], "Bazel targets for missing files"


def test_each_test_file_is_a_py_test():
    text = (REPO / "BUILD").read_text()
    test_list = re.search(r"for test in \[(.*?)\]", text, re.S).group(1)
    listed = set(re.findall(r'"(tests/test_[^"]+\.py)"', test_list))
    assert listed == {str(p.relative_to(REPO)) for p in (REPO / "tests").glob("test_*.py")}
