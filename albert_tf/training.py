"""The pretraining loop on tf.distribute: steps, checkpoints, resume, eval, export.

A custom loop rather than `Model.fit`, because a run must resume exactly where
it stopped, data iterator position included, and Keras' callbacks cannot
checkpoint the input iterator. Per optimizer step:

  1. each replica computes gradients of its batch, split into
     `grad_accum_steps` micro-batches whose gradients are summed;
  2. the gradients of all replicas are summed (all-reduce);
  3. the summed gradient is clipped to global norm 1.0 (the original's order:
     clip once, after aggregation);
  4. LAMB/AdamW applies it.

Checkpoints (`tf.train.Checkpoint`: model, optimizer with its step and slots,
input iterator) are written every `save_checkpoints_steps`; TensorFlow writes
each to temporary files and renames them, and the `checkpoint` index is
replaced atomically after, so a kill at any moment leaves the last complete
checkpoint usable. Running the same command again resumes from it.
"""

import dataclasses
import hashlib
import json
import logging
import math
import os
import shutil
import time
from typing import Dict, List, Optional

import keras
import numpy as np
import tensorflow as tf

from albert_tf import checkpoints as checkpoints_lib
from albert_tf.config import AlbertConfig
from albert_tf.inputs import pretraining as inputs_lib
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.optimization import create_optimizer

STRATEGIES = ("default", "mirrored", "multi_worker", "tpu")
PRECISIONS = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
CHECKPOINT_DIR = "checkpoints"
BEST_DIR = "best"
FINAL_DIR = "final"
SAVED_MODEL_DIR = "saved_model"
STAT_KEYS = ("mlm_nll", "mlm_weight", "mlm_correct", "sop_nll", "sop_correct", "sop_count", "loss")


class TrainingError(RuntimeError):
    """A run that cannot start or continue; the message says why and what is kept."""


@dataclasses.dataclass
class TrainSettings:
    """The pretraining flags (names and defaults as the original where it has them)."""

    output_dir: str
    train_batch_size: int = 4096
    eval_batch_size: int = 64
    max_seq_length: int = 512
    max_predictions_per_seq: int = 20
    num_train_steps: int = 125000
    num_warmup_steps: int = 3125
    learning_rate: float = 0.00176
    poly_power: float = 1.0
    optimizer: str = "lamb"
    save_checkpoints_steps: int = 5000
    keep_checkpoint_max: int = 5
    do_eval: bool = False
    max_eval_steps: int = 100
    grad_accum_steps: int = 1
    mixed_precision: str = "float32"
    jit_compile: bool = False
    seed: int = 12345
    deterministic: bool = False
    log_every_steps: int = 10
    shuffle_buffer: int = 1000
    eval_at_start: bool = False
    verbose: bool = True


def make_strategy(name: str, tpu: Optional[str] = None) -> tf.distribute.Strategy:
    """The tf.distribute strategy for `--strategy` (multi_worker reads TF_CONFIG)."""
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise TrainingError("--strategy=multi_worker needs TF_CONFIG (cluster spec and this task)")
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or "")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise TrainingError(f"--strategy must be one of {STRATEGIES}, got {name!r}")


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    cluster = resolver.cluster_spec().as_dict()
    if "chief" in cluster:
        return resolver.task_type == "chief"
    return resolver.task_type == "worker" and resolver.task_id == 0


def _batch_stats(outputs, labels) -> Dict[str, tf.Tensor]:
    """Sums (not means) over the batch, so replicas and micro-batches add up."""
    mlm_logits, sop_logits = outputs["mlm_logits"], outputs["sop_logits"]
    ids = labels["masked_lm_ids"]
    weights = labels["masked_lm_weights"]
    log_probs = tf.nn.log_softmax(mlm_logits, axis=-1)
    nll = -tf.squeeze(tf.gather(log_probs, ids[..., None], batch_dims=2), -1)
    correct = tf.cast(tf.equal(tf.argmax(mlm_logits, -1, output_type=tf.int32), ids), tf.float32)
    sop_labels = tf.reshape(labels["next_sentence_labels"], [-1])
    sop_nll = -tf.gather(tf.nn.log_softmax(sop_logits, -1), sop_labels[:, None], batch_dims=1)
    sop_correct = tf.cast(tf.equal(tf.argmax(sop_logits, -1, output_type=tf.int32), sop_labels), tf.float32)
    return {"mlm_nll": tf.reduce_sum(weights * nll), "mlm_weight": tf.reduce_sum(weights),
            "mlm_correct": tf.reduce_sum(weights * correct), "sop_nll": tf.reduce_sum(sop_nll),
            "sop_correct": tf.reduce_sum(sop_correct), "sop_count": tf.cast(tf.size(sop_labels), tf.float32)}


