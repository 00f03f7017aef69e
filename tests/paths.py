"""Where the tests find the repository, its configs and the real data sets (imported by tests and conftest)."""

import os
import pathlib

REPO = pathlib.Path(__file__).resolve().parent.parent
CONFIGS = REPO / "configs"


def shared_data_dir() -> pathlib.Path:
    """`$ALBERT_TF_DATA`, else `../shared/data` beside the repository."""
    return pathlib.Path(os.environ.get("ALBERT_TF_DATA", REPO.parent / "shared" / "data"))
