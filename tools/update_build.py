"""Brings BUILD's file lists in step with the tree (tests/test_build_targets.py checks them).

    python tools/update_build.py

Rewrites the `albert_tf` and `data_prep` libraries' `srcs`, the test-support library and the
test list from the files on disk, points each CLI binary at its module in `albert_tf/cli/`,
and adds a `bench_<name>` binary for a bench script that has none (`bench/_*.py` are shared modules,
not scripts). Hand-written deps stay.
"""

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parent.parent
BUILD = REPO / "BUILD"
CLI_MODULES = {"export": "export_model"}  # binary name -> module in albert_tf/cli/ where they differ


def files(pattern):
    return sorted(str(p.relative_to(REPO)) for p in REPO.glob(pattern) if "__pycache__" not in p.parts)


def string_list(paths, indent):
    pad = " " * indent
    return "[\n" + "".join(f'{pad}"{p}",\n' for p in paths) + " " * (indent - 4) + "]"


def replace_srcs(text, name, paths):
    pattern = re.compile(rf'(name = "{name}",\n(?:    [^\n]*\n)*?    srcs = )\[[^\]]*?\n    \]')
    updated, count = pattern.subn(lambda m: m.group(1) + string_list(paths, 8), text)
    assert count == 1, name
    return updated


def main():
    text = BUILD.read_text()
    text = replace_srcs(text, "albert_tf", files("albert_tf/**/*.py"))
    text = replace_srcs(text, "data_prep", files("data_prep/**/*.py"))  # its `__main__` doors included
    support = [p for p in files("tests/*.py") if not pathlib.Path(p).name.startswith("test_")]
    text = replace_srcs(text, "test_support", support)
    text = replace_srcs(text, "bench_peers", files("bench/peers/*.py"))
    tests = files("tests/test_*.py")
    text = re.sub(r"(    for test in )\[.*?\n    \]", lambda m: m.group(1) + string_list(tests, 8), text, flags=re.S)
    for binary in re.findall(r'py_binary\(\n    name = "(\w+)",\n    srcs = \["albert_tf/', text):
        module = f"albert_tf/cli/{CLI_MODULES.get(binary, binary)}.py"
        text = re.sub(
            rf'(name = "{binary}",\n    srcs = \[)"albert_tf/[\w/]+\.py"(\],\n    main = )"albert_tf/[\w/]+\.py"',
            rf'\1"{module}"\2"{module}"',
            text,
        )
    for script in files("bench/[!_]*.py"):
        name = "bench_" + pathlib.Path(script).stem
        if f'name = "{name}"' not in text:
            block = (
                f'py_binary(\n    name = "{name}",\n    srcs = ["{script}"],\n    main = "{script}",\n'
                '    deps = [":albert_tf", ":bench_common", ":data_prep"],\n)\n\n'
            )
            anchor = 'py_library(\n    name = "test_support"'
            text = text.replace(anchor, block + anchor)
    BUILD.write_text(text)


if __name__ == "__main__":
    main()
