"""Where a fine-tuning run keeps its state, so the same command resumes a killed or preempted run.

Every evaluation interval (and on a stop signal) the training model, the
optimizer (its step, moments and the learning-rate schedule's position), the
dropout layers' seed generators and the evaluations since `best/` last improved
go to `output_dir/checkpoints`
(`tf.train.CheckpointManager`: written to temporary files and renamed, the
`checkpoint` index replaced after, so a SIGKILL at any moment leaves the last
complete one; the last `KEEP` are kept). The data position needs no state:
the training batches are a fixed function of `--seed`, and a resumed run
skips the ones already consumed (`optimizer.iterations` of them).

The settings a checkpoint is bound to (`BOUND_SETTINGS`, and the task) are
recorded beside it; resuming with others is refused, naming them, since the
schedule, data order or weights would no longer be the checkpoint's.

Example:

>>> settings = FineTuneSettings(output_dir="/tmp/out", train_step=10)
>>> bound = bound_settings(settings, {"task": "sst-2", "labels": ["0", "1"]}, backend="tensorflow")
>>> bound["train_step"], bound["labels"], bound["backend"]
(10, ['0', '1'], 'tensorflow')
"""

import os
from typing import Optional

import tensorflow as tf

from albert_tf.compute import Compute
from albert_tf.finetuning.settings import FineTuneError, FineTuneSettings
from albert_tf.json_records import read_json, write_json
from albert_tf.run_layout import CHECKPOINT_DIR

KEEP = 3  # checkpoints kept (the newest; older ones are deleted as new ones are written)
RECORD_FILE = "finetune_settings.json"  # in checkpoints/: what the checkpoints were made with
BOUND_SETTINGS = (
    "init_checkpoint",
    "albert_config_file",
    "max_seq_length",
    "train_batch_size",
    "grad_accum_steps",
    "learning_rate",
    "train_step",
    "warmup_step",
    "optimizer",
    "dropout",
    "seed",
    "early_exit",
)
# Resolved from the model or the training file when not given: compared once they are (`check_resume`).
RESOLVED_LATER = ("max_seq_length", "train_step", "warmup_step")


def bound_settings(settings: FineTuneSettings, task_binding: dict, backend: str) -> dict:
    """What a fine-tuning checkpoint is bound to: the task's binding (`Task.binding`: its name, labels,
    columns), `BOUND_SETTINGS` and the `backend` (`Compute.name`)."""
    # The backend too: a JAX run's checkpoints hold copies of its state, not the TensorFlow model's objects.
    bound = {name: getattr(settings, name) for name in BOUND_SETTINGS}
    return {**task_binding, **bound, "backend": backend}


def check_binding(directory: str, bound: dict) -> None:
    """Raises `FineTuneError` when the checkpoints in `directory` were made under other `bound` settings."""
    record = os.path.join(directory, RECORD_FILE)
    try:
        before = read_json(record)
    except FileNotFoundError:
        return  # checkpoints without a record: nothing to compare
    # A record from before a binding existed (labels, columns) is compared on what it holds, and is
    # not rewritten: such a run's labels and columns stay unbound.
    before.setdefault("backend", "tensorflow")  # records from before JAX runs existed
    changed = [name for name in bound if name in before and before[name] != bound[name]]
    if changed:
        differences = ", ".join(f"{name} {before.get(name)!r} → {bound[name]!r}" for name in changed)
        raise FineTuneError(
            f"{os.path.dirname(directory)}: the checkpoints in {directory} were made with other settings "
            f"({differences}); resume with the same ones, or use a new --output_dir"
        )


def check_resume(settings: FineTuneSettings, task_binding: dict, backend: str) -> None:
    """Refuses, before anything is built or read, a resume whose checkpoints were made under other settings.

    What is not known yet (`RESOLVED_LATER`: steps from `--num_train_epochs`, the model's length) is
    compared once it is (`check_binding`, by the runner and again by the restore).
    """
    directory = os.path.join(settings.output_dir, CHECKPOINT_DIR)
    if not (os.path.isdir(directory) and tf.train.latest_checkpoint(directory)):
        return
    if settings.train_step is not None:  # explicit steps: the schedule needs no data
        settings = settings.with_schedule(0)
    bound = bound_settings(settings, task_binding, backend)
    check_binding(directory, {k: v for k, v in bound.items() if v is not None or k not in RESOLVED_LATER})


class FineTuneCheckpoints:
    """Saves and restores one fine-tuning run's training state in `output_dir/checkpoints`.

    Args:
        settings: the run's settings (`output_dir`, and what is bound).
        task_binding: the task's `binding()` (bound too).
        model: the model `fit` trains.
        optimizer: its optimizer, built (its slots must exist before a restore).
        compute: where the run computes: its checkpoint state (TensorFlow's objects, or JAX's copies).
    """

    def __init__(self, settings: FineTuneSettings, task_binding: dict, model, optimizer, compute: Compute):
        self.directory = os.path.join(settings.output_dir, CHECKPOINT_DIR)
        self.bound = bound_settings(settings, task_binding, compute.name)
        # Evaluations since best/ last improved (--early_stopping_patience), saved with the weights.
        self.stale_evaluations = tf.Variable(0, dtype=tf.int64, trainable=False)
        # With the dropout layers' seed generators: a resumed run draws the masks the uninterrupted one would.
        self.state = compute.checkpoint_state(model, optimizer, seed_states=True)
        self.checkpoint = tf.train.Checkpoint(stale=self.stale_evaluations, **self.state.trackables())
        self.manager = tf.train.CheckpointManager(self.checkpoint, self.directory, max_to_keep=KEEP)

    def latest(self) -> Optional[str]:
        return self.manager.latest_checkpoint

    def restore(self) -> Optional[str]:
        """Restores the newest checkpoint, if any (checked against the recorded settings); returns its path.

        Raises:
            FineTuneError: other settings than the checkpoints', or no checkpoint can be read.
        """
        candidates = list(reversed(self.manager.checkpoints))
        if not candidates:
            return None
        self._check_record()
        unreadable = []
        for path in candidates:
            try:
                self.checkpoint.restore(path).assert_existing_objects_matched()
                self.state.after_restore()
                return path
            except (tf.errors.OpError, ValueError, AssertionError, IndexError) as error:  # IndexError: truncated
                unreadable.append(f"{os.path.basename(path)} ({str(error).strip().splitlines()[0][:200]})")
        raise FineTuneError(
            f"{self.directory}: no checkpoint can be restored: {'; '.join(unreadable)}; use a new --output_dir "
            "(or delete that directory to train again from the start)"
        )

    def _check_record(self) -> None:
        check_binding(self.directory, self.bound)

    def save(self, step: int) -> str:
        """Writes the training state of `step` (after its evaluation, if any); returns the checkpoint's path."""
        os.makedirs(self.directory, exist_ok=True)
        record = os.path.join(self.directory, RECORD_FILE)
        if not os.path.exists(record):
            write_json(record, self.bound, sort_keys=True)
        self.state.before_save()
        return self.manager.save(checkpoint_number=step)
