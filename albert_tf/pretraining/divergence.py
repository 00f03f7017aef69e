"""The loop's side of training health: health lines to the log and TensorBoard, and `--on_divergence`.

`health.py` decides (pure Python); this module acts on the run: `warn` says one line, `stop`
raises a `PretrainingError` (one line at the CLI), `rollback` restores the newest checkpoint
saved before the suspect weights, deletes the newer ones, and skips every batch up to the
one that diverged (so the run does not meet the same batches from the same weights again),
at most `HealthSettings.max_rollbacks` times.

Batches are skipped by position in the deterministic input pipeline. With an iterator the
checkpoint cannot hold (multi-replica strategies) a run restarted after a rollback skips
by step count again, so it meets the skipped batches later in the epoch.
"""

from typing import Callable

import tensorflow as tf

from albert_tf.pretraining.health import PREFIX, Divergence, HealthMonitor
from albert_tf.pretraining.settings import PretrainingError


def health_report(
    say: Callable[[str], None], writer, step: Callable[[], int], below_bar: bool = False
) -> Callable[[str], None]:
    """A function that says a health line and writes it as TensorBoard text ("health") at the current step.

    `below_bar`: a progress bar holds the console's current line; the line goes below it, not after it.
    """

    def report(line: str) -> None:
        if below_bar:
            print(flush=True)
        say(line)
        if writer:
            with writer.as_default(step=step()):
                tf.summary.text("health", line)

    return report


def respond_to_divergence(
    loop, checkpointer, monitor: HealthMonitor, divergence: Divergence, report: Callable[[str], None]
) -> bool:
    """Acts on `divergence` as `--on_divergence` says; True when the run was rolled back.

    Raises:
        PretrainingError: `stop`, a `rollback` with no checkpoint before the divergence, or rollbacks spent.
    """
    action = monitor.response(divergence)
    if action == "warn":
        report(monitor.warning(divergence))
        return False
    if action == "stop":
        # The newest checkpoint may hold the diverging weights: name the one a rollback would restore.
        raise PretrainingError(monitor.stop_message(divergence, checkpointer.newest_before(divergence.since_step)))
    target = checkpointer.roll_back(before_step=divergence.since_step)
    if target is None:
        raise PretrainingError(
            f"training diverged: {divergence.message}; no checkpoint before step {divergence.since_step} to "
            "roll back to (--on_divergence=rollback); lower --learning_rate or save checkpoints more often"
        )
    skipped = skip_batches(loop, divergence.step - loop.step)
    report(
        f"{PREFIX}{divergence.message}; rolled back to {target} (step {loop.step}) and skipped the {skipped} "
        f"batches after it (rollback {monitor.rollbacks} of at most {monitor.settings.max_rollbacks})"
    )
    return True


def skip_batches(loop, count: int) -> int:
    """Moves the restored loop's input `count` batches past the checkpoint's position; returns `count`."""
    if not loop.iterator_in_checkpoint:
        loop.train_iterator = None
        loop.ensure_iterator()  # at the restored step's position
    for _ in range(count):
        next(loop.train_iterator)
    return count


def non_finite(step: int, loss: float) -> Divergence:
    """A NaN/Inf loss as a divergence (for `rollback`; the other actions stop on it as before)."""
    return Divergence("non-finite loss", step, since_step=step - 1, message=f"loss is {loss} at step {step}")
