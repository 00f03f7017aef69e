"""The pretraining loop: model, optimizer, checkpointed input, and the schedule of one run.

A custom loop rather than `Model.fit`, because a run must resume exactly where
it stopped, data iterator position included, and Keras' callbacks cannot
checkpoint the input iterator. The loop is one for every Keras backend: the
run's `Compute` (`albert_tf.compute`) gives the steps, the input iterators and
the checkpoint state, `tf_step` under tf.distribute and `jax_step` under Keras'
JAX backend. The input pipeline is tf.data on both.

Saving and resuming are `run_state.CheckpointPolicy`'s job: the loop calls
its `save(step)` every `save_checkpoints_steps`.
"""

import hashlib
import logging
import math
import time
from typing import Callable, Dict, Optional

import keras
import numpy as np
import tensorflow as tf

from albert_tf import preemption
from albert_tf.compute import Compute
from albert_tf.config import AlbertConfig
from albert_tf.distribution import check_precision
from albert_tf.inputs import length_batching
from albert_tf.inputs.shard_reader import PretrainingInput, find_corrupt_shard, pretraining_dataset
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.optimization import create_optimizer
from albert_tf.pretraining import health, objectives, worker_faults
from albert_tf.pretraining.divergence import health_report, non_finite, respond_to_divergence
from albert_tf.pretraining.settings import PretrainingError, PretrainSettings
from albert_tf.progress import TrainingBar, write_scalars
from albert_tf.shard_set import DataError

# The rates after the objective's metrics on the progress bar (mfu: on accelerators of known peak).
BAR_RATES = ("lr", "steps/s", "mfu")
# float16: the loss scale halves at each step it skips (gradients not finite); after this many in a row no scale
# makes them finite, and the run would go on forever without another update.
MAX_SKIPPED_STEPS = 64


def check_eval_batch(settings: PretrainSettings, replicas: int) -> None:
    if settings.eval_batch_size % replicas:
        raise PretrainingError(f"--eval_batch_size {settings.eval_batch_size} must divide by the replicas ({replicas})")


