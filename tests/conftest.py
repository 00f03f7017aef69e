"""Shared pytest set-up: backend, quiet TF logs, real-data location, tiny configs."""

import json
import os
import pathlib

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import pytest  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parent.parent
CONFIGS = REPO / "configs"


def shared_data_dir():
    """`$ALBERT_TF_DATA`, else `../shared/data` beside the repository."""
    return pathlib.Path(os.environ.get("ALBERT_TF_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture
def real_data():
    """The real public data sets; tests using it carry the `realdata` mark."""
    root = shared_data_dir()
    if not root.is_dir():
        pytest.skip(
            f"real data not found at {root}: set ALBERT_TF_DATA to the shared/data "
            "folder (CI checks it is present, so this never skips there)"
        )
    return root


@pytest.fixture
def tiny_config_dict():
    with open(CONFIGS / "albert_tiny.json") as f:
        return json.load(f)
