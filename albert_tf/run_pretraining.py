"""Pretrains ALBERT (MLM + SOP) on data_prep's TFRecords; with no flags, runs a demo.

    python -m albert_tf.run_pretraining --input_file 'data/pretrain/part-*' \
        --albert_config_file configs/albert_base_v2.json --output_dir runs/base \
        --train_batch_size 4096 --num_train_steps 125000 --num_warmup_steps 3125 \
        --learning_rate 0.00176 --optimizer lamb [--strategy mirrored|multi_worker|tpu]

    python -m albert_tf.run_pretraining      # the built-in demo (albert_tf.demo)

Flag names and defaults are the original's where it has them. Running the
same command again resumes from the last checkpoint in `--output_dir`.
"""

import json
import logging
import os
import sys

from absl import flags

from albert_tf.training import PRECISIONS, STRATEGIES, TrainSettings

FLAGS = flags.FLAGS


def define_flags():
    d = TrainSettings(output_dir="")
    flags.DEFINE_string("input_file", None, "TFRecord files/globs (or a data_prep output dir), comma-separated. "
                        "Without it the built-in demo runs.")
    flags.DEFINE_string("eval_file", None, "Eval TFRecords (default: --input_file, as the original).")
    flags.DEFINE_string("albert_config_file", None, "ALBERT config JSON.")
    flags.DEFINE_string("output_dir", None, "Checkpoints, summaries, final model and SavedModels.")
    flags.DEFINE_string("init_checkpoint", None, "Warm start: Google's TF1 checkpoint or ours (weights only).")
    flags.DEFINE_string("spm_model_file", None, "SentencePiece model, exported as an asset.")
    flags.DEFINE_string("vocab_file", None, "WordPiece vocab.txt (instead of --spm_model_file), exported as an asset.")
    flags.DEFINE_integer("train_batch_size", d.train_batch_size, "Global batch (all replicas, all micro-steps).")
    flags.DEFINE_integer("eval_batch_size", d.eval_batch_size, "Eval batch.")
    flags.DEFINE_integer("max_seq_length", d.max_seq_length, "Must match the data (metadata.json).")
    flags.DEFINE_integer("max_predictions_per_seq", d.max_predictions_per_seq, "Must match the data.")
    flags.DEFINE_integer("num_train_steps", d.num_train_steps, "Optimizer steps.")
    flags.DEFINE_integer("num_warmup_steps", d.num_warmup_steps, "Linear warmup steps.")
    flags.DEFINE_float("learning_rate", d.learning_rate, "Peak learning rate.")
    flags.DEFINE_float("poly_power", d.poly_power, "Polynomial decay power.")
    flags.DEFINE_integer("start_warmup_step", d.start_warmup_step, "The step warmup starts from (LR < 0 before it, "
                         "as the original).")
    flags.DEFINE_bool("init_from_group0", d.init_from_group0, "With --init_checkpoint: groups it lacks start from "
                      "its group 0 (grow num_hidden_groups).")
    flags.DEFINE_enum("optimizer", d.optimizer, ["lamb", "adamw"], "As the original (no bias correction).")
    flags.DEFINE_integer("save_checkpoints_steps", d.save_checkpoints_steps, "Checkpoint every N steps.")
    flags.DEFINE_integer("keep_checkpoint_max", d.keep_checkpoint_max, "Checkpoints kept.")
    flags.DEFINE_bool("do_eval", d.do_eval, "Evaluate at each checkpoint and at the end; keep the best.")
    flags.DEFINE_integer("max_eval_steps", d.max_eval_steps, "Eval batches.")
    flags.DEFINE_enum("strategy", "default", STRATEGIES, "tf.distribute strategy (multi_worker reads TF_CONFIG).")
    flags.DEFINE_string("tpu", None, "TPU name or address for --strategy=tpu.")
    flags.DEFINE_enum("mixed_precision", d.mixed_precision, sorted(PRECISIONS), "Compute dtype policy.")
    flags.DEFINE_bool("jit_compile", d.jit_compile, "XLA-compile the per-replica step.")
    flags.DEFINE_integer("grad_accum_steps", d.grad_accum_steps, "Micro-batches per optimizer step.")
    flags.DEFINE_integer("seed", d.seed, "Seed of weights init and data order.")
    flags.DEFINE_bool("deterministic", d.deterministic, "Deterministic TF ops (bit-reproducible on CPU).")
    flags.DEFINE_integer("log_every_steps", d.log_every_steps, "Progress/TensorBoard interval.")
    flags.DEFINE_bool("export", True, "Write SavedModels at the end.")
    flags.DEFINE_integer("demo_minutes", 3, "Demo only: minutes of training (about).")
    flags.DEFINE_string("demo_dir", "albert_tf_demo", "Demo only: where everything goes.")


