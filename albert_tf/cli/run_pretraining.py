"""Pretrains ALBERT (MLM + SOP) on data_prep's TFRecords; with no flags, runs a demo.

    python -m albert_tf.run_pretraining --input_file data/pretrain \
        --albert_config_file configs/albert_base_v2.json --output_dir runs/base \
        --spm_model_file vocab/30k-clean.model \
        --train_batch_size 4096 --num_train_steps 125000 --num_warmup_steps 3125 \
        --learning_rate 0.00176 --optimizer lamb [--strategy mirrored|multi_worker|tpu]

    python -m albert_tf.run_pretraining      # the built-in demo (albert_tf.cli.demo)

Flag names and defaults are the original's where it has them. Running the
same command again resumes from the last checkpoint in `--output_dir`. At the
end, `final/` holds the model and `saved_model/{backbone,pretrainer}/<step>/`
the SavedModels (`--noexport` to skip them).
"""

import functools
import json

from absl import flags

from albert_tf import preemption
from albert_tf.cli.app import our_flags, run_cli
from albert_tf.cli.backend import define_backend_flag
from albert_tf.cli.flags import (
    define_option_flags,
    define_vocabulary_flags,
    settings_from_flags,
    vocabulary_flag_values,
)
from albert_tf.cli.run_record import record_settings
from albert_tf.distribution import DistributionSettings
from albert_tf.errors import AlbertError
from albert_tf.pretraining.settings import PretrainSettings
from albert_tf.tokenization import resolve_tokenizer

FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_string(
        "input_file",
        None,
        "data_prep output directories, globs or shard files, comma-separated. With no flag at all the demo runs.",
    )
    flags.DEFINE_string("eval_file", None, "Eval shards (default: --input_file, as the original).")
    flags.DEFINE_string("albert_config_file", None, "ALBERT config JSON.")
    flags.DEFINE_string("init_checkpoint", None, "Warm start: Google's TF1 checkpoint or ours (weights only).")
    # Lowercasing is the data's (metadata.json), so there is no --do_lower_case here.
    define_vocabulary_flags(" Saved into final/ and the SavedModels.", lower_case_flag=False)
    define_option_flags(PretrainSettings)
    define_option_flags(DistributionSettings)
    flags.DEFINE_integer("max_seq_length", None, "Must match the data (default: the data's metadata.json).")
    flags.DEFINE_integer("max_predictions_per_seq", None, "Must match the data (default: the data's).")
    flags.DEFINE_bool(
        "do_train",
        True,
        "With --do_train=false: evaluate every checkpoint kept in --output_dir on --eval_file (default "
        "--input_file) and print one JSON line each; nothing is trained or written.",
    )
    define_backend_flag()
    flags.DEFINE_bool("export", True, "Write SavedModels at the end.")
    flags.DEFINE_bool(
        "dry_run",
        False,
        "Check the flags, data, config, vocabulary, memory and a resume's settings, print the plan (rows, "
        "epochs, batch per replica, memory) as JSON, and train and write nothing.",
    )
    flags.DEFINE_float("demo_minutes", 3.0, "Demo only: minutes of training (about).")
    flags.DEFINE_string("demo_dir", "albert_tf_demo", "Demo only: where everything goes.")


DEMO_FLAGS = ("demo_minutes", "demo_dir", "backend")


def runs_the_demo() -> bool:
    """Only a bare command (or one with demo flags alone) runs the demo; any other flag means a real run."""
    return not any(flag.present for flag in our_flags() if flag.name not in DEMO_FLAGS)


def check_flags():
    """What the flags alone say is missing: said before Keras and TensorFlow load (seconds)."""
    if runs_the_demo():
        return
    if FLAGS.do_train and not FLAGS.input_file:
        raise AlbertError("--input_file required (data_prep's output); run without any flag for the demo")
    missing = [name for name in ("albert_config_file", "output_dir") if not FLAGS[name].value]
    if missing:
        mode = "--input_file" if FLAGS.do_train else "--nodo_train"
        raise AlbertError(", ".join(f"--{m}" for m in missing) + f" required with {mode}")
    if FLAGS.dry_run and not FLAGS.do_train:
        raise AlbertError("--dry_run plans a training run; drop --nodo_train")
    if not FLAGS.do_train and not (FLAGS.eval_file or FLAGS.input_file):
        raise AlbertError("--nodo_train needs --eval_file (the data to evaluate the checkpoints on)")


def main(argv):
    del argv
    # Imported once the flags are read (TensorFlow and Keras take seconds): --help and flag mistakes are fast.
    from albert_tf.cli import demo
    from albert_tf.compute import make_compute
    from albert_tf.export import exported_versions
    from albert_tf.inputs.shard_reader import resolve_input
    from albert_tf.pretraining.job import data_tokenizer, evaluate_checkpoints, pretrain

    if runs_the_demo():
        with preemption.stop_signals():  # the demo's training stops as a run's does (run it again to resume)
            demo.run_demo(FLAGS.demo_dir, minutes=FLAGS.demo_minutes)
        return

    distribution = settings_from_flags(DistributionSettings)
    # Before any TF op or JAX computation: multi-worker collectives and JAX's processes are set up at startup.
    compute = make_compute(distribution)
    # Read once; its lengths are the defaults. Evaluating only: the eval data are the data.
    if FLAGS.do_train:
        data_input = resolve_input(FLAGS.input_file)
    else:
        data_input = (
            resolve_input(FLAGS.eval_file, "--eval_file") if FLAGS.eval_file else resolve_input(FLAGS.input_file)
        )
    settings = settings_from_flags(
        PretrainSettings,
        max_seq_length=FLAGS.max_seq_length or data_input.data.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq or data_input.data.max_predictions_per_seq,
    )
    if not FLAGS.do_train:
        checkpoints = evaluate_checkpoints(settings, FLAGS.albert_config_file, data_input, compute=compute)
        for step, metrics in checkpoints.items():
            print(json.dumps({"global_step": step, **metrics}), flush=True)
        return
    # The flags' vocabulary, resolved once: pretrain() checks it against the data's.
    tokenizer = resolve_tokenizer(
        files=vocabulary_flag_values(), do_lower_case=data_input.data.do_lower_case, required=False
    )
    run = functools.partial(
        pretrain,
        settings,
        FLAGS.albert_config_file,
        data_input,
        eval_file=FLAGS.eval_file,
        init_checkpoint=FLAGS.init_checkpoint,
        tokenizer=tokenizer,
        compute=compute,
    )
    if FLAGS.dry_run:
        print(json.dumps(run(dry_run=True), indent=2))
        return
    # Written once pretrain() has checked its inputs and holds the lock; the vocabulary is the data's.
    if compute.chief:  # one record of the run, however many processes share the directory
        processes = compute.describe()  # JAX's processes and devices (found, or given by flags)
        record_settings(
            settings.output_dir,
            tokenizer_loader=lambda: data_tokenizer(data_input, tokenizer),
            facts={"processes": processes} if processes is not None else None,
        )
    with preemption.stop_signals():  # SIGTERM/SIGINT: save the current step, exit 75
        summary = run()
        if FLAGS.export and summary["outputs"]:
            preemption.raise_if_requested("training finished and final/ is written; the SavedModels are not")
            # A signal from here on lets the export finish (it publishes whole directories only).
            summary["outputs"].update(
                exported_versions(settings.output_dir, summary["end_step"], settings.max_seq_length)
            )
    print(json.dumps({k: v for k, v in summary.items() if k != "history"}, indent=2, default=str))


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    run_cli(main, define_flags, check_flags=check_flags)


if __name__ == "__main__":
    cli()
