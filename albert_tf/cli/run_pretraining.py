"""Pretrains ALBERT (MLM + SOP), or PL-BERT on phoneme data, on data_prep's TFRecords; with no flags, a demo.

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
    # Lowercasing is the data's (metadata.json), so there is no --do_lower_case here.
    define_vocabulary_flags(" Saved into final/ and the SavedModels.", lower_case_flag=False)
    define_option_flags(PretrainSettings)
    define_option_flags(DistributionSettings)
    define_backend_flag()
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
    settings_from_flags(PretrainSettings).check_inputs()


def main(argv):
    del argv
    # Imported once the flags are read (TensorFlow and Keras take seconds): --help and flag mistakes are fast.
    from albert_tf.cli import demo
    from albert_tf.compute import make_compute
    from albert_tf.export import exported_versions
    from albert_tf.pretraining.job import data_tokenizer, evaluate_checkpoints, pretrain, run_data

    if runs_the_demo():
        with preemption.stop_signals():  # the demo's training stops as a run's does (run it again to resume)
            demo.run_demo(FLAGS.demo_dir, minutes=FLAGS.demo_minutes)
        return

    distribution = settings_from_flags(DistributionSettings)
    # Before any TF op or JAX computation: multi-worker collectives and JAX's processes are set up at startup.
    compute = make_compute(distribution)
    settings = settings_from_flags(PretrainSettings)
    data = run_data(settings)  # read once (evaluating only: the eval data); its lengths are the defaults
    settings = settings.for_data(data.data)
    if not settings.do_train:
        for step, metrics in evaluate_checkpoints(settings, compute, data).items():
            print(json.dumps({"global_step": step, **metrics}), flush=True)
        return
    # The flags' vocabulary, resolved once: pretrain() checks it against the data's.
    tokenizer = resolve_tokenizer(files=vocabulary_flag_values(), do_lower_case=data.data.do_lower_case, required=False)
    if settings.dry_run:
        print(json.dumps(pretrain(settings, compute, tokenizer, data), indent=2))
        return
    # Written once pretrain() has checked its inputs and holds the lock; the vocabulary is the data's.
    if compute.chief:  # one record of the run, however many processes share the directory
        processes = compute.describe()  # JAX's processes and devices (found, or given by flags)
        facts = {"objective": data.data.objective}  # the data's (metadata.json): ALBERT's or PL-BERT's
        if processes is not None:
            facts["processes"] = processes
        record_settings(settings.output_dir, tokenizer_loader=lambda: data_tokenizer(data, tokenizer), facts=facts)
    with preemption.stop_signals():  # SIGTERM/SIGINT: save the current step, exit 75
        summary = pretrain(settings, compute, tokenizer, data)
        if settings.export and summary["outputs"]:
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
