"""The one preamble of the benchmark scripts: `from _common import REPO, cpu_kind` before any other import.

A script runs as `python bench/<name>.py` from anywhere. Importing this module puts the checkout
first on `sys.path` (ahead of `bench/`, whose `data_prep.py` would otherwise shadow the package),
picks Keras' TensorFlow backend and quietens TensorFlow's C++ log unless the caller set them, and
gives `cpu_kind()`, which every result records: timings compare only within one CPU kind.
"""

import os
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
PEERS = REPO / "bench" / "peers"  # the peer harness: stdlib-only scripts, one per implementation

for _path in (str(PEERS), str(REPO)):  # the checkout ends up first
    if _path in sys.path:
        sys.path.remove(_path)
    sys.path.insert(0, _path)
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from cpu_kind import cpu_kind  # noqa: E402  (bench/peers/cpu_kind.py, stdlib only)

__all__ = ["PEERS", "REPO", "cpu_kind"]
