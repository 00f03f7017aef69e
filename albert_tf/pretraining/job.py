"""The whole pretraining job as a function: `pretrain(settings, config, data)`.

Data → checks → loop (resumes where a previous run stopped) → final model.
Exports are the caller's (the `run_pretraining` CLI and the demo export the
`final/` model with `albert_tf.export`).
"""

import hashlib
import json
import logging
import os
from typing import Optional, Union

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.inputs.pretraining import PretrainingInput, resolve_input
from albert_tf.pretraining.checkpointing import CheckpointPolicy
from albert_tf.pretraining.loop import PretrainingLoop
from albert_tf.pretraining.settings import TrainSettings
from albert_tf.pretraining.strategy import make_strategy
from albert_tf.pretraining_data import DataError
from albert_tf.tokenization import read_bytes

SUMMARY_FILE = "train_summary.json"


def vocabulary_files(spm_model_file: Optional[str], vocab_file: Optional[str]) -> dict:
    """`{name in the model dir: path}` of the given vocabulary (at most one of the two)."""
    if spm_model_file and vocab_file:
        raise DataError("give at most one of --spm_model_file and --vocab_file")
    if spm_model_file:
        return {"spm.model": spm_model_file}
    if vocab_file:
        return {"vocab.txt": vocab_file}
    return {}


def _check_vocabulary(train_input: PretrainingInput, files: dict, flag: str):
    for path in files.values():
        try:
            vocabulary = read_bytes(path)
        except OSError as error:
            raise DataError(f"{flag} {path}: cannot be read ({error.strerror or error})") from None
        train_input.data.check_vocabulary(hashlib.sha256(vocabulary).hexdigest(), path)


def pretrain(settings: TrainSettings, albert_config_file: str, input_file: Union[str, PretrainingInput], *,
             eval_file: Optional[Union[str, PretrainingInput]] = None, init_checkpoint: Optional[str] = None,
             spm_model_file: Optional[str] = None, vocab_file: Optional[str] = None,
             strategy_name: str = "default", tpu: Optional[str] = None) -> dict:
    """Pretrains; returns the summary (also written to `output_dir/train_summary.json`).

    Args:
        settings: the run's `TrainSettings`.
        albert_config_file: the model's config.
        input_file: shards (directory, glob or comma list), or an already resolved `PretrainingInput`.
        eval_file: eval shards (default: the training shards, as the original).
        init_checkpoint: warm start of a fresh run (Google's TF1 checkpoint or ours).
        spm_model_file / vocab_file: the data's vocabulary, copied into `final/`.
        strategy_name / tpu: the tf.distribute strategy.
    """
    keras.utils.set_random_seed(settings.seed)
    if settings.deterministic:
        tf.config.experimental.enable_op_determinism()
    config = AlbertConfig.from_json_file(albert_config_file)
    train_input = resolve_input(input_file) if isinstance(input_file, str) else input_file
    train_input.data.check_fits(settings.max_seq_length, settings.max_predictions_per_seq, config.vocab_size)
    vocabulary = vocabulary_files(spm_model_file, vocab_file)
    _check_vocabulary(train_input, vocabulary, "--vocab_file" if vocab_file else "--spm_model_file")
    eval_input = None
    if eval_file is not None:
        eval_input = resolve_input(eval_file, "--eval_file") if isinstance(eval_file, str) else eval_file
        eval_input.data.check_fits(settings.max_seq_length, settings.max_predictions_per_seq, config.vocab_size)
    os.makedirs(settings.output_dir, exist_ok=True)
    loop = PretrainingLoop(make_strategy(strategy_name, tpu), config, settings, train_input, eval_input)

    def say(message: str):
        if loop.chief:
            logging.info(message)
            if settings.verbose:
                print(message, flush=True)

    policy = CheckpointPolicy(loop, init_checkpoint, say)
    say(policy.restore_or_initialize())
    summary = {"start_step": loop.step}
    if settings.eval_at_start:
        summary["eval_start"] = loop.evaluate()
    summary["history"] = loop.train(policy.save, say, policy.latest, os.path.join(settings.output_dir, "train"))
    summary["end_step"] = loop.step
    summary["replicas"] = loop.strategy.num_replicas_in_sync
    summary["weights_sha256"] = loop.weights_fingerprint()
    if settings.do_eval:
        summary["eval"] = policy.evaluate_and_keep_best()
    policy.clean_worker_dirs()
    summary["outputs"] = {"final": policy.write_final(vocabulary)} if loop.chief else {}
    summary["do_lower_case"] = train_input.data.do_lower_case
    if loop.chief:
        with open(os.path.join(settings.output_dir, SUMMARY_FILE), "w") as f:
            json.dump(summary, f, indent=2)
    return summary
