"""The whole pretraining job as a function: `pretrain(settings)` (its inputs are the settings').

Data → checks → loop (resumes where a previous run stopped) → final model.
Exports are the caller's (the `run_pretraining` CLI and the demo export the
`final/` model with `albert_tf.export`).
"""

import contextlib
import dataclasses
import logging
import os
from typing import Dict, Optional

import keras
import tensorflow as tf

from albert_tf import memory_check, run_plan
from albert_tf.compute import Compute, make_compute
from albert_tf.config import AlbertConfig
from albert_tf.inputs.shard_reader import PretrainingInput, check_same_layout, resolve_input
from albert_tf.json_records import read_json, write_json
from albert_tf.locking import OutputDirLock
from albert_tf.pretraining import batch_binding, worker_faults
from albert_tf.pretraining.loop import PretrainingLoop, check_eval_batch
from albert_tf.pretraining.run_state import CheckpointPolicy, check_same_config
from albert_tf.pretraining.settings import PretrainingError, PretrainSettings
from albert_tf.publish import remove_stale_staging
from albert_tf.run_layout import CHECKPOINT_DIR, FINAL_DIR, PRETRAINING_SUMMARY_FILE, TRAIN_SUMMARY_DIR
from albert_tf.shard_set import DataError
from albert_tf.tokenization import Tokenizer, check_vocab_size, load_tokenizer_dir


def data_tokenizer(train_input: PretrainingInput, tokenizer: Optional[Tokenizer] = None) -> Optional[Tokenizer]:
    """The data's tokenizer: the one given, else the one data_prep wrote beside the shards.

    None for data made before data_prep wrote one, and no tokenizer given.

    Raises:
        DataError: a vocabulary or lowercasing other than the ones the data was made with.
    """
    data = train_input.data
    if tokenizer is None:
        if not data.directory:
            return None
        tokenizer = load_tokenizer_dir(data.directory, data.do_lower_case)
        if tokenizer is None:
            return None
    elif tokenizer.do_lower_case != data.do_lower_case:
        raise DataError(
            f"{tokenizer.model_file}: the tokenizer's do_lower_case is {tokenizer.do_lower_case} but the data "
            f"was made with do_lower_case {data.do_lower_case} (its metadata.json)"
        )
    data.check_vocabulary(tokenizer.model_sha256, tokenizer.model_file)
    return tokenizer


def last_window(history: list) -> Optional[dict]:
    """The last logging window's metrics, labelled (what the progress bar showed last)."""
    if not history:
        return None
    last = dict(history[-1])
    steps = last.pop("window_steps")
    return {"label": f"last {steps} steps (to step {last.pop('step')})", **last}


def metrics_line(metrics: dict, shown=("loss", "masked_lm_accuracy", "sentence_order_accuracy")) -> str:
    """`metrics`' label and its `shown` values (the objective's `bar_metrics`)."""
    return f"{metrics['label']}: " + ", ".join(f"{k} {metrics[k]:.4f}" for k in shown)


def finished_run_summary(settings: PretrainSettings, step: int, chief: bool) -> Optional[dict]:
    """The summary of a run that already reached `num_train_steps` and wrote `final/`; else None.

    A run killed between its last checkpoint and `final/` has no summary yet: it goes on and writes both.
    """
    final = os.path.join(settings.output_dir, FINAL_DIR)
    summary_file = os.path.join(settings.output_dir, PRETRAINING_SUMMARY_FILE)
    if step < settings.num_train_steps or not chief or not os.path.isdir(final) or not os.path.isfile(summary_file):
        return None
    summary = read_json(summary_file)
    if not isinstance(summary, dict) or summary.get("end_step") != step:
        return None
    summary["outputs"] = {"final": final}  # the exports are the caller's, again
    summary["already_complete"] = True
    return summary


