"""Where a pretraining run keeps its state, and how it starts again.

Checkpoints (`tf.train.Checkpoint`: model, optimizer with its step and slots,
input iterator where it can be saved; under JAX, tf.Variable copies of the
model's and optimizer's variables: `compute.jax_state`) go to `<output_dir>/checkpoints` every
`save_checkpoints_steps`; TensorFlow writes each to temporary files and
renames them, and the `checkpoint` index is replaced atomically after, so a
kill at any moment leaves the last complete checkpoint usable. Running the
same command again resumes from it; a fresh run may warm-start from
`--init_checkpoint` (weights only, as the original).

`best/` (highest masked_lm_accuracy) and `final/` are our model directories
(config + weights + vocabulary), published whole (`albert_tf.publish`).
"""

import glob
import json
import os
import shutil
import time
from typing import Dict, Optional

import tensorflow as tf

from albert_tf import formats
from albert_tf.json_records import read_json, write_json
from albert_tf.pretraining import batch_binding
from albert_tf.pretraining.loop import PretrainingLoop
from albert_tf.pretraining.settings import PretrainingError
from albert_tf.progress import summary_writer, write_scalars
from albert_tf.publish import staged_dir
from albert_tf.run_layout import (
    BEST_DIR,
    CHECKPOINT_DIR,
    EVAL_RESULTS_FILE,
    EVAL_SUMMARY_DIR,
    FINAL_DIR,
    PRETRAINING_BEST_FILE,
)

CONFIG_RECORD = "albert_config.json"  # the config a run's checkpoints were made with


def check_same_config(output_dir: str, config_dict: dict) -> None:
    """Raises `PretrainingError` when the run's checkpoints were made with another config (they would not fit)."""
    recorded = os.path.join(output_dir, CHECKPOINT_DIR, CONFIG_RECORD)
    if not os.path.exists(recorded):
        return
    before = read_json(recorded)
    changed = sorted(k for k in set(before) | set(config_dict) if before.get(k) != config_dict.get(k))
    if changed:
        raise PretrainingError(
            f"{output_dir} was trained with another config ({', '.join(changed)} differ: "
            f"{recorded}); resume with that config, or use a new --output_dir"
        )


def checkpoint_step(path: str) -> int:
    """The step of a checkpoint path (`.../ckpt-<step>`)."""
    return int(path.rsplit("-", 1)[1])


