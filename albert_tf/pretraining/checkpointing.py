"""Where a pretraining run keeps its state, and how it starts again.

Checkpoints (`tf.train.Checkpoint`: model, optimizer with its step and slots,
input iterator where it can be saved) go to `<output_dir>/checkpoints` every
`save_checkpoints_steps`; TensorFlow writes each to temporary files and
renames them, and the `checkpoint` index is replaced atomically after, so a
kill at any moment leaves the last complete checkpoint usable. Running the
same command again resumes from it; a fresh run may warm-start from
`--init_checkpoint` (weights only, as the original).

`best/` (highest masked_lm_accuracy) and `final/` are our model directories
(config + weights + vocabulary), published whole (`albert_tf.publish`).
"""

import json
import os
import shutil
from typing import Dict, Optional

import tensorflow as tf

from albert_tf import checkpoints as checkpoints_lib
from albert_tf.pretraining.loop import PretrainingLoop
from albert_tf.pretraining.settings import TrainingError
from albert_tf.publish import staged_dir

CHECKPOINT_DIR = "checkpoints"
BEST_DIR = "best"
FINAL_DIR = "final"


class CheckpointPolicy:
    """Saves, resumes and publishes the models of one `PretrainingLoop`.

    Args:
        loop: the run's loop (its model, optimizer and iterator are saved).
        init_checkpoint: Google's TF1 checkpoint or ours, used by a fresh run only.
        say: prints a message (the chief's).
    """

    def __init__(self, loop: PretrainingLoop, init_checkpoint: Optional[str] = None, say=print):
        self.loop = loop
        self.settings = loop.settings
        self.init_checkpoint = init_checkpoint
        self.say = say
        self.checkpoint_dir = os.path.join(self.settings.output_dir, CHECKPOINT_DIR)
        self.checkpoint = tf.train.Checkpoint(**loop.trackables())
        self.manager = tf.train.CheckpointManager(self.checkpoint, self._checkpoint_dir_for_this_task(),
                                                  max_to_keep=self.settings.keep_checkpoint_max,
                                                  checkpoint_name="ckpt")

    def _checkpoint_dir_for_this_task(self) -> str:
        if self.loop.chief:
            return self.checkpoint_dir
        # Every worker must take part in a save; only the chief's copy is kept.
        resolver = self.loop.strategy.cluster_resolver
        return os.path.join(self.settings.output_dir, f".worker_{resolver.task_type}_{resolver.task_id}")

    def latest(self) -> Optional[str]:
        return tf.train.latest_checkpoint(self.checkpoint_dir)

    def restore_or_initialize(self) -> str:
        """Resumes from our latest checkpoint, else warm-starts from `init_checkpoint`; says which."""
        latest = self.latest()
        if latest:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
            message = f"resumed from {latest} at step {self.loop.step}"
        elif self.init_checkpoint:
            model = self.loop.model
            try:
                checkpoints_lib.load_checkpoint(model, self.init_checkpoint)
            except checkpoints_lib.CheckpointError as error:
                if "backbone only" not in str(error):
                    raise TrainingError(f"--init_checkpoint does not fit --albert_config_file: {error}") from None
                checkpoints_lib.load_checkpoint(model.backbone, self.init_checkpoint)
            message = f"initialized from {self.init_checkpoint} (weights only, as the original)"
        else:
            message = "initialized from scratch"
        self.loop.ensure_iterator()
        return message

    def save(self, step: int) -> None:
        """Writes the checkpoint of `step`; with `do_eval`, evaluates and keeps the best."""
        try:
            self.manager.save(checkpoint_number=step)
        except (tf.errors.OpError, OSError) as error:
            raise TrainingError(
                f"saving the checkpoint of step {step} failed ({type(error).__name__}: {error}); "
                f"the previous checkpoint {self.latest()} is intact") from None
        if self.settings.do_eval and step != self.settings.num_train_steps:
            self.evaluate_and_keep_best()

    def evaluate_and_keep_best(self) -> Dict[str, float]:
        """Evaluates; keeps the weights with the best masked_lm_accuracy in `best/`."""
        metrics = self.loop.evaluate()
        metrics["global_step"] = self.loop.step
        if not self.loop.chief:
            return metrics
        output_dir = self.settings.output_dir
        with open(os.path.join(output_dir, "eval_results.txt"), "a") as f:
            f.write(json.dumps(metrics) + "\n")
        best_file = os.path.join(output_dir, BEST_DIR, "best.json")
        best = None
        if os.path.exists(best_file):
            with open(best_file) as f:
                best = json.load(f)
        if best is None or metrics["masked_lm_accuracy"] > best["masked_lm_accuracy"]:
            with staged_dir(os.path.join(output_dir, BEST_DIR)) as staging:
                checkpoints_lib.save_model_dir(self.loop.plain_copy(), staging)
                with open(os.path.join(staging, "best.json"), "w") as f:
                    json.dump(metrics, f, indent=2)
        self.say("eval at step {global_step}: masked_lm_accuracy {masked_lm_accuracy:.4f}, "
                 "sentence_order_accuracy {sentence_order_accuracy:.4f}, loss {loss:.4f}".format(**metrics))
        return metrics

    def write_final(self, vocabulary_files: Dict[str, str]) -> Optional[str]:
        """`final/`: config, weights and the vocabulary files (`{name in final/: source path}`); chief only."""
        if not self.loop.chief:
            return None
        final = os.path.join(self.settings.output_dir, FINAL_DIR)
        with staged_dir(final) as staging:
            checkpoints_lib.save_model_dir(self.loop.plain_copy(), staging)
            for name, source in vocabulary_files.items():
                shutil.copy(source, os.path.join(staging, name))
        return final

    def clean_worker_dirs(self):
        if not self.loop.chief:
            shutil.rmtree(self._checkpoint_dir_for_this_task(), ignore_errors=True)