class PretrainingLoop:
    """Model, optimizer and steps of one pretraining job on a `Compute`.

    Args:
        compute: where the run computes (`compute.make_compute`).
        albert_config: the model's `AlbertConfig`.
        settings: `PretrainSettings`.
        train_input: the training shards (from `inputs.shard_reader.resolve_input`).
        eval_input: the eval shards (default: the training shards, as the original).
    """

    def __init__(
        self,
        compute: Compute,
        albert_config: AlbertConfig,
        settings: PretrainSettings,
        train_input: PretrainingInput,
        eval_input: Optional[PretrainingInput] = None,
    ):
        self.compute = compute
        self.config = albert_config
        self.settings = s = settings
        self.train_input = train_input
        self.eval_input = eval_input or train_input
        self.chief = compute.chief
        # What the run trains: the data's objective (metadata.json), ALBERT's or PL-BERT's.
        self.objective = objectives.for_data(train_input.data)
        # Instances a training row holds at most (1: the original's layout; data_prep.packing).
        self.rows_hold = train_input.data.max_instances_per_row
        replicas = compute.num_replicas_in_sync
        if s.train_batch_size % (replicas * s.grad_accum_steps):
            raise PretrainingError(
                f"--train_batch_size {s.train_batch_size} must divide by replicas ({replicas}) × "
                f"--grad_accum_steps ({s.grad_accum_steps})"
            )
        policy = check_precision(s.mixed_precision)
        with compute.scope():
            backbone = AlbertBackbone.from_albert_config(albert_config, dtype=policy, remat=s.remat)
            self.model = self.objective.build_model(backbone, train_input.data, packed_rows=train_input.data.packed)
            optimizer = create_optimizer(
                s.optimizer, s.learning_rate, s.num_train_steps, s.num_warmup_steps, s.poly_power, s.start_warmup_step
            )
            if s.mixed_precision == "float16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            self.optimizer = optimizer
            self.optimizer.build(self.model.trainable_variables)
        self.iterator_in_checkpoint = compute.iterator_in_checkpoint
        # Under JAX the variables are no TensorFlow objects: tf.Variable copies of them go into the checkpoint.
        self.state = compute.checkpoint_state(self.model, self.optimizer)
        # A checkpointable iterator must exist before the checkpoint that tracks it.
        self.train_iterator = self._make_train_iterator(0) if self.iterator_in_checkpoint else None
        self._train_step = self._make_train_step()
        # Model FLOPs utilization on the progress line, where the devices' peak is known (not on CPUs).
        self.peak_flops = compute.peak_flops(s.mixed_precision)
        self.step_flops = self.objective.step_flops(
            albert_config, train_input.data, s.train_batch_size, s.max_seq_length
        )
        self._eval_step = None

    @property
    def step(self) -> int:
        return self._train_step.iterations()

    def sync(self) -> None:
        """The model's and optimizer's variables take the newest state (JAX holds it on the devices between
        steps): before anything reads them."""
        self._train_step.sync()

    def trackables(self) -> Dict[str, object]:
        """What a checkpoint holds: model, optimizer (step, slots) and, where possible, the iterator."""
        tracked = self.state.trackables()
        if self.iterator_in_checkpoint:
            tracked["train_iterator"] = self.train_iterator
        return tracked

    def before_save(self):
        """The checkpoint is about to be written: the values it must hold are copied into it (JAX)."""
        self.sync()
        self.state.before_save()

    def wait_for_all(self, name: str) -> None:
        """Every process of a multi-process JAX run reaches `name` before any goes on (else nothing)."""
        self.compute.wait_for_all(name)

    def after_restore(self):
        """A checkpoint was read: its values go into the model and optimizer (JAX), where the next step starts."""
        self.state.after_restore()
        self._train_step.reset()

    def ensure_iterator(self):
        """After a restore: a run that cannot checkpoint its iterator skips the batches already used."""
        if self.train_iterator is None:
            self.train_iterator = self._make_train_iterator(skip_batches=self.step)

    # --- steps --------------------------------------------------------------------------------------

    def _make_train_iterator(self, skip_batches: int):
        s = self.settings
        return self.compute.train_iterator(
            lambda context: pretraining_dataset(
                self.train_input,
                context.get_per_replica_batch_size(s.train_batch_size),
                is_training=True,
                seed=s.seed,
                input_context=context,
                shuffle_buffer=s.shuffle_buffer,
                skip_batches=skip_batches,
                make_batches=self.objective.batches(self.train_input.data, s.seed),
            )
        )

    def _make_train_step(self):
        s = self.settings
        return self.compute.train_step(
            self.model, self.optimizer, s.grad_accum_steps, s.jit_compile, s.deterministic, self.objective
        )

    def eval_dataset(self, context: tf.distribute.InputContext) -> tf.data.Dataset:
        """This pipeline's eval batches; with `length_grouping` each cut to its longest row (a TPU: its bucket)."""
        s = self.settings
        dataset = pretraining_dataset(
            self.eval_input,
            context.get_per_replica_batch_size(s.eval_batch_size),
            is_training=False,
            input_context=context,
            make_batches=self.objective.batches(self.eval_input.data, s.seed),
        )
        if s.length_grouping:
            # Eval metrics are sums over the batches: a row's padding beyond its longest changes none of them.
            # The eval step is traced once for any width; a TPU or JAX compiles each shape, so there widths are few.
            buckets = length_batching.cut_lengths(s.max_seq_length, self.compute.compiles_every_shape(None))
            dataset = dataset.map(lambda inputs, labels: (length_batching.cut_batch(inputs, buckets), labels))
        # A fresh iterator per evaluation: without the autotune thread its deletion does not wait.
        return length_batching.without_autotune_thread(dataset)

    def evaluate(self) -> Dict[str, float]:
        """`max_eval_steps` batches of the eval shards, as the original's eval."""
        self.sync()  # the eval step reads the model's variables
        s = self.settings
        check_eval_batch(s, self.compute.num_replicas_in_sync)
        if self._eval_step is None:
            self._eval_step = self.compute.eval_step(self.model, s.deterministic, self.objective)
        iterator = self.compute.eval_iterator(self.eval_dataset)
        totals = dict.fromkeys(self.objective.stat_keys, 0.0)
        for _ in range(s.max_eval_steps):
            stats = self._eval_step(iterator)
            for k in self.objective.stat_keys:
                totals[k] += float(stats[k])
        return self.objective.summarize(totals, s.max_eval_steps)

    # --- the loop -----------------------------------------------------------------------------------

    def train(self, checkpointer, say: Callable[[str], None], summary_dir: Optional[str] = None) -> list:
        """Trains to `num_train_steps`, logging and checkpointing on schedule; returns the log history.

        `checkpointer` (a `CheckpointPolicy`) saves every `save_checkpoints_steps`. A checkpoint counts as
        good only once the next step's loss (computed with its weights) is finite; a non-finite loss
        discards the unconfirmed checkpoint and stops the run, naming the last good one.
        """
        s = self.settings
        history = []
        writer = tf.summary.create_file_writer(summary_dir) if (self.chief and summary_dir) else None
        if self.step >= s.num_train_steps:
            say(f"already at step {self.step} ≥ --num_train_steps {s.num_train_steps}: nothing to train")
        facts = health.DataFacts.from_metadata(self.train_input.data.directory, self.train_input.data.metadata)
        monitor = health.HealthMonitor(s.health, s.on_divergence, facts)
        eval_file_given = self.eval_input is not self.train_input
        schedule = health.schedule_lines(s.num_train_steps, s.num_warmup_steps, s.do_eval, eval_file_given)
        for line in self.objective.data_lines(facts, s.sentence_task) + schedule:
            health_report(say, writer, lambda: self.step)(line)
        report = health_report(say, writer, lambda: self.step, below_bar=s.verbose and self.chief)
        progress = TrainingBar(
            s.num_train_steps, self.objective.bar_metrics, s.log_every_steps, s.verbose and self.chief
        )
        progress.update(self.step)
        window = dict.fromkeys(self.objective.stat_keys, 0.0)
        window_steps, window_start = 0, time.perf_counter()
        self.run_totals = dict.fromkeys(self.objective.stat_keys, 0.0)
        self.run_steps = 0
        self.run_first_step = self.step + 1
        skipped = 0  # steps in a row the loss scale skipped
        while self.step < s.num_train_steps:
            before = self.step
            try:
                stats = self._train_step(self.train_iterator)
            except tf.errors.DataLossError as error:
                offset = str(error).strip().splitlines()[0]
                raise DataError(
                    f"{find_corrupt_shard(self.train_input)}: corrupt record ({offset}) at step "
                    f"{self.step}; checkpoints are intact (last: {checkpointer.latest() or 'none'}); "
                    "recreate the data or restore the shard, then run again"
                ) from None
            loss = float(stats["loss"])
            if not math.isfinite(loss) and s.on_divergence == "rollback":
                respond_to_divergence(self, checkpointer, monitor, non_finite(self.step, loss), report)
                window = dict.fromkeys(self.objective.stat_keys, 0.0)
                window_steps, window_start = 0, time.perf_counter()
                continue
            if not math.isfinite(loss):
                good = checkpointer.discard_unconfirmed()
                advice = (
                    f"resume from the last good checkpoint {good} (run the same command again)"
                    if good
                    else "no good checkpoint yet: the run starts again from the beginning"
                )
                raise PretrainingError(
                    f"loss is {loss} at step {self.step}; stopped without saving; {advice} with a lower "
                    "--learning_rate (or --mixed_precision=float32)"
                )
            checkpointer.confirm()
            worker_faults.step_finished()
            if self.step == before:  # float16: the loss scale skipped the update (its gradients were not finite)
                skipped += 1
                if skipped >= MAX_SKIPPED_STEPS:
                    raise PretrainingError(
                        f"--mixed_precision float16: {skipped} steps in a row at step {before} were skipped, their "
                        "gradients not finite at any loss scale; nothing was trained since; checkpoints are intact "
                        f"(last: {checkpointer.latest() or 'none'}); use --mixed_precision bfloat16 or float32"
                    )
                continue
            skipped = 0
            for k in self.objective.stat_keys:
                window[k] += float(stats[k])
                self.run_totals[k] += float(stats[k])
            window_steps += 1
            self.run_steps += 1
            step = self.step
            divergence = monitor.step_loss(step, loss)
            if step % s.log_every_steps == 0 or step == s.num_train_steps:
                elapsed = time.perf_counter() - window_start
                metrics = self.objective.summarize(window, window_steps)
                self.sync()  # the learning rate is the schedule's at the optimizer's step count
                metrics["lr"] = float(self.optimizer.learning_rate)
                metrics["steps/s"] = window_steps / elapsed
                if self.peak_flops:
                    metrics["mfu"] = self.step_flops * metrics["steps/s"] / self.peak_flops
                history.append({"step": step, "window_steps": window_steps, **metrics})
                progress.update(step, {k: metrics[k] for k in self.objective.bar_metrics + BAR_RATES if k in metrics})
                logging.info(
                    "step %d, %s: %s",
                    step,
                    health.window_label(window_steps),
                    ", ".join(f"{k} {v:.6g}" for k, v in metrics.items()),
                )
                write_scalars(writer, step, metrics)
                lines, collapse = self.objective.health_window(monitor, step, window_steps, metrics, window)
                for line in lines:
                    report(line)
                divergence = divergence or collapse
                window = dict.fromkeys(self.objective.stat_keys, 0.0)
                window_steps, window_start = 0, time.perf_counter()
            if divergence and respond_to_divergence(self, checkpointer, monitor, divergence, report):
                window = dict.fromkeys(self.objective.stat_keys, 0.0)  # the rolled-back steps leave the window
                window_steps, window_start = 0, time.perf_counter()
                progress.update(self.step)
                continue
            scheduled = step % s.save_checkpoints_steps == 0 or step == s.num_train_steps
            if scheduled:
                if s.do_eval:
                    progress.release()  # the evaluation's line goes below the bar
                checkpointer.save(step)
            if preemption.requested_on_any_worker(self.compute):
                if not scheduled:
                    checkpointer.save(step, evaluate=False)
                preemption.raise_preempted(f"checkpoint of step {step} saved in {checkpointer.checkpoint_dir}")
        self.sync()  # whatever the caller reads next sees the trained weights
        if writer:
            writer.flush()
        return history

    def run_metrics(self) -> Dict[str, object]:
        """The metrics over every step `train` made in this process (cumulative), labelled with those steps."""
        metrics = self.objective.summarize(self.run_totals, self.run_steps)
        label = f"cumulative over the {self.run_steps} steps {self.run_first_step}-{self.step} of this run"
        return {"label": label, "steps": self.run_steps, **metrics}

    def time_steps(self, steps: int) -> float:
        """Seconds per training step, measured over `steps` (after one traced step)."""
        self.ensure_iterator()
        float(self._train_step(self.train_iterator)["loss"])
        start = time.perf_counter()
        for _ in range(steps):
            # Read back as `train` does: JAX dispatches asynchronously, so a step ends when its loss is read.
            float(self._train_step(self.train_iterator)["loss"])
        seconds = (time.perf_counter() - start) / steps
        self.sync()
        return seconds

    def weights_are_finite(self) -> bool:
        self.sync()
        return all(np.isfinite(w).all() for w in self.model.get_weights())

    def weights_fingerprint(self) -> str:
        """sha256 of every weight's bytes: equal on all workers of a synchronous run."""
        self.sync()
        digest = hashlib.sha256()
        for weight in self.model.get_weights():
            digest.update(np.ascontiguousarray(weight).tobytes())
        return digest.hexdigest()

    def plain_copy(self):
        """The model outside the strategy (float32), for saving and export."""
        self.sync()
        # from_albert_config keeps the file's passthrough keys (gap_size, ...) in the saved config.
        copy = self.objective.build_model(AlbertBackbone.from_albert_config(self.config), self.train_input.data)
        copy.set_weights([np.asarray(w) for w in self.model.get_weights()])
        return copy