def check_resume(settings: PretrainSettings, config: AlbertConfig, train_input: PretrainingInput, backend: str) -> None:
    """Refuses, before anything is built, a resume under another config, backend, batch or row layout."""
    checkpoint_dir = os.path.join(settings.output_dir, CHECKPOINT_DIR)
    check_same_config(settings.output_dir, config.to_dict())
    if os.path.isdir(checkpoint_dir) and tf.train.latest_checkpoint(checkpoint_dir):
        batch_binding.check_same_batch(settings, checkpoint_dir, train_input.data.max_instances_per_row, backend)


def dry_run_plan(
    settings: PretrainSettings, config: AlbertConfig, train_input: PretrainingInput, tokenizer, compute
) -> dict:
    """What a run would do, from its checked inputs (`--dry_run`): the shared plan (`albert_tf.run_plan`) with
    the data's section and, for JAX's processes, theirs."""
    data = train_input.data
    rows = (data.metadata.get("counts", {}).get("packing") or {}).get("rows") or data.metadata.get("num_instances")
    data_section = {
        "objective": data.objective,
        "files": len(train_input.files),
        "rows": rows,
        "instances": data.metadata.get("num_instances"),
        "max_seq_length": data.max_seq_length,
        "max_instances_per_row": data.max_instances_per_row,
        "predictions_per_row": data.predictions_per_row,
    }
    result = run_plan.run_plan(
        settings,
        config,
        settings.albert_config_file,
        compute=compute,
        schedule=run_plan.Schedule(
            ("num_train_steps", settings.num_train_steps), ("num_warmup_steps", settings.num_warmup_steps), rows
        ),
        sections={"data": data_section},
        tokenizer=tokenizer,
        predictions_per_row=data.predictions_per_row,
    )
    if compute.describe() is not None:
        result["processes"] = compute.describe() | {
            "rows_per_process": settings.train_batch_size // compute.num_processes,
            "rows_per_device": settings.train_batch_size // compute.num_replicas_in_sync,
        }
    return result


def run_data(settings: PretrainSettings) -> PretrainingInput:
    """The data a run reads first, resolved: the training data, or evaluating only, the eval data."""
    if settings.do_train or not settings.eval_file:
        return resolve_input(settings.input_file)
    return resolve_input(settings.eval_file, "--eval_file")


