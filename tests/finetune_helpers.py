"""What the fine-tuning tests share: slices of real GLUE data, TensorBoard scalars, runs killed midway, and a
task whose dev scores a test scripts."""

import contextlib
import os
import time
from typing import Callable, Iterable, Optional

from albert_tf.finetuning.base import Baseline, Encoded, Task
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


class ScriptedTask(Task):
    """A classification task for driving the engine's loop (`training.train`) on features a test made.

    Its score at each evaluation is `score(predictions)` (the runner's `predict` gives them), or the
    next of `scores`; its loss is `loss` (default: the classifiers'). The reading and writing steps are
    the runner's and are never called here.
    """

    name = "scripted"
    metric = "accuracy"

    def __init__(
        self,
        scores: Optional[Iterable[dict]] = None,
        score: Optional[Callable[[object], dict]] = None,
        baseline: Optional[Baseline] = None,
        loss: Optional[Callable] = None,
    ):
        given = iter(scores) if scores is not None else None
        self.loss = loss
        self.scripted_score = score or (lambda predictions: next(given))
        self.given_baseline = baseline

    def losses(self):
        from albert_tf.finetuning.losses import classification_loss

        return {"logits": self.loss or classification_loss}

    def score(self, data, predictions):
        return self.scripted_score(predictions)

    def baseline(self, data):
        return self.given_baseline

    def never_called(self, *args, **kwargs):
        raise AssertionError("the loop reads, builds and writes nothing of the task's")

    inputs = read = encode = build_model = postprocess = write = never_called


NO_DEV = Encoded("dev", [], {})


def no_predictions(model, data):
    """The runner's `predict` for a `ScriptedTask` whose scores are scripted: nothing to predict."""
    return None
