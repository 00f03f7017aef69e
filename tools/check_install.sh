#!/usr/bin/env bash
# The package as a user installs it: build the wheel, install it into a fresh virtualenv with nothing of the
# checkout on the path, and run what a user runs first: every console script's --help, one real conversion
# (an HF directory to ours and back, compared tensor by tensor) and one SavedModel export.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Built from a copy of the tracked files, so no build/ or *.egg-info is left in the checkout.
mkdir "$work/src"
git ls-files -z | xargs -0 tar -cf - | tar -xf - -C "$work/src"
python3 -m pip wheel -q --no-deps -w "$work/dist" "$work/src" 2>&1 | grep -v "^WARNING: Location" || true
python3 -m venv "$work/venv"
venv="$work/venv/bin"
"$venv/python" -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
"$venv/python" -m pip install -q "$work"/dist/albert_tf-*.whl -c "$repo/constraints.txt" 2>&1 \
  | grep -v "^WARNING: Location" || true
cd "$work"  # from here on, only the installed package can be imported
export PYTHONPATH=
"$venv/python" - <<'PY'
import albert_tf
assert "site-packages" in albert_tf.__file__, albert_tf.__file__
PY
scripts=$("$venv/python" -c "
import importlib.metadata as m
print(' '.join(sorted(e.name for e in m.distribution('albert_tf').entry_points if e.group == 'console_scripts')))")
for script in $scripts; do
  "$venv/$script" --help > "$work/help.txt" 2>&1 || { cat "$work/help.txt"; echo "FAILED: $script --help" >&2; exit 1; }
  echo "ok: $script --help"
done
# A real model in HF's format: a toy SentencePiece vocabulary and the tiny config shipped with the package.
"$venv/python" - <<'PY'
import json, os, sys
from data_prep.train_sentencepiece import train_sentencepiece
from albert_tf import AlbertBackbone, AlbertPretrainer, formats
from albert_tf.tokenization import SentencePieceTokenizer

lines = [f"the quick brown fox jumps over the lazy dog {i} times, paris is the capital of france" for i in range(300)]
spm = train_sentencepiece(lines, "toy", vocab_size=80)
configs = os.path.join(sys.prefix, "share", "albert_tf", "configs")
config = json.load(open(os.path.join(configs, "albert_tiny.json"))) | {"vocab_size": 80}
json.dump(config, open("tiny.json", "w"))
model = AlbertPretrainer(AlbertBackbone.from_albert_config("tiny.json"))
os.makedirs("hf_in")
formats.save(model, "hf_in", "hf", SentencePieceTokenizer(spm))
PY
"$venv/albert-convert-checkpoint" --input hf_in --output_dir ours
"$venv/albert-convert-checkpoint" --input ours --output_dir hf_back --output_format hf
"$venv/python" - <<'PY'
import numpy as np
from safetensors.numpy import load_file
a, b = load_file("hf_in/model.safetensors"), load_file("hf_back/model.safetensors")
assert sorted(a) == sorted(b), set(a) ^ set(b)
for name in a:
    np.testing.assert_array_equal(a[name], b[name], err_msg=name)
print(f"ok: HF -> albert_tf -> HF, {len(a)} tensors identical")
PY
"$venv/albert-export" --model_dir ours --output_dir served --max_seq_length 16 > export.json
test -f served/settings.json && test -n "$(ls served/1/saved_model.pb)"
echo "ok: albert-export wrote $(ls -d served/*/) from the installed package"