def pretrain(
    settings: PretrainSettings,
    compute: Optional[Compute] = None,
    tokenizer: Optional[Tokenizer] = None,
    data: Optional[PretrainingInput] = None,
) -> dict:
    """Pretrains; returns the summary (also written to `output_dir/train_summary.json`).

    Args:
        settings: the run: its inputs (`input_file`, `eval_file`, `albert_config_file`, `init_checkpoint`),
            its flags, and with `dry_run`, only a plan: every check (data, config, vocabulary, memory, a
            resume's binding), then the plan (`dry_run_plan`) instead of training; nothing is written.
        compute: where the run computes (`albert_tf.compute.make_compute`; None: `--strategy default` on the
            backend Keras runs on). A multi-worker one must exist before any TensorFlow op runs, so the CLI
            makes it first.
        tokenizer: the data's tokenizer (default: the one saved beside the data), saved into `final/`.
        data: `settings.input_file` already resolved (`resolve_input`; the CLI reads it once), or None.

    Example (the demo's data; `configs/albert_tiny.json` fits it):

        from albert_tf.pretraining.job import pretrain
        from albert_tf.pretraining.settings import PretrainSettings

        summary = pretrain(PretrainSettings(
            output_dir="runs/tiny", input_file="albert_tf_demo/data", albert_config_file="configs/albert_tiny.json",
            train_batch_size=32, num_train_steps=100, num_warmup_steps=10,
        ))

    Raises:
        PretrainingError: settings that cannot run (`PretrainSettings.check_inputs`), a resume under other
            settings, weights that stop being finite.
        DataError: data that do not fit the settings, the config or the vocabulary.
    """
    settings.check_inputs()
    if not settings.do_train:
        raise PretrainingError("--nodo_train evaluates checkpoints: call evaluate_checkpoints(), not pretrain()")
    compute = compute or make_compute()  # first: collectives are configured at startup
    keras.utils.set_random_seed(settings.seed)
    if settings.deterministic:  # the input pipeline's ops on both backends (the JAX step: jax_step)
        tf.config.experimental.enable_op_determinism()
    albert_config_file = settings.albert_config_file
    config = AlbertConfig.from_json_file(albert_config_file)
    train_input = data or resolve_input(settings.input_file)
    settings = settings.for_data(train_input.data)  # from here on, the lengths are ints
    if compute.chief:  # a resume on the other objective's data: refused before the data meets the config
        batch_binding.check_same_objective(
            settings, os.path.join(settings.output_dir, CHECKPOINT_DIR), train_input.data.objective
        )
    train_input.data.check_fits(settings.max_seq_length, settings.max_predictions_per_seq, config.vocab_size)
    if train_input.data.max_seq_length > config.max_position_embeddings:
        raise DataError(
            f"{albert_config_file}: max_position_embeddings {config.max_position_embeddings} is "
            f"shorter than the data's sequences ({train_input.data.max_seq_length})"
        )
    if settings.verify_data:
        corrupt = train_input.data.corrupt_shards()
        if corrupt:
            raise DataError(f"{', '.join(corrupt)}: checksum differs from metadata.json (corrupt or replaced)")
    tokenizer = data_tokenizer(train_input, tokenizer)
    check_vocab_size(config.vocab_size, tokenizer, albert_config_file)
    # Before anything is built or written: an absurd config or batch would be killed minutes later.
    memory_check.check_config_fits(config, albert_config_file, settings.max_seq_length, settings.remat)
    memory_check.check_batch_fits(
        config,
        memory_check.parameter_count(config),
        settings.train_batch_size // settings.grad_accum_steps // compute.num_replicas_in_sync,
        settings.max_seq_length,
        settings.remat,
        max_predictions=train_input.data.predictions_per_row,
    )
    if settings.do_eval or settings.eval_at_start:
        check_eval_batch(settings, compute.num_replicas_in_sync)
    eval_input = None
    if settings.eval_file is not None:
        eval_input = resolve_input(settings.eval_file, "--eval_file")
        eval_input.data.check_fits(settings.max_seq_length, settings.max_predictions_per_seq, config.vocab_size)
        check_same_layout(train_input, eval_input)
    chief = compute.chief
    if chief:  # a resume under other settings is refused now, not after the model is built
        check_resume(settings, config, train_input, compute.name)
    if settings.dry_run:
        return dry_run_plan(settings, config, train_input, tokenizer, compute)
    os.makedirs(settings.output_dir, exist_ok=True)
    worker_faults.register_process(settings.output_dir, compute)
    # One writer per output directory; the other workers of a multi-worker run write only their own dirs.
    # The run is accepted (its settings.json written) once its checkpoints are restored or it starts afresh.
    lock = OutputDirLock(settings.output_dir, accept=False) if chief else contextlib.nullcontext()
    checkpoint_dir = os.path.join(settings.output_dir, CHECKPOINT_DIR)

    def latest():
        return tf.train.latest_checkpoint(checkpoint_dir)

    # A lost worker of a multi-worker run: one line naming it, wherever the others notice (worker_faults).
    with (
        lock,
        worker_faults.reported_as_lost_worker(compute, latest),
        worker_faults.reported_as_lost_process(compute, settings.output_dir, latest),
    ):
        loop = PretrainingLoop(compute, config, settings, train_input, eval_input)

        def say(message: str):
            if loop.chief:
                logging.info(message)
                if settings.verbose:
                    print(message, flush=True)

        policy = CheckpointPolicy(loop, settings.init_checkpoint, say, tokenizer)
        say(policy.restore_or_initialize(config.to_dict()))
        if chief:
            lock.accept()
            # What a killed run left half-written (staging copies, TensorFlow's checkpoint temporaries).
            remove_stale_staging(settings.output_dir)
            remove_stale_staging(checkpoint_dir, checkpoints=True)
        # Every JAX process reads the shared output directory: all stop, or all train.
        finished = finished_run_summary(settings, loop.step, loop.chief or compute.num_processes > 1)
        if finished is not None:  # the README's "run the same command again" after the run ended
            say(
                f"the run is complete: step {loop.step} of --num_train_steps {settings.num_train_steps}, final model "
                f"in {finished['outputs']['final']}; nothing to train (raise --num_train_steps to train further)"
            )
            return finished
        summary = {"start_step": loop.step}
        if settings.eval_at_start:
            summary["eval_start"] = loop.evaluate()
        with worker_faults.StepWatchdog(compute, settings.worker_timeout_seconds, latest):
            summary["history"] = loop.train(policy, say, os.path.join(settings.output_dir, TRAIN_SUMMARY_DIR))
        if not loop.weights_are_finite():  # the last checkpoint has no next step to confirm it
            good = policy.discard_unconfirmed()
            raise PretrainingError(
                f"the final weights are not finite; last good checkpoint: {good or '(none)'}; lower --learning_rate"
            )
        policy.confirm()
        summary["end_step"] = loop.step
        summary["train_last_window"] = last_window(summary["history"])
        summary["train_cumulative"] = loop.run_metrics()
        if loop.run_steps:
            say(metrics_line(summary["train_cumulative"], loop.objective.bar_metrics))
        summary["replicas"] = compute.num_replicas_in_sync
        if compute.describe() is not None:
            summary["processes"] = compute.num_processes
        summary["weights_sha256"] = loop.weights_fingerprint()
        if settings.do_eval:
            summary["eval"] = policy.evaluate_and_keep_best()
        policy.clean_worker_dirs()
        summary["outputs"] = {"final": policy.write_final()} if loop.chief else {}
        if loop.chief:
            write_json(os.path.join(settings.output_dir, PRETRAINING_SUMMARY_FILE), summary)
    return summary


