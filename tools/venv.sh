#!/usr/bin/env bash
# Creates .venv with the pinned runtime and test dependencies and this checkout installed editable (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=.venv/.installed
# pyproject.toml too: the editable install takes its packages and console scripts from it.
inputs=$(cat requirements.txt requirements-dev.txt constraints.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$inputs" ]; then
  exit 0
fi
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r requirements.txt -r requirements-dev.txt -c constraints.txt
# Editable: `python -m albert_tf.<command>` works from any directory and the console scripts are in .venv/bin,
# both running this checkout's code (built with the pinned setuptools above, no isolated build env; quiet: setuptools
# warns of its own deprecations).
# Python puts the current directory first, so a command run from another checkout's root runs that one's code.
PYTHONWARNINGS=ignore .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e .
echo "$inputs" > "$stamp"
