"""One writer per output directory: an exclusive lock file that names its holder.

Every command that writes an output directory (pretraining, fine-tuning,
data_prep, export) holds `<dir>/.albert_tf.lock` while it runs. A second run
on the same directory fails at once, naming the holder (pid, host, start
time, command). The file is held with `flock`, which the kernel releases
when its holder dies, so the lock of a process that is gone (killed,
crashed) is taken over by exactly one of the runs that start on it, with a
note. Remote paths (`gs://`, ...) are not locked: their file systems have no
locks.

`when_accepted(directory, action)` defers a write (the run's `settings.json`)
until this process holds the directory's lock and the run there is accepted:
a run refused by its flags, by the lock, or under the lock by what the
directory holds (a resume under other settings) writes nothing there.

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
import errno
import fcntl
import json
import os
import socket
import sys
from typing import Callable, Dict, Iterable, List, Optional

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


def _key(directory: str) -> str:
    return os.path.abspath(os.path.join(directory, LOCK_FILE))


# Lock file path → actions waiting for this process's run there to be accepted (`when_accepted`).
_pending: Dict[str, List[Callable[[], Iterable[str]]]] = {}


def when_accepted(directory: str, action: Callable[[], Iterable[str]]) -> None:
    """Runs `action` once this process holds `directory`'s lock and its run there is accepted: at once if
    it is, else then (`OutputDirLock.accept`; a lock taken with `accept=True` accepts on entry).

    `action` returns the paths it wrote; a run that fails in a directory its
    lock created removes them with the directory (a failed run leaves no trace).
    """
    held = OutputDirLock.holding(directory)
    if held is not None and held.accepted:
        held.written.extend(action() or [])
    else:
        _pending.setdefault(_key(directory), []).append(action)


class OutputDirLock:
    """Context manager holding the lock of `directory` (re-entrant within one process).

    Args:
        directory: the output directory (created if missing).
        note: prints a message (a stale lock taken over); default: stderr.
        accept: the run is accepted on entry; False: it still checks what the directory holds (a
            resume's bindings) and calls `accept()` once it passes, and the deferred writes wait till then.
    """

    _held = {}  # lock file path → [depth, the outermost OutputDirLock], for re-entry by the same process

    def __init__(self, directory: str, note: Optional[Callable[[str], None]] = None, *, accept: bool = True):
        self.directory = directory
        self.accepted = False
        self._accept_on_entry = accept
        self.path = os.path.join(directory, LOCK_FILE)
        self.note = note or (lambda message: print(message, file=sys.stderr, flush=True))
        self.remote = "://" in directory
        self.written: List[str] = []
        self.created = False
        self._fd = None

    @classmethod
    def holding(cls, directory: str) -> Optional["OutputDirLock"]:
        """The lock this process holds on `directory`, or None."""
        entry = cls._held.get(_key(directory))
        return entry[1] if entry else None

    def accept(self) -> None:
        """The run holding this lock passed its checks: the writes deferred until then happen now."""
        held = OutputDirLock.holding(self.directory) or self  # the outermost lock of this process
        held.accepted = True
        held._run_pending()

    def __enter__(self) -> "OutputDirLock":
        if self.remote:
            if self._accept_on_entry:
                self.accept()
            return self
        key = _key(self.directory)
        if key in OutputDirLock._held:
            OutputDirLock._held[key][0] += 1
            return self
        self.created = not os.path.exists(self.directory)
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as error:
            raise LockError(f"{self.directory}: cannot create the output directory ({error.strerror})") from None
        self._fd = self._acquire()
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": " ".join(sys.argv)[:300],
        }
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, json.dumps(holder).encode(), 0)
        except OSError as error:  # full disk
            self._release()
            raise LockError(f"{self.directory}: cannot write here ({error.strerror})") from None
        OutputDirLock._held[key] = [1, self]
        try:
            if self._accept_on_entry:
                self.accept()
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def _run_pending(self) -> None:
        for action in _pending.pop(_key(self.directory), []):
            self.written.extend(action() or [])

    def _acquire(self) -> int:
        """An fd of the lock file holding its flock; the file is the one at `self.path` (not one unlinked)."""
        while True:
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
            except OSError as error:  # read-only directory, full disk
                raise LockError(f"{self.directory}: cannot write here ({error.strerror})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                os.close(fd)
                if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise LockError(f"{self.directory}: cannot lock {self.path} ({error.strerror})") from None
                self._refuse()
            # The holder before us may have unlinked the file after we opened it: then ours is not the lock.
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self._note_taken_over(fd)
                return fd
            os.close(fd)

    def _read_holder(self, fd: Optional[int] = None) -> dict:
        try:
            if fd is not None:
                text = os.pread(fd, 1 << 16, 0).decode()
            else:
                with open(self.path) as f:
                    text = f.read()
            holder = json.loads(text)
        except (OSError, ValueError):
            return {}
        return holder if isinstance(holder, dict) else {}

    def _note_taken_over(self, fd: int) -> None:
        """A lock file nobody holds that names a holder: a run that is gone (the kernel released its flock)."""
        holder = self._read_holder(fd)
        pid = holder.get("pid")
        if pid is None:
            return
        if holder.get("host") != socket.gethostname():
            # Across hosts, flock on a shared file system may not exclude: another host's lock stands.
            os.close(fd)
            self._refuse(holder)
        self.note(
            f"note: {self.directory}: taking over the lock of pid {pid} (started {holder.get('started')}), "
            "which is gone"
        )

    def _refuse(self, holder: Optional[dict] = None) -> None:
        holder = self._read_holder() if holder is None else holder
        pid = holder.get("pid")
        if pid is None:
            raise LockError(
                f"{self.directory} is in use by another run (its lock {self.path} names no holder yet); "
                "wait for it or use another output directory"
            )
        if holder.get("host") == socket.gethostname() and isinstance(pid, int) and not _alive(pid):
            raise LockError(
                f"{self.directory} is in use by another run (its lock names pid {pid}, which is gone: another "
                f"run is taking it over, or a process pid {pid} started holds it still)"
            )
        raise LockError(
            f"{self.directory} is in use by pid {pid} on {holder.get('host')} since "
            f"{holder.get('started')} ({holder.get('command')}); wait for it or use another output "
            f"directory (if that run is gone, delete {self.path})"
        )

    def _release(self) -> None:
        try:
            os.remove(self.path)  # while still holding it: a newcomer that opened it sees it unlinked
        except FileNotFoundError:
            pass
        os.close(self._fd)
        self._fd = None

    def __exit__(self, exc_type, *exc) -> None:
        if self.remote:
            return
        key = _key(self.directory)
        entry = OutputDirLock._held[key]
        entry[0] -= 1
        if entry[0] > 0:
            return
        del OutputDirLock._held[key]
        self._release()
        # A failed run leaves no trace: the directory it created (and what this lock's actions wrote) goes too.
        if exc_type is not None and self.created:
            for path in self.written:
                try:
                    os.remove(path)
                except OSError:
                    pass
            try:
                os.rmdir(self.directory)
            except OSError:  # not empty: something was written (and kept) after all
                pass
