#!/usr/bin/env bash
# Creates .venv with the pinned runtime and test dependencies (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=.venv/.installed
inputs=$(cat requirements.txt requirements-dev.txt constraints.txt | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$inputs" ]; then
  exit 0
fi
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r requirements.txt -r requirements-dev.txt -c constraints.txt
echo "$inputs" > "$stamp"
