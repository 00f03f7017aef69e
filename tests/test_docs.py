"""The README stays a front door, the manual's links hold, and bench/README indexes every benchmark script."""

import re

from paths import REPO

USER_DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BENCH_DOCS = [
    REPO / "bench" / "README.md",
    REPO / "bench" / "experiments" / "README.md",
    REPO / "bench" / "peers" / "README.md",
    *sorted((REPO / "bench" / "journal").glob("*.md")),
]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_readme_is_short_and_its_test_command_is_what_ci_runs():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    [ci_test_command] = [line for line in ci if line.startswith("bash tools/venv.sh && .venv/bin/python -m pytest")]
    assert ci_test_command in readme
    assert "bash tools/venv.sh && .venv/bin/python -m albert_tf.run_pretraining" in readme  # the demo


def test_readme_names_every_flag_that_runs_the_demo():
    """It said only the bare command runs the demo, yet `--demo_minutes`/`--demo_dir` (and `--backend`) do too."""
    from albert_tf.cli.run_pretraining import DEMO_FLAGS

    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    [sentence] = [s for s in re.split(r"(?<=[.;])\s", readme) if "runs the demo" in s]
    assert all(f"`--{flag}`" in sentence for flag in DEMO_FLAGS), sentence


def test_readme_links_every_manual_page():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for page in sorted((REPO / "docs").glob("*.md")):
        assert f"(docs/{page.name})" in readme, page.name


def test_relative_links_point_at_existing_files():
    broken = []
    for doc in USER_DOCS + BENCH_DOCS:
        for target in LINK.findall(doc.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+://", target) or target.startswith("#"):
                continue
            if not (doc.parent / target.split("#")[0]).exists():
                broken.append(f"{doc.relative_to(REPO)}: {target}")
    assert broken == []


def test_user_docs_state_what_is_true_now():
    for doc in USER_DOCS:
        assert "(before:" not in doc.read_text(encoding="utf-8"), doc.name


def test_bench_index_is_short_and_has_a_row_per_script():
    index = (REPO / "bench" / "README.md").read_text(encoding="utf-8")
    assert len(index.splitlines()) <= 150
    rows = set(re.findall(r"^\| `([\w/]+\.py)` \|", index, re.M))
    scripts = {p.name for p in (REPO / "bench").glob("*.py") if not p.name.startswith("_")}
    assert scripts <= rows, "bench scripts without a row in bench/README.md"
    assert all((REPO / "bench" / row).exists() for row in rows), "rows for missing scripts"


def test_bench_scripts_find_the_peer_harness_in_the_checkout():
    for script in (REPO / "bench").rglob("*.py"):
        text = script.read_text(encoding="utf-8")
        assert not re.search(r"shared/peer_bench|[\"']peer_bench[\"']", text), script.name


def failure_table_rows():
    """(what happens, [(test file, test function)]) for each row of docs/failures.md's table."""
    rows = []
    for line in (REPO / "docs" / "failures.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| ") and not line.startswith("| what happens |"):
            cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
            rows.append((cells[0], re.findall(r"`tests/(test_\w+\.py)::(test_\w+)`", cells[-1])))
    return rows


def test_every_failure_row_names_a_test_that_exists():
    import ast

    rows = failure_table_rows()
    assert len(rows) > 40
    missing = []
    for what, tests in rows:
        if not tests:
            missing.append(f"{what}: names no test")
        for file, function in tests:
            path = REPO / "tests" / file
            tree = ast.parse(path.read_text(encoding="utf-8")) if path.exists() else ast.Module(body=[])
            if function not in {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}:
                missing.append(f"{what}: tests/{file}::{function} does not exist")
    assert missing == []
