"""The `--dry_run` plan of a training command, one shape for pretraining and fine-tuning.

Each command checks its inputs as a run would, then calls `run_plan` with its own sections
(pretraining: `data`; fine-tuning: `task`, `splits`, `binding`, ...); the parts they share are made
here: `output_dir`, `resumes_from_step`, `model` (config, parameters, shapes), `max_seq_length`,
`batch` (global, accumulation, replicas, micro-batch), `steps` (named by the command's flags, and
epochs), `memory` (one step's lower bound against what is available), `precision`, `backend`,
`tokenizer` and `warnings`. Nothing is written.

Example:

>>> from albert_tf.compute import make_compute
>>> from albert_tf.config import AlbertConfig
>>> from albert_tf.pretraining.settings import PretrainSettings
>>> settings = PretrainSettings(output_dir="/nonexistent/run", max_seq_length=64, train_batch_size=32)
>>> schedule = Schedule(("num_train_steps", 2), ("num_warmup_steps", 5), rows=640)
>>> plan = run_plan(settings, AlbertConfig.from_json_file("configs/albert_tiny.json"), "configs/albert_tiny.json",
...                 compute=make_compute(), schedule=schedule)
>>> plan["batch"], plan["steps"], plan["resumes_from_step"]
({'train_batch_size': 32, 'grad_accum_steps': 1, 'replicas': 1, 'micro_batch_per_replica': 32}, \
{'num_train_steps': 2, 'num_warmup_steps': 5, 'epochs': 0.1}, None)
>>> plan["warnings"]
['--num_warmup_steps 5 is not below --num_train_steps 2: the learning rate never reaches --learning_rate']
"""

import os
from typing import NamedTuple, Optional, Tuple

from albert_tf import memory_check
from albert_tf.run_layout import CHECKPOINT_DIR

MODEL_SHAPES = ("hidden_size", "num_hidden_layers", "vocab_size")


class Schedule(NamedTuple):
    """A training run's steps, each as (its flag, its value), and the rows one epoch holds (None: unknown)."""

    train_steps: Tuple[str, int]
    warmup_steps: Tuple[str, int]
    rows: Optional[int]


def run_plan(
    settings,
    config,
    config_source: str,
    *,
    compute,
    schedule: Optional[Schedule] = None,
    sections: Optional[dict] = None,
    tokenizer=None,
    sequences_per_row: int = 1,
    predictions_per_row: int = 0,
    warnings: Tuple[str, ...] = (),
) -> dict:
    """The plan: the shared parts around the command's own `sections`.

    Args:
        settings: the run's settings (`PretrainSettings` or `FineTuneSettings`: the fields both have).
        config: the model's `AlbertConfig`; `config_source` says where it came from.
        compute: where the run computes (`albert_tf.compute.Compute`): its replicas and its name.
        schedule: a training run's steps (None: nothing is trained; no batch, steps, memory or resume).
        sections: the command's own parts, placed after `resumes_from_step`.
        tokenizer: the run's tokenizer (its `metadata()` is shown), or None.
        sequences_per_row: sequences one row holds (RACE: its choices), for the memory bound.
        predictions_per_row: masked positions a row predicts (pretraining; 0: none), for the memory bound.
        warnings: the command's own warnings, before the shared ones.
    """
    parameters = memory_check.parameter_count(config)
    replicas = compute.num_replicas_in_sync
    plan = {"dry_run": True, "output_dir": settings.output_dir, "resumes_from_step": None, **(sections or {})}
    plan["model"] = {"config": config_source, "parameters": parameters}
    plan["model"].update({name: getattr(config, name) for name in MODEL_SHAPES})
    plan["max_seq_length"] = settings.max_seq_length
    warnings = list(warnings)
    if schedule is not None:
        plan["resumes_from_step"] = latest_step(settings.output_dir)
        micro_batch = settings.train_batch_size // settings.grad_accum_steps // replicas
        plan["batch"] = {
            "train_batch_size": settings.train_batch_size,
            "grad_accum_steps": settings.grad_accum_steps,
            "replicas": replicas,
            "micro_batch_per_replica": micro_batch,
        }
        (train_flag, train_steps), (warmup_flag, warmup_steps) = schedule.train_steps, schedule.warmup_steps
        epochs = round(train_steps * settings.train_batch_size / schedule.rows, 2) if schedule.rows else None
        plan["steps"] = {train_flag: train_steps, warmup_flag: warmup_steps, "epochs": epochs}
        needed = memory_check.step_bytes(
            config,
            parameters,
            micro_batch * sequences_per_row,
            settings.max_seq_length,
            settings.remat,
            predictions_per_row,
        )
        available = memory_check.available_bytes()
        plan["memory"] = {
            "step_lower_bound_gib": round(needed / 2**30, 2),
            "available_gib": round(available / 2**30, 2) if available else None,
        }
        if warmup_steps >= train_steps:
            warnings.append(
                f"--{warmup_flag} {warmup_steps} is not below --{train_flag} {train_steps}: "
                "the learning rate never reaches --learning_rate"
            )
        if available and needed > available / 2:
            warnings.append(
                "one step's lower bound is over half the available memory: a larger config or batch will not fit"
            )
    plan["precision"] = settings.mixed_precision
    plan["backend"] = compute.name
    plan["tokenizer"] = tokenizer.metadata() if tokenizer is not None else None
    plan["warnings"] = warnings
    return plan


def latest_step(output_dir: str) -> Optional[int]:
    """The step of the last checkpoint in `output_dir` (None: none, a fresh start)."""
    import tensorflow as tf

    checkpoint_dir = os.path.join(output_dir, CHECKPOINT_DIR)
    latest = tf.train.latest_checkpoint(checkpoint_dir) if os.path.isdir(checkpoint_dir) else None
    return int(latest.rsplit("-", 1)[-1]) if latest else None
