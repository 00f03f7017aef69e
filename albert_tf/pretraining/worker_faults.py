"""A multi-worker run that loses a worker stops, naming it, and the same command on every worker resumes.

Two ways a lost worker shows on the others:

- TensorFlow notices (its coordination service misses the dead task's heartbeats, or the
  peer's connection resets) and the step's collective fails with a long, multi-line
  `UnavailableError`/`AbortedError`/...: `reported_as_lost_worker` turns it into one
  `WorkerLostError` line naming the workers that no longer answer on their TF_CONFIG address.
- Nothing notices (a worker alive but stuck, a network that drops packets silently): the
  `StepWatchdog` ends the process when no training step has finished for
  `--worker_timeout_seconds`, with the same one line.

A multi-process JAX run (`--backend jax --strategy multi_worker`) has no TF_CONFIG: each process
records its host and pid in `<output_dir>/processes/` when it starts (`register_process`), and a
step that fails on one process is checked against that record (`lost_processes`): a process of
this host that is gone is named; processes on other hosts are named as not answering. The step's
collective fails at once where the transport notices the dead peer (gloo on CPUs); otherwise JAX's
coordination service ends the survivors after `distribution.HEARTBEAT_TIMEOUT_S` with its own log.

Either way the checkpoints already written are whole (each is written to temporary files and
renamed); restarting every worker with the same command resumes from the last one.

Every function takes the run's `Compute` (`albert_tf.compute`): TensorFlow's cluster is its
`cluster_resolver`, JAX's processes its `num_processes`.

Example (a one-worker run has no peers to lose):

>>> from albert_tf.compute import make_compute
>>> unreachable_peers(make_compute())
[]
"""

import contextlib
import os
import re
import socket
import sys
import threading
import time
from typing import Callable, List, Optional

import tensorflow as tf

from albert_tf.json_records import read_json, write_json
from albert_tf.pretraining.settings import PretrainingError

# What a collective raises when a peer is gone (TF 2.20: Unavailable after missed heartbeats or a
# reset connection; Aborted/Cancelled for the collectives aborted with it; DeadlineExceeded on a
# collective timeout; Internal for a peer that restarted).
LOST_PEER_ERRORS = (
    tf.errors.UnavailableError,
    tf.errors.AbortedError,
    tf.errors.CancelledError,
    tf.errors.DeadlineExceededError,
    tf.errors.InternalError,
)
PROBE_TIMEOUT_S = 3.0
TASK_IN_MESSAGE = re.compile(r"/job:(\w+)(?:/replica:\d+)?/task:(\d+)")


class WorkerLostError(PretrainingError):
    """Another worker of a multi-worker run is gone or stuck; restart every worker to resume."""

    # Ends the process once said: a JAX process's exit would wait for the lost one at JAX's shutdown barrier.
    exit_at_once = True


def _peers(compute) -> List[tuple]:
    """(task name, address) of every other task of the cluster; [] without a cluster."""
    resolver = compute.cluster_resolver
    if resolver is None or not resolver.task_type:
        return []
    peers = []
    for job, addresses in resolver.cluster_spec().as_dict().items():
        listed = addresses.items() if isinstance(addresses, dict) else enumerate(addresses)
        for index, address in listed:
            if (job, index) != (resolver.task_type, resolver.task_id):
                peers.append((f"{job} {index}", address))
    return peers


def unreachable_peers(compute) -> List[str]:
    """'worker 1 (127.0.0.1:2223)' for every other task whose TF_CONFIG address refuses a connection."""
    lost = []
    for name, address in _peers(compute):
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S).close()
        except OSError:
            lost.append(f"{name} ({address})")
    return lost


def tasks_named_in(compute, message: str) -> List[str]:
    """The other tasks a TensorFlow error message names (`/job:worker/replica:0/task:1`), as
    'worker 1 (address)'."""
    peers = dict(_peers(compute))
    named = []
    for job, index in TASK_IN_MESSAGE.findall(message):
        name = f"{job} {index}"
        if name in peers and f"{name} ({peers[name]})" not in named:
            named.append(f"{name} ({peers[name]})")
    return named


def lost_workers(compute, tf_message: str = "") -> str:
    """'worker 1 (address) is unreachable' (probed now), else '... is not answering' (named by TensorFlow's
    message), else ''."""
    for lost, verb in (
        (unreachable_peers(compute), "unreachable"),
        (tasks_named_in(compute, tf_message), "not answering"),
    ):
        if lost:
            return ", ".join(lost) + (" is " if len(lost) == 1 else " are ") + verb
    return ""


def describe_loss(who: str, what: str, checkpoint: Optional[str]) -> str:
    """One line: who is lost, why we think so, what is kept and what to do."""
    return (
        f"{who} ({what}); the last checkpoint is {checkpoint or '(none yet)'}; restart every worker with the "
        "same command to resume from it"
    )


PROCESSES_DIR = "processes"  # <output_dir>/processes/process-<id>.json: where each JAX process runs


def is_multi_worker(compute) -> bool:
    return bool(_peers(compute)) or compute.num_processes > 1


