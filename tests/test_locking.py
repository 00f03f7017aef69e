"""One writer per output directory: a second run is refused naming the first; a dead holder is taken over."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from albert_tf.locking import LOCK_FILE, LockError, OutputDirLock
from albert_tf.publish import STAGING_PREFIX
from albert_tf.tokenization import SentencePieceTokenizer

from locking_helpers import hold_lock


def test_a_second_writer_is_refused_naming_the_holder(tmp_path):
    holder = hold_lock(tmp_path)
    try:
        with pytest.raises(LockError, match=rf"in use by pid {holder.pid} on .* since .*-c"):
            with OutputDirLock(str(tmp_path)):
                pass
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_of_a_killed_run_is_taken_over_with_a_note(tmp_path):
    holder = hold_lock(tmp_path)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert (tmp_path / LOCK_FILE).exists()  # a kill leaves it behind
    notes = []
    with OutputDirLock(str(tmp_path), note=notes.append):
        recorded = json.loads((tmp_path / LOCK_FILE).read_text())
        assert recorded["pid"] == os.getpid()
    assert len(notes) == 1 and f"pid {holder.pid}" in notes[0] and "which is gone" in notes[0]
    assert not (tmp_path / LOCK_FILE).exists()


def test_the_same_process_may_nest_and_an_unwritable_dir_is_one_clear_error(tmp_path):
    with OutputDirLock(str(tmp_path)), OutputDirLock(str(tmp_path)):
        assert (tmp_path / LOCK_FILE).exists()
    assert not (tmp_path / LOCK_FILE).exists()
    (tmp_path / "a_file").write_text("")  # a path under a file cannot be made (as root too, unlike chmod)
    with pytest.raises(LockError, match=r"a_file/out: cannot create the output directory \(Not a directory\)"):
        with OutputDirLock(str(tmp_path / "a_file" / "out")):
            pass


@pytest.mark.realdata
def test_two_pretraining_runs_on_one_output_dir(pretraining_data, tmp_path):
    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import PretrainSettings

    holder = hold_lock(tmp_path)
    try:
        with pytest.raises(LockError, match=rf"pid {holder.pid}"):
            pretrain(
                PretrainSettings(
                    output_dir=str(tmp_path),
                    train_batch_size=8,
                    max_seq_length=64,
                    num_train_steps=1,
                    verbose=False,
                    albert_config_file=pretraining_data["config"],
                    input_file=pretraining_data["data"],
                )
            )
        assert not (tmp_path / "checkpoints").exists()  # the first run's directory is untouched
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.realdata
def test_data_prep_refuses_a_busy_dir_and_cleans_the_staging_of_killed_runs(tmp_path, wikitext_spm, real_data):
    from data_prep.pipeline import Settings, run

    settings = Settings(
        input_file=str(real_data / "wikitext2" / "test.txt"),
        output_dir=str(tmp_path / "out"),
        tokenizer=SentencePieceTokenizer(wikitext_spm),
        input_format="wikitext",
        max_seq_length=64,
        dupe_factor=1,
        num_shards=1,
    )
    holder = hold_lock(tmp_path / "out")
    try:
        with pytest.raises(LockError, match=rf"pid {holder.pid}"):
            run(settings)
    finally:
        holder.kill()
        holder.wait()
    left = tmp_path / "out" / f"{STAGING_PREFIX}0123abcd"  # what a killed run leaves
    left.mkdir()
    (left / "part-00000-of-00001.tfrecord").write_bytes(b"x" * 1000)
    run(settings)
    assert sorted(os.listdir(tmp_path / "out")) == [
        "metadata.json",
        "part-00000-of-00001.tfrecord",
        "spm.model",  # the vocabulary travels with the data
        "tokenizer.json",
    ]


# Each contender waits for `go`, tries the lock, reports; the one that holds it stays inside until every
# other has reported, so exactly one holder is the only correct count (no timing involved).
CONTEND = """
import json, os, sys, time
from albert_tf.locking import LockError, OutputDirLock
directory, reports, contenders = sys.argv[1], sys.argv[2], int(sys.argv[3])
open(os.path.join(reports + "-ready", str(os.getpid())), "w").close()
while not os.path.exists(os.path.join(reports, "go")):
    time.sleep(0.001)
def report(outcome):
    with open(os.path.join(reports, str(os.getpid())), "w") as f:
        f.write(outcome)
try:
    with OutputDirLock(directory, note=lambda message: None):
        report("held")
        while len(os.listdir(reports)) < contenders + 1:
            time.sleep(0.005)
except LockError:
    report("refused")
except Exception as error:
    report(f"crashed: {type(error).__name__}: {error}")
"""


def test_a_stale_lock_is_taken_over_by_exactly_one_of_many_processes(tmp_path):
    contenders, trials = 8, 30
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    for trial in range(trials):
        directory, reports = tmp_path / f"out{trial}", tmp_path / f"reports{trial}"
        directory.mkdir()
        reports.mkdir()
        ready = tmp_path / f"reports{trial}-ready"
        ready.mkdir()
        stale = {"pid": dead_pid, "host": socket.gethostname(), "started": "earlier", "command": "killed"}
        (directory / LOCK_FILE).write_text(json.dumps(stale))
        processes = [
            subprocess.Popen(
                [sys.executable, "-c", CONTEND, str(directory), str(reports), str(contenders)],
                cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            )
            for _ in range(contenders)
        ]
        while len(os.listdir(ready)) < contenders:  # all started: they try at once
            time.sleep(0.01)
        (reports / "go").write_text("")
        for process in processes:
            process.wait(timeout=300)
        outcomes = sorted((reports / str(p.pid)).read_text() for p in processes)
        assert outcomes == ["held"] + ["refused"] * (contenders - 1), f"trial {trial}: {outcomes}"
        assert not (directory / LOCK_FILE).exists()