def evaluate_checkpoints(
    settings: PretrainSettings, compute: Optional[Compute] = None, data: Optional[PretrainingInput] = None
) -> Dict[int, Dict[str, float]]:
    """Every checkpoint kept in `settings.output_dir`, evaluated on `settings.eval_file` (default:
    `settings.input_file`); nothing is trained or written.

    The original's `--do_train=false --do_eval`, for every kept checkpoint: a run (finished or still
    going) measured on another eval set, e.g. held-out documents, or NSP data for a model trained with SOP.
    `max_eval_steps` batches of `eval_batch_size` each, as the evaluation during training.

    Args:
        settings: the run's settings (whatever their `do_train`: this evaluates only).
        compute: where it computes (`albert_tf.compute.make_compute`; None: the default).
        data: the eval data already resolved (`run_data` of these settings evaluating only), or None.

    Returns:
        {global step: metrics}, in step order.

    Raises:
        PretrainingError: the run has no checkpoint.
        DataError: the eval data do not fit the settings or the model.
    """
    settings = dataclasses.replace(settings, do_train=False, dry_run=False)  # evaluating only
    settings.check_inputs()
    checkpoint_dir = os.path.join(settings.output_dir, CHECKPOINT_DIR)
    state = tf.train.get_checkpoint_state(checkpoint_dir) if tf.io.gfile.isdir(checkpoint_dir) else None
    if state is None or not state.all_model_checkpoint_paths:
        raise PretrainingError(f"{checkpoint_dir}: no checkpoint to evaluate (train first, or check --output_dir)")
    compute = compute or make_compute()
    batch_binding.check_same_backend(settings, checkpoint_dir, compute.name)  # the other's would not match
    config = AlbertConfig.from_json_file(settings.albert_config_file)
    eval_input = data or run_data(settings)
    settings = settings.for_data(eval_input.data)
    eval_input.data.check_fits(settings.max_seq_length, settings.max_predictions_per_seq, config.vocab_size)
    loop = PretrainingLoop(compute, config, settings, eval_input, eval_input)
    # The weights and the step only: the training iterator in the checkpoint belongs to other data.
    weights = tf.train.Checkpoint(**{k: v for k, v in loop.trackables().items() if k != "train_iterator"})
    results = {}
    for path in state.all_model_checkpoint_paths:
        weights.restore(path).expect_partial()
        loop.after_restore()
        results[loop.step] = loop.evaluate()
    return dict(sorted(results.items()))
