"""What an earlier (maybe killed) fine-tuning run in the same output directory left, and who wrote what.

A run killed with -9 restarts at step 0; its `best/` must stay until this run
scores better, and its lines in `eval_results.txt` must stay told apart from
this run's (each line carries the `run` that wrote it).

Example:

>>> import tempfile
>>> earlier_best(tempfile.mkdtemp(), "accuracy") is None
True
"""

import json
import math
import os
import time
import uuid
from typing import Optional

BEST_RESULTS = os.path.join("best", "eval_results.json")


def earlier_best(output_dir: str, metric: str) -> Optional[dict]:
    """The metrics of the `best/` already in `output_dir`, if it holds a finite `metric`; else None."""
    try:
        with open(os.path.join(output_dir, BEST_RESULTS)) as f:
            metrics = json.load(f)
    except (OSError, ValueError):
        return None
    value = metrics.get(metric) if isinstance(metrics, dict) else None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return metrics
    return None


def new_run_id() -> str:
    """When this run started (UTC), sortable, and a random suffix: unique per run."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) + f"-{uuid.uuid4().hex[:8]}"