def _loss(stats):
    """The original loss: Σw·nll/(Σw + 1e-5) + mean SOP NLL."""
    return stats["mlm_nll"] / (stats["mlm_weight"] + 1e-5) + stats["sop_nll"] / stats["sop_count"]


def summarize(stats: Dict[str, float], steps: int) -> Dict[str, float]:
    """Metric values from summed stats (names as the original's eval)."""
    return {
        "loss": stats["loss"] / max(steps, 1),
        "masked_lm_loss": stats["mlm_nll"] / max(stats["mlm_weight"], 1e-5),
        "masked_lm_accuracy": stats["mlm_correct"] / max(stats["mlm_weight"], 1e-5),
        "sentence_order_loss": stats["sop_nll"] / max(stats["sop_count"], 1),
        "sentence_order_accuracy": stats["sop_correct"] / max(stats["sop_count"], 1),
    }


class PretrainingRun:
    """One pretraining job: model, data, optimizer and checkpoints under a strategy.

    Args:
        strategy: from `make_strategy`.
        albert_config: the model's `AlbertConfig`.
        settings: `TrainSettings`.
        train_files / eval_files: TFRecord files from data_prep.
        metadata: the data's metadata (checked against the flags and config).
        init_checkpoint: Google's TF1 checkpoint or ours, for a fresh run only.
        spm_model_file: copied into the exports as an asset.
        vocab_file: a WordPiece vocab.txt instead of `spm_model_file`.
    """

    def __init__(self, strategy, albert_config: AlbertConfig, settings: TrainSettings, train_files: List[str],
                 metadata: dict, eval_files: Optional[List[str]] = None, init_checkpoint: Optional[str] = None,
                 spm_model_file: Optional[str] = None, vocab_file: Optional[str] = None):
        self.strategy = strategy
        self.config = albert_config
        self.settings = s = settings
        self.train_files = train_files
        self.eval_files = eval_files or train_files  # the original evaluates on the training files
        self.metadata = metadata
        self.init_checkpoint = init_checkpoint
        self.spm_model_file = spm_model_file
        self.vocab_file = vocab_file
        self.chief = is_chief(strategy)
        replicas = strategy.num_replicas_in_sync
        if s.train_batch_size % (replicas * s.grad_accum_steps):
            raise TrainingError(f"--train_batch_size {s.train_batch_size} must divide by replicas ({replicas}) × "
                                f"--grad_accum_steps ({s.grad_accum_steps})")
        if s.mixed_precision not in PRECISIONS:
            raise TrainingError(f"--mixed_precision must be one of {sorted(PRECISIONS)}")
        with strategy.scope():
            backbone = AlbertBackbone.from_albert_config(albert_config, dtype=PRECISIONS[s.mixed_precision])
            self.model = AlbertPretrainer(backbone)
            optimizer = create_optimizer(s.optimizer, s.learning_rate, s.num_train_steps, s.num_warmup_steps,
                                         s.poly_power)
            if s.mixed_precision == "float16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            self.optimizer = optimizer
            self.optimizer.build(self.model.trainable_variables)
        self.checkpoint_dir = os.path.join(s.output_dir, CHECKPOINT_DIR)
        # One worker with one replica (CPU, one GPU, one TPU core excepted): a plain
        # tf.data iterator, saved in the checkpoint. Otherwise tf.distribute's
        # iterators cannot be checkpointed, so a resumed run skips the batches
        # already used (the pipeline is deterministic for a seed).
        self.checkpoints_iterator = strategy.num_replicas_in_sync == 1 and not isinstance(
            strategy, (tf.distribute.MultiWorkerMirroredStrategy, tf.distribute.TPUStrategy))
        self._train_iterator = self._make_train_iterator(0) if self.checkpoints_iterator else None
        tracked = {"model": self.model, "optimizer": self.optimizer}
        if self.checkpoints_iterator:
            tracked["train_iterator"] = self._train_iterator
        self.checkpoint = tf.train.Checkpoint(**tracked)
        self.manager = tf.train.CheckpointManager(self.checkpoint, self._checkpoint_dir_for_this_task(),
                                                  max_to_keep=s.keep_checkpoint_max, checkpoint_name="ckpt")
        self._train_step = self._make_train_step()
        self._eval_step = None

    # --- set-up -----------------------------------------------------------------------------------

    def _make_train_iterator(self, skip_batches: int):
        s = self.settings
        if self.checkpoints_iterator:
            return iter(inputs_lib.pretraining_dataset(
                self.train_files, self.metadata, s.train_batch_size, is_training=True, seed=s.seed,
                shuffle_buffer=s.shuffle_buffer, skip_batches=skip_batches))
        return iter(self.strategy.distribute_datasets_from_function(
            lambda context: inputs_lib.pretraining_dataset(
                self.train_files, self.metadata, context.get_per_replica_batch_size(s.train_batch_size),
                is_training=True, seed=s.seed, input_context=context, shuffle_buffer=s.shuffle_buffer,
                skip_batches=skip_batches)))

    def _checkpoint_dir_for_this_task(self) -> str:
        if self.chief:
            return self.checkpoint_dir
        # Every worker must take part in a save; only the chief's copy is kept.
        resolver = self.strategy.cluster_resolver
        return os.path.join(self.settings.output_dir, f".worker_{resolver.task_type}_{resolver.task_id}")

    @property
    def step(self) -> int:
        return int(self.optimizer.iterations.numpy())

    def restore_or_initialize(self) -> str:
        """Resumes from our latest checkpoint, else warm-starts from `init_checkpoint`."""
        message = self._restore()
        if self._train_iterator is None:
            self._train_iterator = self._make_train_iterator(skip_batches=self.step)
        return message

    def _restore(self) -> str:
        latest = tf.train.latest_checkpoint(self.checkpoint_dir)
        if latest:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
            return f"resumed from {latest} at step {self.step}"
        if self.init_checkpoint:
            try:
                checkpoints_lib.load_checkpoint(self.model, self.init_checkpoint)
            except checkpoints_lib.CheckpointError as error:
                if "backbone only" not in str(error):
                    raise TrainingError(f"--init_checkpoint does not fit --albert_config_file: {error}") from None
                checkpoints_lib.load_checkpoint(self.model.backbone, self.init_checkpoint)
            return f"initialized from {self.init_checkpoint} (weights only, as the original)"
        return "initialized from scratch"

    # --- steps --------------------------------------------------------------------------------------

    def _make_train_step(self):
        s, strategy, model, optimizer = self.settings, self.strategy, self.model, self.optimizer
        accum = s.grad_accum_steps
        replicas = strategy.num_replicas_in_sync
        loss_scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)

        def micro_step(inputs, labels):
            with tf.GradientTape() as tape:
                outputs = model(inputs, training=True)
                stats = _batch_stats(outputs, labels)
                loss = _loss(stats)
                # Gradients are summed over micro-batches and replicas: pre-divide.
                scaled = loss / float(accum * replicas)
                if loss_scaled:
                    scaled = optimizer.scale_loss(scaled)
            # Embedding gradients come as IndexedSlices; LAMB/AdamW update every row anyway.
            grads = [tf.convert_to_tensor(g) for g in tape.gradient(scaled, model.trainable_variables)]
            stats["loss"] = loss / float(accum * replicas)
            return grads, stats

        def replica_step(inputs, labels):
            grads, stats = None, None
            for i in range(accum):  # unrolled: accum is small and static
                chunk = lambda t: tf.split(t, accum, axis=0)[i]  # noqa: E731
                g, st = micro_step(tf.nest.map_structure(chunk, inputs), tf.nest.map_structure(chunk, labels))
                grads = g if grads is None else [a + b for a, b in zip(grads, g)]
                stats = st if stats is None else {k: stats[k] + st[k] for k in st}
            return grads, stats

        if s.jit_compile:
            replica_step = tf.function(replica_step, jit_compile=True)

        @tf.function
        def train_step(iterator):
            inputs, labels = next(iterator)
            grads, stats = strategy.run(replica_step, args=(inputs, labels))
            grads = [strategy.reduce(tf.distribute.ReduceOp.SUM, g, axis=None) for g in grads]
            stats = {k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) for k, v in stats.items()}
            if loss_scaled:
                scale = tf.cast(optimizer.scale_loss(1.0), tf.float32)
                grads = [g / scale for g in grads]
            grads, norm = tf.clip_by_global_norm(grads, 1.0)
            if loss_scaled:  # LossScaleOptimizer unscales (and skips non-finite steps) itself
                grads = [g * scale for g in grads]
            optimizer.apply(grads, model.trainable_variables)
            stats["grad_norm"] = norm
            return stats

        return train_step

    def _make_eval_step(self):
        strategy, model = self.strategy, self.model

        def replica_eval(inputs, labels):
            stats = _batch_stats(model(inputs, training=False), labels)
            stats["loss"] = _loss(stats) / float(strategy.num_replicas_in_sync)
            return stats

        @tf.function
        def eval_step(iterator):
            inputs, labels = next(iterator)
            stats = strategy.run(replica_eval, args=(inputs, labels))
            return {k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) for k, v in stats.items()}

        return eval_step

    def evaluate(self) -> Dict[str, float]:
        """`max_eval_steps` batches of the eval files, as the original's eval."""
        s = self.settings
        if self._eval_step is None:
            self._eval_step = self._make_eval_step()
        iterator = iter(self.strategy.distribute_datasets_from_function(
            lambda context: inputs_lib.pretraining_dataset(
                self.eval_files, self.metadata, context.get_per_replica_batch_size(s.eval_batch_size),
                is_training=False, input_context=context)))
        totals = dict.fromkeys(STAT_KEYS, 0.0)
        for _ in range(s.max_eval_steps):
            stats = self._eval_step(iterator)
            for k in STAT_KEYS:
                totals[k] += float(stats[k])
        return summarize(totals, s.max_eval_steps)

    # --- the loop -----------------------------------------------------------------------------------

    def train(self) -> dict:
        """Trains to `num_train_steps`, checkpointing, evaluating and logging; returns a summary."""
        s = self.settings
        start_message = self.restore_or_initialize()
        self._log(start_message)
        summary = {"start_step": self.step, "history": []}
        if s.eval_at_start:
            summary["eval_start"] = self.evaluate()
        writer = tf.summary.create_file_writer(os.path.join(s.output_dir, "train")) if self.chief else None
        if self.step >= s.num_train_steps:
            self._log(f"already at step {self.step} ≥ --num_train_steps {s.num_train_steps}: nothing to train")
        progress = keras.utils.Progbar(s.num_train_steps, stateful_metrics=["lr", "steps/s"],
                                       verbose=1 if (s.verbose and self.chief) else 0)
        progress.update(self.step)
        window = dict.fromkeys(STAT_KEYS, 0.0)
        window_steps, window_start = 0, time.perf_counter()
        while self.step < s.num_train_steps:
            stats = self._train_step(self._train_iterator)
            loss = float(stats["loss"])
            if not math.isfinite(loss):
                raise TrainingError(
                    f"loss is {loss} at step {self.step}; stopped without saving. The last good checkpoint "
                    f"is {tf.train.latest_checkpoint(self.checkpoint_dir) or '(none yet)'}; try a lower "
                    "--learning_rate or --mixed_precision=float32")
            for k in STAT_KEYS:
                window[k] += float(stats[k])
            window_steps += 1
            step = self.step
            if step % s.log_every_steps == 0 or step == s.num_train_steps:
                elapsed = time.perf_counter() - window_start
                metrics = summarize(window, window_steps)
                metrics["lr"] = float(self.optimizer.learning_rate)
                metrics["steps/s"] = window_steps / elapsed
                summary["history"].append({"step": step, **metrics})
                progress.update(step, [(k, v) for k, v in metrics.items()
                                       if k in ("loss", "masked_lm_accuracy", "sentence_order_accuracy", "lr",
                                                "steps/s")])
                if writer:
                    with writer.as_default(step=step):
                        for k, v in metrics.items():
                            tf.summary.scalar(k.replace("/", "_per_"), v)
                window = dict.fromkeys(STAT_KEYS, 0.0)
                window_steps, window_start = 0, time.perf_counter()
            if step % s.save_checkpoints_steps == 0 or step == s.num_train_steps:
                self.save(step)
        if writer:
            writer.flush()
        summary["end_step"] = self.step
        summary["replicas"] = self.strategy.num_replicas_in_sync
        summary["weights_sha256"] = self.weights_fingerprint()
        if s.do_eval:
            summary["eval"] = self._evaluate_and_keep_best()
        self._clean_worker_dirs()
        return summary

    def weights_fingerprint(self) -> str:
        """sha256 of every weight's bytes: equal on all workers of a synchronous run."""
        digest = hashlib.sha256()
        for weight in self.model.get_weights():
            digest.update(np.ascontiguousarray(weight).tobytes())
        return digest.hexdigest()

    def time_steps(self, steps: int) -> float:
        """Seconds per training step, measured over `steps` (after one traced step)."""
        if self._train_iterator is None:
            self._train_iterator = self._make_train_iterator(skip_batches=self.step)
        self._train_step(self._train_iterator)
        start = time.perf_counter()
        for _ in range(steps):
            self._train_step(self._train_iterator)
        return (time.perf_counter() - start) / steps

    def save(self, step: int) -> Optional[str]:
        try:
            path = self.manager.save(checkpoint_number=step)
        except (tf.errors.OpError, OSError) as error:
            raise TrainingError(
                f"saving the checkpoint of step {step} failed ({type(error).__name__}: {error}); "
                f"the previous checkpoint {tf.train.latest_checkpoint(self.checkpoint_dir)} is intact") from None
        if self.settings.do_eval and step != self.settings.num_train_steps:
            self._evaluate_and_keep_best()
        return path

    def _evaluate_and_keep_best(self) -> Dict[str, float]:
        """Evaluates; keeps the weights with the best masked_lm_accuracy in `best/`."""
        metrics = self.evaluate()
        metrics["global_step"] = self.step
        if not self.chief:
            return metrics
        s = self.settings
        with open(os.path.join(s.output_dir, "eval_results.txt"), "a") as f:
            f.write(json.dumps(metrics) + "\n")
        best_file = os.path.join(s.output_dir, BEST_DIR, "best.json")
        best = json.load(open(best_file)) if os.path.exists(best_file) else None
        if best is None or metrics["masked_lm_accuracy"] > best["masked_lm_accuracy"]:
            staging = os.path.join(s.output_dir, ".best_staging")
            shutil.rmtree(staging, ignore_errors=True)
            checkpoints_lib.save_model_dir(self._plain_copy(), staging)
            with open(os.path.join(staging, "best.json"), "w") as f:
                json.dump(metrics, f, indent=2)
            _replace_dir(staging, os.path.join(s.output_dir, BEST_DIR))
        self._log("eval at step {global_step}: masked_lm_accuracy {masked_lm_accuracy:.4f}, "
                  "sentence_order_accuracy {sentence_order_accuracy:.4f}, loss {loss:.4f}".format(**metrics))
        return metrics

    def _plain_copy(self) -> AlbertPretrainer:
        """The model outside the strategy (float32), for saving and export."""
        backbone = AlbertBackbone.from_albert_config(self.config)  # keeps gap_size etc. for final/
        copy = AlbertPretrainer(backbone)
        copy.set_weights([np.asarray(w) for w in self.model.get_weights()])
        return copy

    def finish(self, export: bool = True) -> dict:
        """Writes `final/` (our checkpoint format) and the SavedModels; chief only."""
        if not self.chief:
            return {}
        from albert_tf import export as export_lib

        s = self.settings
        model = self._plain_copy()
        final = os.path.join(s.output_dir, FINAL_DIR)
        staging = final + ".staging"
        shutil.rmtree(staging, ignore_errors=True)
        checkpoints_lib.save_model_dir(model, staging)
        if self.spm_model_file:
            shutil.copy(self.spm_model_file, os.path.join(staging, "spm.model"))
        if self.vocab_file:
            shutil.copy(self.vocab_file, os.path.join(staging, "vocab.txt"))
        _replace_dir(staging, final)
        outputs = {"final": final}
        if export:
            for kind in ("backbone", "pretrainer"):
                outputs[f"saved_model_{kind}"] = export_lib.export_saved_model(
                    model if kind == "pretrainer" else model.backbone,
                    os.path.join(s.output_dir, SAVED_MODEL_DIR, kind), version=self.step,
                    spm_model_file=self.spm_model_file, vocab_file=self.vocab_file, max_seq_length=s.max_seq_length,
                    do_lower_case=self.metadata.get("settings", {}).get("do_lower_case", True))
        return outputs

    def _clean_worker_dirs(self):
        if not self.chief:
            shutil.rmtree(self._checkpoint_dir_for_this_task(), ignore_errors=True)

    def _log(self, message: str):
        if self.chief:
            logging.info(message)
            if self.settings.verbose:
                print(message, flush=True)


def _replace_dir(staging: str, target: str):
    """Moves `staging` to `target`, the old `target` removed only after the new one is complete."""
    old = target + ".old"
    shutil.rmtree(old, ignore_errors=True)
    if os.path.exists(target):
        os.rename(target, old)
    os.rename(staging, target)
    shutil.rmtree(old, ignore_errors=True)