def register_process(output_dir: str, compute) -> None:
    """Records this JAX process's host and pid, for the others to name it if it is lost."""
    if compute.num_processes < 2:
        return
    record = {"process_id": compute.process_id, "host": socket.gethostname(), "pid": os.getpid()}
    write_json(os.path.join(output_dir, PROCESSES_DIR, f"process-{compute.process_id}.json"), record)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    try:  # a killed process its parent has not reaped yet is a zombie: gone all the same
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def lost_processes(output_dir: str, compute, settle_s: float = 5.0) -> str:
    """'process 1 (host, pid 42) is gone' for the other processes of this host that ended; processes on
    other hosts, which cannot be checked from here, as 'not answering'; '' when every one checked lives.

    A killed process's connections close a moment before its pid ends: a failed collective may be seen
    first, so a process of this host is given `settle_s` to be gone.
    """
    here = socket.gethostname()
    local, elsewhere = [], []
    for process_id in range(compute.num_processes):
        if process_id == compute.process_id:
            continue
        try:
            record = read_json(os.path.join(output_dir, PROCESSES_DIR, f"process-{process_id}.json"))
        except (OSError, ValueError):
            elsewhere.append(f"process {process_id} (never registered)")
            continue
        where = f"process {process_id} ({record.get('host')}, pid {record.get('pid')})"
        if record.get("host") == here:
            local.append((where, int(record.get("pid", 0))))
        else:
            elsewhere.append(where)
    deadline = time.monotonic() + settle_s
    while True:
        gone = [where for where, pid in local if not _pid_alive(pid)]
        if gone or not local or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    if gone:
        return ", ".join(gone) + (" is gone" if len(gone) == 1 else " are gone")
    if elsewhere:
        return ", ".join(elsewhere) + (" is" if len(elsewhere) == 1 else " are") + " not answering"
    return ""


@contextlib.contextmanager
def reported_as_lost_process(compute, output_dir: str, latest_checkpoint: Callable[[], Optional[str]]):
    """Under several JAX processes, a step failing because a process is gone becomes one `WorkerLostError`
    line naming it; an error while every other process lives passes through unchanged."""
    try:
        yield
    except (RuntimeError, ValueError) as error:  # XLA's runtime errors, a failed collective's among them
        if isinstance(error, PretrainingError) or compute.num_processes < 2:
            raise
        who = lost_processes(output_dir, compute)
        if not who:
            raise
        first_line = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
        raise WorkerLostError(describe_loss(who, f"a step failed: {first_line}", latest_checkpoint())) from None


@contextlib.contextmanager
def reported_as_lost_worker(compute, latest_checkpoint: Callable[[], Optional[str]]):
    """Under a multi-worker strategy, a collective failing because a peer is gone becomes one
    `WorkerLostError` line naming it. Errors that name no lost peer pass through unchanged."""
    try:
        yield
    except LOST_PEER_ERRORS as error:
        who = lost_workers(compute, str(error)) if is_multi_worker(compute) else ""
        if not who:
            raise
        cause = f"{type(error).__name__} in a collective"
        raise WorkerLostError(describe_loss(who, cause, latest_checkpoint())) from None


_active: Optional["StepWatchdog"] = None


def step_finished() -> None:
    """Called by the training loop after every step: feeds the active watchdog, if any."""
    if _active is not None:
        _active.beat()


class StepWatchdog:
    """Ends the process when no step finished for `timeout_s` (multi-worker runs only; 0: off).

    Used as a context manager around the training loop. On expiry it prints one line
    (`error: ...`, naming the unreachable workers) and exits with status 1 through `exit`
    (`os._exit`: the main thread is blocked inside a collective and cannot be unwound).
    The checkpoints are whole; the output lock is left and taken over by the next run.
    """

    def __init__(
        self,
        compute,
        timeout_s: float,
        latest_checkpoint: Callable[[], Optional[str]],
        exit: Callable[[int], None] = os._exit,
    ):
        if timeout_s < 0:
            raise PretrainingError(f"--worker_timeout_seconds must be ≥ 0 (0: off), got {timeout_s:g}")
        self.compute = compute
        self.timeout_s = timeout_s
        self.latest_checkpoint = latest_checkpoint
        self.exit = exit
        self.last_beat = time.monotonic()
        self.stopped = threading.Event()
        self.thread = None

    def beat(self) -> None:
        self.last_beat = time.monotonic()

    def __enter__(self) -> "StepWatchdog":
        global _active
        if self.timeout_s > 0 and is_multi_worker(self.compute):
            self.beat()
            _active = self
            self.thread = threading.Thread(target=self._watch, name="albert_tf-step-watchdog", daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        global _active
        self.stopped.set()
        if self.thread is not None:
            self.thread.join()
            _active = None

    def _watch(self) -> None:
        while not self.stopped.wait(min(1.0, self.timeout_s / 4)):
            silent = time.monotonic() - self.last_beat
            if silent >= self.timeout_s:
                what = f"no training step finished in {silent:.0f} s, --worker_timeout_seconds {self.timeout_s:g}"
                who = lost_workers(self.compute) or "a worker stopped answering"
                message = describe_loss(who, what, self.latest_checkpoint())
                print(f"error: {message}", file=sys.stderr, flush=True)
                self.exit(1)
                return
