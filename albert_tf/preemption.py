"""A preempted run (SIGTERM, Ctrl-C) stops at a step boundary with its work saved.

Spot/preemptible VMs and TPU maintenance end a job with SIGTERM and a grace
period; Ctrl-C sends SIGINT. Inside `stop_signals()`, either signal only sets a
flag: the training loop finishes the step it is in, saves (pretraining: a
checkpoint of that step; fine-tuning: a checkpoint of that step, `best/` already whole), and raises
`Preempted`, which the CLIs turn into one line and exit status
`PREEMPTED_EXIT_STATUS` (75, sysexits' EX_TEMPFAIL: "try again"). The output
directory's lock is released on the way out, and running the same command
again resumes. A second signal while the first is being handled stops the
process at once (unwinding: the lock is released, nothing half-written is left).

Example:

>>> with stop_signals():
...     requested()
False
"""

import contextlib
import signal
import threading
from typing import Optional

from albert_tf.errors import AlbertError

PREEMPTED_EXIT_STATUS = 75
SIGNALS = (signal.SIGTERM, signal.SIGINT)

_received: Optional[int] = None  # the first stop signal received, if any
_depth = 0  # nesting of stop_signals()


TERMINATED_EXIT_STATUS = 143  # 128 + SIGTERM, what a shell reports for a process SIGTERM ended


class Terminated(BaseException):
    """SIGTERM outside `stop_signals()`: unwinds like Ctrl-C's KeyboardInterrupt, so every `finally` and
    context manager on the way (the output lock, staging directories) cleans up before the exit."""


_terminated = False  # a SIGTERM reached `raise_terminated`


def raise_terminated(signum, frame):
    """The CLIs' SIGTERM handler (`albert_tf.cli.app`) outside `stop_signals()`."""
    global _terminated
    _terminated = True
    raise Terminated()


def check_terminated() -> None:
    """Raises `Terminated` if a SIGTERM arrived whose raise was lost.

    Python ignores an exception raised inside a garbage-collector callback (JAX registers one), so a
    handler that ran there leaves only its flag; call this before publishing work.
    """
    if _terminated:
        raise Terminated()


class Preempted(AlbertError):
    """The run stopped on a signal after saving its work; running the same command again resumes it."""

    exit_status = PREEMPTED_EXIT_STATUS


def _on_signal(signum, frame):
    global _received
    _received = signum
    # A second signal is not deferred: it unwinds at once (SIGTERM raises Terminated, SIGINT
    # KeyboardInterrupt), releasing the lock on the way.
    signal.signal(signal.SIGTERM, raise_terminated)
    signal.signal(signal.SIGINT, signal.default_int_handler)


@contextlib.contextmanager
def stop_signals():
    """Defers SIGTERM/SIGINT to the next `requested()` check; restores the previous handlers after.

    Re-entrant; a no-op outside the main thread (Python delivers signals to the main thread only).
    """
    global _depth, _received
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _depth:
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
        return
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    _received = None
    _depth = 1
    for sig in SIGNALS:
        signal.signal(sig, _on_signal)
    try:
        yield
    finally:
        _depth = 0
        _received = None
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def requested() -> bool:
    """Whether a stop signal arrived inside `stop_signals()`."""
    return _received is not None


def signal_name() -> str:
    return signal.Signals(_received).name if _received is not None else "a signal"


def requested_on_any_worker(compute) -> bool:
    """`requested()` agreed by every worker of a multi-worker run (`compute.any_process`: one small collective).

    Each worker must stop at the same step: saving a checkpoint is a collective, so a worker that
    saved alone would wait for the others forever. Call it at the same point of every step on every
    worker; without `stop_signals()` (a library caller) it is `requested()`, no collective.
    """
    if not _depth:
        return requested()
    return compute.any_process(requested())


RESUME = "run the same command again to resume"


def raise_preempted(what_is_kept: str, next_run: str = RESUME) -> None:
    """Raises `Preempted` naming the signal (or the worker that received it), `what_is_kept` and
    what running the same command again does (`next_run`)."""
    cause = signal_name() if requested() else "a signal on another worker"
    raise Preempted(f"stopped by {cause}: {what_is_kept}; {next_run}")


def raise_if_requested(what_is_kept: str, next_run: str = RESUME) -> None:
    """Raises `Preempted` naming the signal and `what_is_kept` when a stop signal arrived."""
    if requested():
        raise_preempted(what_is_kept, next_run)
