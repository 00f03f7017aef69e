"""What an earlier (maybe killed) fine-tuning run in the same output directory left, and who wrote what.

A killed run resumes from its last checkpoint (`albert_tf.finetuning.checkpoints`), or starts again at
step 0 when it was killed before its first one; either way its `best/` stays until this run scores
better, and its lines in `eval_results.txt` stay told apart from this run's (each line carries the
`run` that wrote it).

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

from albert_tf.json_records import read_json
from albert_tf.run_layout import BEST_DIR, BEST_RESULTS_FILE, EVAL_RESULTS_FILE


def earlier_best(output_dir: str, metric: Optional[str]) -> Optional[dict]:
    """The metrics of the `best/` already in `output_dir`, if it holds a finite `metric` (None: any); else None."""
    try:
        metrics = read_json(os.path.join(output_dir, BEST_DIR, BEST_RESULTS_FILE))
    except (OSError, ValueError):  # none, or unreadable: replaced by this run's first evaluation
        return None
    if metric is None:
        return metrics if isinstance(metrics, dict) else None
    value = metrics.get(metric) if isinstance(metrics, dict) else None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return metrics
    return None


def new_run_id() -> str:
    """When this run started (UTC), sortable, and a random suffix: unique per run."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) + f"-{uuid.uuid4().hex[:8]}"


def record_evaluation(output_dir: str, metrics: dict, run_id: str) -> None:
    """Appends one evaluation, with the run that made it, to `eval_results.txt`."""
    with open(os.path.join(output_dir, EVAL_RESULTS_FILE), "a") as f:
        f.write(json.dumps({**metrics, "run": run_id}) + "\n")