class CheckpointPolicy:
    """Saves, resumes and publishes the models of one `PretrainingLoop`.

    Args:
        loop: the run's loop (its model, optimizer and iterator are saved).
        init_checkpoint: any model `albert_tf.formats` reads, used by a fresh run only.
        say: prints a message (the chief's).
        tokenizer: the run's tokenizer, saved into `best/` and `final/`.
    """

    def __init__(self, loop: PretrainingLoop, init_checkpoint: Optional[str] = None, say=print, tokenizer=None):
        self.loop = loop
        self.tokenizer = tokenizer  # published with best/ and final/, so every model carries its vocabulary
        self.settings = loop.settings
        self.init_checkpoint = init_checkpoint
        self.say = say
        self.checkpoint_dir = os.path.join(self.settings.output_dir, CHECKPOINT_DIR)
        self.checkpoint = tf.train.Checkpoint(**loop.trackables())
        self.manager = tf.train.CheckpointManager(
            self.checkpoint,
            self._checkpoint_dir_for_this_task(),
            max_to_keep=self.settings.keep_checkpoint_max,
            checkpoint_name="ckpt",
        )
        self.unconfirmed: Optional[str] = None  # saved, but no finite loss has been computed from it yet
        self.eval_writer = None  # TensorBoard's output_dir/eval, opened at the first evaluation

    def _writes_checkpoints(self) -> bool:
        """The chief writes; so does every TensorFlow worker (a save is a collective there: copies discarded)."""
        return self.loop.chief or self.loop.compute.cluster_resolver is not None

    def _checkpoint_dir_for_this_task(self) -> str:
        if self.loop.chief or not self._writes_checkpoints():  # JAX's other processes read the chief's
            return self.checkpoint_dir
        # Every worker must take part in a save; only the chief's copy is kept.
        resolver = self.loop.compute.cluster_resolver
        return os.path.join(self.settings.output_dir, f".worker_{resolver.task_type}_{resolver.task_id}")

    def latest(self) -> Optional[str]:
        return tf.train.latest_checkpoint(self.checkpoint_dir)

    def restore_or_initialize(self, config_dict: Optional[dict] = None) -> str:
        """Resumes from our latest readable checkpoint, else warm-starts from `init_checkpoint`; says which.

        A run records its config in `checkpoints/albert_config.json`; resuming with another config is
        refused (the checkpoint would not fit). An unreadable latest checkpoint (a truncated file) falls
        back to the previous one.
        """
        self._check_same_config(config_dict)
        candidates = list(reversed(self.manager.checkpoints)) if self.loop.chief else [self.latest()]
        candidates = [c for c in candidates if c]
        if self.loop.chief and candidates:
            batch_binding.check_same_objective(self.settings, self.checkpoint_dir, self.loop.objective.name)
            batch_binding.check_same_batch(
                self.settings, self.checkpoint_dir, self.loop.rows_hold, self.loop.compute.name
            )
        skipped = []
        for path in candidates:
            try:
                self.checkpoint.restore(path).assert_existing_objects_matched()
                self.loop.after_restore()
            except (tf.errors.OpError, ValueError, AssertionError, IndexError) as error:  # IndexError: truncated
                skipped.append(f"{os.path.basename(path)} ({str(error).strip().splitlines()[0][:200]})")
                continue
            note = f" (unreadable, skipped: {'; '.join(skipped)})" if skipped else ""
            message = f"resumed from {path} at step {self.loop.step}{note}"
            break
        else:
            if candidates:
                raise PretrainingError(
                    f"{self.checkpoint_dir}: no checkpoint can be restored: {'; '.join(skipped)}. "
                    "Use a new --output_dir to start again"
                )
            message = self._warm_start()
        self._record_config(config_dict)
        if self.loop.chief:
            batch_binding.record_batch(
                self.settings,
                self.checkpoint_dir,
                self.loop.rows_hold,
                self.loop.compute.name,
                self.loop.objective.name,
            )
        self.loop.ensure_iterator()
        return message

    def _check_same_config(self, config_dict: Optional[dict]):
        if config_dict is not None and self.loop.chief:
            check_same_config(self.settings.output_dir, config_dict)

    def _record_config(self, config_dict: Optional[dict]):
        """After a successful start only, so a failed warm start leaves no record to refuse a retry with."""
        recorded = os.path.join(self.checkpoint_dir, CONFIG_RECORD)
        if config_dict is None or not self.loop.chief or os.path.exists(recorded):
            return
        write_json(recorded, config_dict, sort_keys=True)

    def _warm_start(self) -> str:
        if not self.init_checkpoint:
            return "initialized from scratch"
        model = self.loop.model
        # --init_from_group0: every group starts from the checkpoint's group 0 (the paper's way to grow G).
        from_group0 = self.settings.init_from_group0
        fresh = []
        try:
            try:
                report = formats.load_weights(model, self.init_checkpoint, from_group0)
            except formats.NoHeadsError:  # an encoder alone: the heads start fresh, as the original
                report = formats.load_weights(model.backbone, self.init_checkpoint, from_group0)
                fresh = ["the heads start fresh (it holds the encoder only)"]
        except formats.CheckpointError as error:
            raise PretrainingError(f"--init_checkpoint {error}") from None
        said = "".join(f"; {line}" for line in fresh + report.fresh_heads)  # e.g. PL-BERT's word head of other words
        return f"initialized from {self.init_checkpoint} (weights only, as the original){said}"

    def save(self, step: int, evaluate: bool = True) -> None:
        """Writes the checkpoint of `step` (unconfirmed until a finite loss follows); with `do_eval`, keeps the best.

        `evaluate=False`: no evaluation (a preempted run saves within its grace period).
        """
        if not self.loop.weights_are_finite():
            self.discard_unconfirmed()
            raise PretrainingError(
                f"the weights are not finite at step {step}; nothing saved. Last good checkpoint: "
                f"{self.latest() or '(none yet)'}; lower --learning_rate"
            )
        try:
            self.loop.before_save()
            if self._writes_checkpoints():
                self.unconfirmed = self.manager.save(checkpoint_number=step)
        except (tf.errors.OpError, OSError) as error:
            path = os.path.join(self._checkpoint_dir_for_this_task(), f"ckpt-{step}")
            # TensorFlow writes into `<path>_temp/` first; a failed save leaves it (and fills the disk).
            for leftover in tf.io.gfile.glob(glob.escape(path) + "_temp*"):
                if tf.io.gfile.isdir(leftover):
                    tf.io.gfile.rmtree(leftover)
                else:
                    tf.io.gfile.remove(leftover)
            previous = self.latest()
            kept = f"the previous checkpoint {previous} is intact" if previous else "no earlier checkpoint exists"
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise PretrainingError(
                f"{path}: saving the checkpoint of step {step} failed ({reason}); {kept}; free space (or fix "
                "the directory) and run the same command again"
            ) from None
        self.loop.wait_for_all(f"checkpoint {step}")  # JAX's other processes go on once the chief's is written
        if evaluate and self.settings.do_eval and step != self.settings.num_train_steps:
            self.evaluate_and_keep_best()

    def confirm(self) -> None:
        """A finite loss was computed from the current weights: the newest checkpoint is good."""
        self.unconfirmed = None

    def discard_unconfirmed(self) -> Optional[str]:
        """Deletes the checkpoint no finite loss has confirmed; returns the last good one (or None)."""
        if self.unconfirmed and self.loop.chief:
            for path in tf.io.gfile.glob(self.unconfirmed + ".*"):
                tf.io.gfile.remove(path)
            remaining = [c for c in self.manager.checkpoints if c != self.unconfirmed]
            if remaining:
                tf.compat.v1.train.update_checkpoint_state(self.checkpoint_dir, remaining[-1], remaining)
            else:
                state = os.path.join(self.checkpoint_dir, "checkpoint")
                if os.path.exists(state):
                    os.remove(state)
        self.unconfirmed = None
        return self.latest()

    def newest_before(self, step: int) -> Optional[str]:
        """The newest kept checkpoint of a step before `step` (the weights before a divergence), or None."""
        older = [path for path in self.manager.checkpoints if checkpoint_step(path) < step]
        return older[-1] if older else None

    def roll_back(self, before_step: int) -> Optional[str]:
        """Restores the newest checkpoint saved before `before_step` and deletes the newer ones (a diverged
        trajectory); returns its path, or None (nothing changed) when there is none."""
        older = [path for path in self.manager.checkpoints if checkpoint_step(path) < before_step]
        if not older:
            return None
        target = older[-1]
        self.checkpoint.restore(target).assert_existing_objects_matched()
        self.loop.after_restore()
        for path in self.manager.checkpoints:
            if checkpoint_step(path) > checkpoint_step(target):
                for name in tf.io.gfile.glob(path + ".*"):
                    tf.io.gfile.remove(name)
        state = tf.train.get_checkpoint_state(self.manager.directory)
        saved_at = dict(zip(state.all_model_checkpoint_paths, state.all_model_checkpoint_timestamps))
        # With their save times: a manager reads back only the checkpoints whose time it knows.
        tf.compat.v1.train.update_checkpoint_state(
            self.manager.directory,
            target,
            older,
            all_model_checkpoint_timestamps=[saved_at.get(path, time.time()) for path in older],
            last_preserved_timestamp=state.last_preserved_timestamp,
        )
        # A fresh manager reads the pruned list back (the old one would still count the deleted ones).
        self.manager = tf.train.CheckpointManager(
            self.checkpoint,
            self.manager.directory,
            max_to_keep=self.settings.keep_checkpoint_max,
            checkpoint_name="ckpt",
        )
        self.unconfirmed = None
        return target

    def evaluate_and_keep_best(self) -> Dict[str, float]:
        """Evaluates; keeps the weights with the best accuracy of the objective's masked task (ALBERT:
        masked_lm_accuracy, PL-BERT: phoneme_accuracy) in `best/`."""
        best_metric = self.loop.objective.bar_metrics[1]
        metrics = self.loop.evaluate()
        metrics["global_step"] = self.loop.step
        if not self.loop.chief:
            return metrics
        output_dir = self.settings.output_dir
        with open(os.path.join(output_dir, EVAL_RESULTS_FILE), "a") as f:
            f.write(json.dumps(metrics) + "\n")
        if self.eval_writer is None:
            self.eval_writer = summary_writer(output_dir, EVAL_SUMMARY_DIR)
        write_scalars(self.eval_writer, metrics["global_step"], metrics)
        best_file = os.path.join(output_dir, BEST_DIR, PRETRAINING_BEST_FILE)
        best = read_json(best_file) if os.path.exists(best_file) else None
        if best is None or metrics[best_metric] > best[best_metric]:
            with staged_dir(os.path.join(output_dir, BEST_DIR)) as staging:
                formats.save(self.loop.plain_copy(), staging, tokenizer=self.tokenizer)
                write_json(os.path.join(staging, PRETRAINING_BEST_FILE), metrics)
        shown = ", ".join(f"{k} {metrics[k]:.4f}" for k in self.loop.objective.bar_metrics[1:] + ("loss",))
        self.say(f"eval at step {metrics['global_step']}: {shown}")
        return metrics

    def write_final(self) -> Optional[str]:
        """`final/`: config, weights and the tokenizer (vocabulary + tokenizer.json), and the objective's
        exports beside them (PL-BERT: `final/plbert/`, StyleTTS 2's layout); chief only."""
        if not self.loop.chief:
            return None
        final = os.path.join(self.settings.output_dir, FINAL_DIR)
        with staged_dir(final) as staging:
            model = self.loop.plain_copy()
            formats.save(model, staging, tokenizer=self.tokenizer)
            self.loop.objective.write_beside_final(model, staging, self.loop.step)
        return final

    def clean_worker_dirs(self):
        if not self.loop.chief and self._writes_checkpoints():
            shutil.rmtree(self._checkpoint_dir_for_this_task(), ignore_errors=True)
