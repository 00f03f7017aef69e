"""What the fine-tuning tests share: slices of real GLUE data, TensorBoard scalars, runs killed midway."""

import contextlib
import os
import time

from albert_tf.locking import LOCK_FILE

from pretraining_helpers import latest_checkpoint_step


def write_slice(real_data, tmp_path, directory, train_rows, dev_rows, header=True):
    target = tmp_path / "glue" / directory
    target.mkdir(parents=True)
    for name, rows in (("train.tsv", train_rows), ("dev.tsv", dev_rows)):
        lines = (real_data / "glue" / directory / name).read_text(encoding="utf-8-sig").splitlines()
        (target / name).write_text("\n".join(lines[: rows + int(header)]) + "\n", encoding="utf-8")
    return target


@contextlib.contextmanager
def stopped_at_exit(process):
    """Kills `process` if the test leaves it running (a failed assertion)."""
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def wait_for_checkpoint(process, checkpoint_dir, step, deadline_s=300):
    deadline = time.time() + deadline_s
    while latest_checkpoint_step(checkpoint_dir) < step:
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.time() < deadline
        time.sleep(0.05)


def leftovers(directory):
    """Lock files and temporary/staging files anywhere under `directory`."""
    found = []
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            if name == LOCK_FILE or "temp" in name or "tmp" in name or "staging" in name:
                found.append(os.path.join(root, name))
    return found


def write_glue_slice(real_data, root, train_rows=400, dev_rows=40):
    target = root / "glue" / "SST-2"
    target.mkdir(parents=True)
    for name, rows in (("train.tsv", train_rows), ("dev.tsv", dev_rows)):
        lines = (real_data / "glue" / "SST-2" / name).read_text(encoding="utf-8-sig").splitlines()
        (target / name).write_text("\n".join(lines[: rows + 1]) + "\n", encoding="utf-8")
    return root / "glue"


def scalars(directory) -> dict:
    """{tag: [(step, value), ...]} of every TensorBoard event file under `directory`."""
    import tensorflow as tf

    found = {}
    for path in sorted(directory.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                number = float(tf.make_ndarray(value.tensor)) if value.HasField("tensor") else value.simple_value
                found.setdefault(value.tag, []).append((event.step, number))
    return found
