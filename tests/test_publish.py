"""`replace_dir`: a published directory is never missing, and never a mixture of two versions."""

import os
import shutil
import sys

import pytest

from albert_tf import publish


def _dir_with(path, text):
    os.makedirs(path)
    with open(os.path.join(path, "weights.txt"), "w") as f:
        f.write(text)


def _read(path):
    with open(os.path.join(path, "weights.txt")) as f:
        return f.read()


def test_replacing_swaps_in_one_step_so_the_target_never_goes_missing(tmp_path, monkeypatch):
    target, staging = str(tmp_path / "best"), str(tmp_path / ".staging-best")
    _dir_with(target, "old")
    _dir_with(staging, "new")
    seen = []

    def watch(real):
        def wrapped(*args, **kwargs):
            seen.append(os.path.isdir(target) and os.path.isfile(os.path.join(target, "weights.txt")))
            return real(*args, **kwargs)

        return wrapped

    # Every file-system step replace_dir may take checks that `target` is there, whole, before it runs.
    monkeypatch.setattr(publish.os, "rename", watch(os.rename))
    monkeypatch.setattr(publish.shutil, "rmtree", watch(shutil.rmtree))
    publish.replace_dir(staging, target)
    assert _read(target) == "new" and not os.path.exists(staging) and not os.path.exists(target + ".old")
    assert seen and all(seen), seen


def test_where_paths_cannot_be_swapped_the_old_version_waits_beside_the_target(tmp_path, monkeypatch):
    target, staging = str(tmp_path / "best"), str(tmp_path / ".staging-best")
    _dir_with(target, "old")
    _dir_with(staging, "new")
    monkeypatch.setattr(publish, "exchange_paths", lambda first, second: False)
    moves = []
    real_rename = os.rename
    monkeypatch.setattr(publish.os, "rename", lambda a, b: (moves.append((a, b)), real_rename(a, b)))
    publish.replace_dir(staging, target)
    assert moves == [(target, target + ".old"), (staging, target)]  # the documented window: target.old holds it
    assert _read(target) == "new" and not os.path.exists(target + ".old")


def test_a_first_publication_is_one_rename(tmp_path):
    target, staging = str(tmp_path / "final"), str(tmp_path / ".staging-final")
    _dir_with(staging, "new")
    publish.replace_dir(staging, target)
    assert _read(target) == "new"


@pytest.mark.skipif(sys.platform != "linux", reason="renameat2 is Linux's")
def test_linux_swaps_directories_with_renameat2(tmp_path):
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    _dir_with(first, "a")
    _dir_with(second, "b")
    assert publish.exchange_paths(first, second)
    assert _read(first) == "b" and _read(second) == "a"
