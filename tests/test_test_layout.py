"""How the tests are laid out: no test module imports another; what several share lives in conftest or a helper."""

import ast

from paths import REPO


def imported_test_modules(source):
    """The test_* modules `source` imports anywhere (module level or inside a function)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [base] if base else [alias.name for alias in node.names]  # `from . import test_x`
        else:
            continue
        found += [name for name in names if name.split(".")[-1].startswith("test_")]
    return found


def test_the_scan_sees_function_level_and_package_imports():
    source = "import os\ndef f():\n    from test_a import x\n    import tests.test_b\nfrom . import test_c\n"
    assert sorted(imported_test_modules(source)) == ["test_a", "test_c", "tests.test_b"]
    assert imported_test_modules("from helpers import run_layer_test\nimport pytest\n") == []


def test_no_test_module_imports_another():
    offenders = {
        path.name: imported
        for path in sorted((REPO / "tests").glob("test_*.py"))
        if (imported := imported_test_modules(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, "move what they share into tests/conftest.py or a tests/*_helpers.py module"
