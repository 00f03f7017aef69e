"""The settings a run's checkpoints are bound to, recorded beside them and checked on resume.

The input iterator is saved batched: resumed with another `--train_batch_size`
(or `--grad_accum_steps`, which sets the micro-batch), its first batch has the
old shape and TensorFlow stops with "Incompatible shapes" deep in the step.
"""

import json
import os

from albert_tf.pretraining.settings import TrainingError

RUN_RECORD = "run_settings.json"
BOUND_FLAGS = ("train_batch_size", "grad_accum_steps")


def check_same_batch(settings, checkpoint_dir: str) -> None:
    """Raises `TrainingError` naming each flag that differs from the run's record."""
    recorded = os.path.join(checkpoint_dir, RUN_RECORD)
    if not os.path.exists(recorded):
        return
    with open(recorded) as f:
        before = json.load(f)
    changed = [
        f"--{n} {before[n]} (now {getattr(settings, n)})"
        for n in BOUND_FLAGS
        if before.get(n, getattr(settings, n)) != getattr(settings, n)
    ]
    if changed:
        raise TrainingError(
            f"{settings.output_dir} was trained with {', '.join(changed)}: its checkpoints hold the input "
            "iterator at that batch size; resume with the same flags, or use a new --output_dir"
        )


def record_batch(settings, checkpoint_dir: str) -> None:
    """Written after each successful start (checked equal when there were checkpoints to resume)."""
    os.makedirs(checkpoint_dir, exist_ok=True)
    partial = os.path.join(checkpoint_dir, RUN_RECORD + ".partial")
    with open(partial, "w") as f:
        json.dump({n: getattr(settings, n) for n in BOUND_FLAGS}, f, indent=2)
    os.replace(partial, os.path.join(checkpoint_dir, RUN_RECORD))
