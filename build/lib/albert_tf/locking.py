"""One writer per output directory: an exclusive lock file that names its holder.

Every command that writes an output directory (pretraining, fine-tuning,
data_prep, export) holds `<dir>/.albert_tf.lock` while it runs. A second run
on the same directory fails at once, naming the holder (pid, host, start
time, command). A lock left by a process that is gone (killed, crashed) on
this host is taken over with a note. Remote paths (`gs://`, ...) are not
locked: their file systems have no exclusive create.

Example:

>>> import tempfile
>>> directory = tempfile.mkdtemp()
>>> with OutputDirLock(directory):
...     os.path.exists(os.path.join(directory, LOCK_FILE))
True
>>> os.path.exists(os.path.join(directory, LOCK_FILE))
False
"""

import datetime
import json
import os
import socket
import sys
from typing import Callable, Optional

from albert_tf.errors import AlbertError

LOCK_FILE = ".albert_tf.lock"


class LockError(AlbertError, RuntimeError):
    """The output directory is in use by another run."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class OutputDirLock:
    """Context manager holding the lock of `directory` (re-entrant within one process).

    Args:
        directory: the output directory (created if missing).
        note: prints a message (a stale lock taken over); default: stderr.
    """

    _held = {}  # path → depth, for re-entry by the same process

    def __init__(self, directory: str, note: Optional[Callable[[str], None]] = None):
        self.directory = directory
        self.path = os.path.join(directory, LOCK_FILE)
        self.note = note or (lambda message: print(message, file=sys.stderr, flush=True))
        self.remote = "://" in directory

    def __enter__(self) -> "OutputDirLock":
        if self.remote:
            return self
        key = os.path.abspath(self.path)
        if OutputDirLock._held.get(key):
            OutputDirLock._held[key] += 1
            return self
        self.created = not os.path.exists(self.directory)
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as error:
            raise LockError(f"{self.directory}: cannot create the output directory ({error.strerror})") from None
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": " ".join(sys.argv)[:300],
        }
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._take_over_or_refuse()
                continue
            except OSError as error:  # read-only directory, full disk
                raise LockError(f"{self.directory}: cannot write here ({error.strerror})") from None
            with os.fdopen(fd, "w") as f:
                json.dump(holder, f)
            OutputDirLock._held[key] = 1
            return self
        raise LockError(f"{self.directory}: could not take the lock {self.path}")

    def _take_over_or_refuse(self) -> None:
        try:
            with open(self.path) as f:
                holder = json.load(f)
        except (OSError, ValueError):
            holder = {}
        same_host = holder.get("host") == socket.gethostname()
        pid = holder.get("pid")
        if same_host and isinstance(pid, int) and not _alive(pid):
            self.note(
                f"note: {self.directory}: taking over the lock of pid {pid} (started {holder.get('started')}), "
                "which is gone"
            )
            os.remove(self.path)
            return
        if not holder:
            raise LockError(
                f"{self.directory}: locked by {self.path}, which cannot be read; if no run uses this "
                "directory, delete that file"
            )
        raise LockError(
            f"{self.directory} is in use by pid {pid} on {holder.get('host')} since "
            f"{holder.get('started')} ({holder.get('command')}); wait for it or use another output "
            f"directory (if that run is gone, delete {self.path})"
        )

    def __exit__(self, exc_type, *exc) -> None:
        if self.remote:
            return
        key = os.path.abspath(self.path)
        OutputDirLock._held[key] -= 1
        if OutputDirLock._held[key] == 0:
            del OutputDirLock._held[key]
            try:
                os.remove(self.path)
            except FileNotFoundError:
                pass
            # A failed run leaves no trace: the directory it created and left empty goes too.
            if exc_type is not None and getattr(self, "created", False):
                try:
                    os.rmdir(self.directory)
                except OSError:  # not empty: something was written (and kept) after all
                    pass
