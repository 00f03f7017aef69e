"""BUILD lists every Python module and test file of the tree, and nothing else."""

import ast
import re

from paths import REPO

PACKAGES = ("albert_tf", "data_prep", "bench", "tests")


def build_sources():
    """Every `*.py` string literal in BUILD (srcs and the test list)."""
    tree = ast.parse((REPO / "BUILD").read_text())  # Starlark parses as Python here
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"[\w/]+\.py", node.value)
    }


def test_every_module_and_test_has_a_target():
    on_disk = {str(p.relative_to(REPO)) for package in PACKAGES for p in (REPO / package).rglob("*.py")}
    listed = build_sources()
    assert sorted(on_disk - listed) == [], "files without a Bazel target"
    assert sorted(listed - on_disk) == [], "Bazel targets for missing files"


def test_each_test_file_is_a_py_test():
    text = (REPO / "BUILD").read_text()
    test_list = re.search(r"for test in \[(.*?)\]", text, re.S).group(1)
    listed = set(re.findall(r'"(tests/test_[^"]+\.py)"', test_list))
    assert listed == {str(p.relative_to(REPO)) for p in (REPO / "tests").glob("test_*.py")}


def test_each_py_test_runs_its_file_under_pytest():
    text = (REPO / "BUILD").read_text()
    block = text[text.index("py_test(") : text.index("for test in [")]
    assert 'main = "tests/bazel_pytest.py"' in block
    assert 'srcs = ["tests/bazel_pytest.py", test]' in block and 'args = ["$(rootpath %s)" % test]' in block


def test_the_bazel_wrapper_runs_the_tests_and_reports_failures(tmp_path):
    # What `bazel test` executes: the wrapper with the test file as its argument.
    import subprocess
    import sys

    (tmp_path / "test_probe.py").write_text(
        "def test_passes():\n    assert True\n\ndef test_fails():\n    assert 1 == 2\n"
    )
    result = subprocess.run(
        [sys.executable, str(REPO / "tests" / "bazel_pytest.py"), str(tmp_path / "test_probe.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert result.returncode == 1, result.stdout
    assert "1 failed, 1 passed" in result.stdout
