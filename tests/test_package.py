"""The package itself: one version, declared dependencies that match the pins, no import cycle, no side effects."""

import ast
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from paths import REPO

PACKAGES = ("albert_tf", "data_prep")


def pyproject():
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def pins(path):
    """{normalized name: version} of a requirements file's `name==version` lines."""
    found = {}
    for line in (REPO / path).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            requirement = Requirement(line)
            (version,) = [s.version for s in requirement.specifier]
            found[normalize(requirement.name)] = version
    return found


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def test_one_version_number():
    import albert_tf

    assert pyproject()["project"]["dynamic"] == ["version"]
    assert pyproject()["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "albert_tf.__version__"}
    bazel = re.search(r'module\(name = "albert_tf", version = "([^"]+)"\)', (REPO / "MODULE.bazel").read_text())
    assert bazel.group(1) == albert_tf.__version__


def test_runtime_dependencies_are_declared_once_and_pinned_within_their_ranges():
    declared = {normalize(Requirement(r).name): Requirement(r) for r in pyproject()["project"]["dependencies"]}
    pinned = pins("requirements.txt")
    constraints = pins("constraints.txt")
    assert sorted(declared) == sorted(pinned), "requirements.txt pins exactly the runtime dependencies"
    for name, requirement in declared.items():
        assert requirement.specifier.contains(pinned[name]), f"{name}=={pinned[name]} is outside {requirement}"
        assert constraints.get(name) == pinned[name], f"constraints.txt pins {name} differently"


def _third_party_imports():
    """Top-level names the package's modules import, the standard library and our own excepted."""
    names = set()
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - set(PACKAGES)


def test_every_imported_distribution_is_a_declared_dependency():
    project = pyproject()["project"]
    # An extra's modules (the JAX step, the Dask runner) are imported only where that extra is asked for.
    extras = [r for name, group in project["optional-dependencies"].items() if name != "test" for r in group]
    declared = {normalize(Requirement(r).name) for r in project["dependencies"] + extras}
    distributions = importlib.metadata.packages_distributions()
    for module in sorted(_third_party_imports()):
        providers = {normalize(d) for d in distributions.get(module, [])}
        assert providers & declared, f"`import {module}` (from {sorted(providers)}) is not in pyproject's dependencies"


def test_the_venv_holds_the_package_editable_with_its_console_scripts(tmp_path):
    """tools/venv.sh installed the dependencies only: `python -m albert_tf.<command>` worked from the clone's root
    alone, and no console script was in .venv/bin. A process of its own: one started outside the checkout."""
    if not (Path(sys.prefix) / ".installed").is_file():
        pytest.skip(f"{sys.prefix} is not made by tools/venv.sh")
    installed = importlib.metadata.distribution("albert_tf")
    assert json.loads(installed.read_text("direct_url.json"))["dir_info"].get("editable")
    bin_dir = Path(sys.executable).parent
    assert [name for name in pyproject()["project"]["scripts"] if not (bin_dir / name).is_file()] == []
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    code = "import albert_tf, data_prep, albert_tf.cli.param_table"
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


def known_module(name):
    parts = name.split(".")
    return (REPO.joinpath(*parts).with_suffix(".py")).is_file() or (REPO.joinpath(*parts) / "__init__.py").is_file()


def _module_imports(path, name):
    """Modules of ours that `path` (module `name`) imports anywhere, function bodies included.

    A function-level import still makes a cycle (it only runs later), so the graph sees every one.
    """
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for statement in ast.walk(ast.parse(path.read_text())):
        if isinstance(statement, ast.Import):
            found |= {alias.name for alias in statement.names}
        elif isinstance(statement, ast.ImportFrom):
            base = statement.module or ""
            if statement.level:
                parent = package.split(".")[: len(package.split(".")) - statement.level + 1]
                base = ".".join(parent + ([base] if base else []))
            # `from package import submodule` loads the submodule; `from package import name`, the package.
            submodules = {f"{base}.{alias.name}" for alias in statement.names}
            found |= submodules
            if not all(known_module(m) for m in submodules):
                found.add(base)
    return found


def test_the_import_graph_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "probe.py"
    module.write_text(
        "import albert_tf.errors\n"
        "def later():\n"
        "    from albert_tf.tokenization import registry\n"
        "    from . import file_safety\n"
        "class Lazy:\n"
        "    def method(self):\n"
        "        import data_prep.masking\n"
    )
    assert _module_imports(module, "albert_tf.probe") >= {
        "albert_tf.errors",
        "albert_tf.tokenization.registry",
        "albert_tf.file_safety",
        "data_prep.masking",
    }


def _import_graph(modules):
    """{module: modules of ours it imports}, each module's package `__init__`s included."""
    graph = {
        name: {m for m in _module_imports(path, name) if m in modules and m != name} for name, path in modules.items()
    }
    # Importing a.b.c runs a/__init__ and a/b/__init__ first.
    for name in modules:
        parents = name.split(".")
        for i in range(1, len(parents)):
            parent = ".".join(parents[:i])
            if parent in modules:
                for importer in graph:
                    if name in graph[importer] and importer != parent and not importer.startswith(parent + "."):
                        graph[importer].add(parent)
    return graph


def _cycles(graph):
    visiting, done, cycles = set(), set(), []

    def visit(node, trail):
        if node in done:
            return
        if node in visiting:
            cycles.append(trail[trail.index(node) :] + [node])
            return
        visiting.add(node)
        for nxt in sorted(graph[node]):
            visit(nxt, trail + [node])
        visiting.discard(node)
        done.add(node)

    for name in sorted(graph):
        visit(name, [])
    return cycles


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    (tmp_path / "a.py").write_text("from pkg import b\n")
    (tmp_path / "b.py").write_text("def later():\n    from pkg.a import name\n")
    (tmp_path / "c.py").write_text("from pkg import b\n")
    modules = {f"pkg.{n}": tmp_path / f"{n}.py" for n in "abc"}
    assert _cycles(_import_graph(modules)) == [["pkg.a", "pkg.b", "pkg.a"]]


def test_no_import_cycle():
    cycles = _cycles(_import_graph(_our_modules()))
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def _our_modules():
    modules = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    return modules


# The doors users type (`python -m albert_tf.<command>`, `python -m data_prep.<job>`): each only
# hands over to its command in albert_tf/cli/, so they are the one place a module imports upwards.
def _is_door(name):
    parts = name.split(".")
    return (
        parts[0] == "albert_tf" and len(parts) == 2 and (REPO / "albert_tf" / "cli" / f"{parts[1]}.py").is_file()
    ) or parts[-1] == "__main__"


def test_only_the_doors_import_the_commands():
    modules = _our_modules()
    upward = {
        name: sorted(m for m in _module_imports(path, name) if m == "albert_tf.cli" or m.startswith("albert_tf.cli."))
        for name, path in modules.items()
        if not name.startswith("albert_tf.cli") and not _is_door(name)
    }
    assert {name: found for name, found in upward.items() if found} == {}


def test_importing_the_package_has_no_side_effects():
    code = (
        "import os, sys; sys.argv = ['-m', '--verbosity=-1']; before = dict(os.environ); import albert_tf; "
        "assert dict(os.environ) == before, set(os.environ) ^ set(before); "
        "print('ok')"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def test_the_commands_read_their_flags_before_keras_and_tensorflow():
    """`--help` or a flag mistake took 10-35 s (Keras and TensorFlow loaded with the command's module);
    `create_pretraining_data` imported TensorFlow through its run record and opened with two lines of Beam's
    warnings; saved_model_cli took 14-17 s and 860 MB (TensorFlow's tool imported with it)."""
    light = (
        "albert_tf.cli.create_pretraining_data, albert_tf.cli.train_sentencepiece, "
        "albert_tf.cli.build_wordpiece_vocab, data_prep.pipeline, albert_tf.run_pretraining, "
        "albert_tf.cli.run_classifier, albert_tf.cli.run_squad, "
        "albert_tf.cli.run_race, albert_tf.cli.export_model, albert_tf.cli.param_table, albert_tf.cli.inspect, "
        "albert_tf.cli.predict, albert_tf.cli.convert_checkpoint, albert_tf.cli.saved_model_cli"
    )
    code = f"import sys; import {light}; print(sorted(m for m in ('keras', 'tensorflow') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr[-2000:]
    assert result.stderr == ""  # Beam's import-time warnings about Google Cloud clients it lacks (data_prep.beam)


def declared_layers():
    """[(layer, [module prefix, ...])] from docs/design.md's "Layers" list, bottom first.

    Each item (`1.`, `2.`, `- 3a:`, ...) names modules in backticks: `errors` is `albert_tf.errors`,
    `inputs/` the package `albert_tf.inputs`, `data_prep/` our other package; other backticked text
    (a command line, a function) names nothing.
    """
    text = (REPO / "docs" / "design.md").read_text()
    start = text.index("**Layers, and which way imports go.**")
    section = text[start : text.index("\n\n", text.index("\n1. ", start))]
    items = re.split(r"\n(?:(\d)\. |   - (\d[a-z]): )", section)[1:]
    layers = []
    for number, tier, body in zip(items[0::3], items[1::3], items[2::3]):
        names = []
        for token in re.findall(r"`([^`]+)`", body):
            token = token.removeprefix("albert_tf/").rstrip("/")
            name = token if token in PACKAGES else f"albert_tf.{token.replace('/', '.')}"
            known = known_module(name) or name in PACKAGES
            if re.fullmatch(r"[a-z_.]+", name) and known and not _is_door(name) and name not in names:
                names.append(name)
        if names:
            layers.append((number or tier, names))
    return layers


def test_the_declared_layers_are_read_from_the_design_notes():
    layers = dict(declared_layers())
    assert list(layers) == ["1", "2", "3a", "3b", "3c", "4"]
    assert "albert_tf.tokenization" in layers["1"] and "albert_tf.distribution" in layers["1"]
    assert layers["3c"] == ["albert_tf.tasks"] and layers["4"] == ["albert_tf.cli"]


def test_every_import_goes_down_the_declared_layers():
    """docs/design.md's layers are the rule: each module sits in one, and imports only from it or below."""
    layers = declared_layers()

    def layer_of(module):
        """The layer of the longest declared prefix of `module` (`albert_tf` itself names only the package)."""
        owners = [
            (len(prefix), index)
            for index, (_, prefixes) in enumerate(layers)
            for prefix in prefixes
            if module == prefix or (prefix != "albert_tf" and module.startswith(prefix + "."))
        ]
        return max(owners)[1] if owners else None

    modules = _our_modules()
    unplaced = sorted(name for name in modules if not _is_door(name) and layer_of(name) is None)
    assert unplaced == [], "modules in no layer of docs/design.md"
    upward = []
    for name, path in sorted(modules.items()):
        if _is_door(name):
            continue
        for imported in sorted(_module_imports(path, name)):
            if imported in modules and layer_of(imported) > layer_of(name):
                upward.append(f"{name} ({layers[layer_of(name)][0]}) -> {imported} ({layers[layer_of(imported)][0]})")
    assert upward == []