def settings_from_flags(metadata: dict) -> TrainSettings:
    """TrainSettings; sequence length and masking width default to the data's."""
    values = {name: FLAGS[name].value for name in TrainSettings.__dataclass_fields__
              if name in FLAGS and name not in ("verbose",)}
    for name in ("max_seq_length", "max_predictions_per_seq"):
        if not FLAGS[name].present:
            values[name] = metadata[name]
    return TrainSettings(**values)


def _check_vocabulary(metadata: dict, input_file: str, spm_model_file, vocab_file):
    """The vocabulary exported with the model must be the one the data was made with."""
    import hashlib

    from albert_tf.inputs.pretraining import DataError
    from albert_tf.tokenization import read_bytes

    if spm_model_file and vocab_file:
        raise DataError("give at most one of --spm_model_file and --vocab_file")
    flag, given = ("--vocab_file", vocab_file) if vocab_file else ("--spm_model_file", spm_model_file)
    if not given:
        return
    try:
        vocabulary = read_bytes(given)
    except OSError as error:
        raise DataError(f"{flag} {given}: cannot be read ({error.strerror or error})") from None
    recorded = metadata.get("vocab_sha256")
    if recorded and hashlib.sha256(vocabulary).hexdigest() != recorded:
        raise DataError(f"{given}: not the vocabulary {input_file} was made with "
                        f"(metadata.json vocab_sha256 {recorded[:12]}..., vocab_type {metadata.get('vocab_type')})")


def pretrain(settings: TrainSettings, albert_config_file: str, input_file: str, eval_file=None,
             init_checkpoint=None, spm_model_file=None, strategy_name="default", tpu=None, export=True,
             metadata=None, vocab_file=None) -> dict:
    """The whole job; returns the summary (also written to `output_dir/train_summary.json`)."""
    import keras
    import tensorflow as tf

    from albert_tf.config import AlbertConfig
    from albert_tf.inputs import pretraining as inputs_lib
    from albert_tf.training import PretrainingRun, TrainingError, make_strategy

    if settings.init_from_group0 and not init_checkpoint:
        raise TrainingError("--init_from_group0 needs --init_checkpoint (the checkpoint whose group 0 starts "
                            "every group)")
    keras.utils.set_random_seed(settings.seed)
    if settings.deterministic:
        tf.config.experimental.enable_op_determinism()
    config = AlbertConfig.from_json_file(albert_config_file)
    train_files = inputs_lib.expand_patterns(input_file)
    metadata = metadata or inputs_lib.metadata_for_files(train_files)
    inputs_lib.check_compatible(metadata, input_file, settings.max_seq_length, settings.max_predictions_per_seq,
                                config.vocab_size)
    _check_vocabulary(metadata, input_file, spm_model_file, vocab_file)
    eval_files = None
    if eval_file:
        eval_files = inputs_lib.expand_patterns(eval_file)
        inputs_lib.check_compatible(inputs_lib.metadata_for_files(eval_files), eval_file, settings.max_seq_length,
                                    settings.max_predictions_per_seq, config.vocab_size)
    os.makedirs(settings.output_dir, exist_ok=True)
    strategy = make_strategy(strategy_name, tpu)
    run = PretrainingRun(strategy, config, settings, train_files, metadata, eval_files, init_checkpoint,
                         spm_model_file, vocab_file)
    summary = run.train()
    summary["outputs"] = run.finish(export=export)
    if run.chief:
        with open(os.path.join(settings.output_dir, "train_summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
    return summary


def main(argv):
    from albert_tf.checkpoints import CheckpointError
    from albert_tf.config import ConfigError
    from albert_tf.inputs.pretraining import DataError
    from albert_tf.training import TrainingError

    del argv
    logging.getLogger().setLevel(logging.INFO)
    try:
        if FLAGS.input_file is None:
            from albert_tf import demo

            demo.run_demo(FLAGS.demo_dir, minutes=FLAGS.demo_minutes)
            return
        missing = [name for name in ("albert_config_file", "output_dir") if not FLAGS[name].value]
        if missing:
            sys.exit("error: " + ", ".join(f"--{m}" for m in missing) + " required with --input_file")
        from albert_tf.inputs.pretraining import expand_patterns, metadata_for_files

        metadata = metadata_for_files(expand_patterns(FLAGS.input_file))
        summary = pretrain(settings_from_flags(metadata), FLAGS.albert_config_file, FLAGS.input_file,
                           FLAGS.eval_file, FLAGS.init_checkpoint, FLAGS.spm_model_file, FLAGS.strategy, FLAGS.tpu,
                           FLAGS.export, metadata, FLAGS.vocab_file)
        print(json.dumps({k: v for k, v in summary.items() if k != "history"}, indent=2, default=str))
    except (ConfigError, CheckpointError, DataError, TrainingError) as error:
        sys.exit(f"error: {error}")


if __name__ == "__main__":
    from absl import app

    define_flags()
    app.run(main)
