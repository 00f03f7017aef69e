"""Write aside, then rename: a directory or file appears complete or not at all.

Every output a user may read while a job runs or after it was killed (best/,
final/, exports, data shards, settings.json) is written to a staging path
beside its target, named `STAGING_PREFIX...`, and moved into place only when
complete. A kill at any moment leaves the previous version or the new one,
never a mixture; what a killed run left is removed by `remove_stale_staging`
(under the directory's lock) the next time a job writes there.

Example:

>>> import os, tempfile
>>> root = tempfile.mkdtemp()
>>> with staged_dir(os.path.join(root, "best")) as staging:
...     _ = open(os.path.join(staging, "weights.txt"), "w").write("new")
>>> os.listdir(os.path.join(root, "best"))
['weights.txt']
"""

import contextlib
import ctypes
import os
import re
import shutil
import tempfile
from typing import Iterator

STAGING_PREFIX = ".staging-"  # every staging path, directory or file, written by any job
# TensorFlow's checkpoint writer stages `<dir>/ckpt-N` in `<dir>/ckpt-N_temp/` and moves the files out after.
_CHECKPOINT_STAGING = re.compile(r".+-\d+_temp.*")


# Linux renameat2(2): swap two paths in one step (glibc >= 2.28; local file systems, not every network one).
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def exchange_paths(first: str, second: str) -> bool:
    """Swaps two existing paths atomically; False where the system cannot (then nothing happened)."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE)
    return result == 0


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def apply_umask(path: str) -> None:
    """Gives `path` (and everything under it) the modes a plain mkdir/open would: umask, not mkdtemp's 0700.

    Staging uses `tempfile` (0700 directories) and some writers make 0600 files
    (safetensors); published as such, a TF Serving container running as another
    user could not read them.
    """
    allowed = ~_current_umask()
    for root, _, files in os.walk(path):
        os.chmod(root, 0o777 & allowed)
        for name in files:
            file = os.path.join(root, name)
            if not os.path.islink(file):
                os.chmod(file, (0o666 | (os.stat(file).st_mode & 0o111)) & allowed)
    if os.path.isfile(path) and not os.path.islink(path):
        os.chmod(path, (0o666 | (os.stat(path).st_mode & 0o111)) & allowed)


def replace_dir(staging: str, target: str) -> None:
    """Moves the complete `staging` to `target`; a reader finds the old or the new `target`, never neither.

    On Linux the two are swapped in one `renameat2(RENAME_EXCHANGE)` and the old
    copy is removed after. Where the system has no such call (macOS, some network
    file systems) the old `target` is renamed to `target.old` first, so for the
    moment between the two renames `target` is missing (`target.old` holds it).
    """
    if os.path.isdir(target) and exchange_paths(staging, target):
        shutil.rmtree(staging, ignore_errors=True)  # the old version, swapped into the staging path
        return
    old = target + ".old"
    shutil.rmtree(old, ignore_errors=True)
    if os.path.exists(target):
        os.rename(target, old)
    os.rename(staging, target)
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def naming_the_target(target: str) -> Iterator[None]:
    """An OSError without a file name (a full disk on `write`: `[Errno 28]`) re-raised naming `target`."""
    try:
        yield
    except OSError as error:
        if error.filename or error.errno is None:
            raise
        raise OSError(error.errno, error.strerror, target) from error


@contextlib.contextmanager
def staged_dir(target: str) -> Iterator[str]:
    """Yields an empty staging directory beside `target`, published to `target` on success.

    On an exception nothing is published and the staging directory is removed.
    """
    parent = os.path.dirname(os.path.abspath(target))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=STAGING_PREFIX + os.path.basename(target) + "-", dir=parent)
    try:
        with naming_the_target(target):
            yield staging
            apply_umask(staging)
            replace_dir(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def staged_file(target: str) -> Iterator[str]:
    """Yields a staging file path beside `target`, moved to `target` on success (removed on failure)."""
    parent = os.path.dirname(os.path.abspath(target))
    os.makedirs(parent, exist_ok=True)
    staging = os.path.join(parent, f"{STAGING_PREFIX}{os.path.basename(target)}-{os.getpid()}")
    try:
        with naming_the_target(target):
            yield staging
            os.replace(staging, target)
    finally:
        if os.path.exists(staging):
            os.remove(staging)


def remove_stale_staging(directory: str, checkpoints: bool = False) -> int:
    """Deletes the staging paths killed jobs left in `directory`; returns how many.

    `checkpoints`: `directory` holds TensorFlow checkpoints, whose killed writes left `ckpt-N_temp`.
    Safe only while the caller holds `directory`'s lock (no other job is writing there).
    Local directories only: a remote one (`gs://...`) is left to its lifecycle rules.
    """
    if "://" in directory or not os.path.isdir(directory):
        return 0
    stale = [
        name
        for name in os.listdir(directory)
        if name.startswith(STAGING_PREFIX) or (checkpoints and _CHECKPOINT_STAGING.fullmatch(name))
    ]
    for name in stale:
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.remove(path)
    return len(stale)


@contextlib.contextmanager
def staged_files(target_dir: str) -> Iterator[str]:
    """Yields a staging directory whose entries are moved into `target_dir` on success.

    Other entries of `target_dir` stay; one of the same name is replaced (a directory too).
    """
    os.makedirs(target_dir, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=target_dir)
    try:
        with naming_the_target(target_dir):
            yield staging
        for name in sorted(os.listdir(staging)):
            apply_umask(os.path.join(staging, name))
        for name in sorted(os.listdir(staging)):
            target = os.path.join(target_dir, name)
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target)
            os.replace(os.path.join(staging, name), target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
