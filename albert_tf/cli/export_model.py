"""`python -m albert_tf.export`: a SavedModel for TF Serving, or TFLite files (see the package docstring).

`--model_dir` takes whatever `albert_tf.formats.load` does (our
model dirs, run_pretraining output, a `.keras` task model, Google's TF1
checkpoints).
"""

import json

from absl import flags

from albert_tf.cli.app import run_cli
from albert_tf.cli.backend import require_tensorflow
from albert_tf.cli.calibration import calibration_from_flags
from albert_tf.cli.flags import define_option_flags, define_vocabulary_flags, given_tokenizer, settings_from_flags
from albert_tf.cli.run_record import record_settings
from albert_tf.export.representative import DEFAULT_SAMPLES
from albert_tf.export.targets import TARGETS, ExportSettings

FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_string(
        "model_dir",
        None,
        "The model: our model dir, a run_pretraining output dir, a .keras "
        "file (or a dir with model.keras), or Google's TF1 checkpoint.",
    )
    flags.DEFINE_enum(
        "format",
        "saved_model",
        list(TARGETS),
        "What to write: " + "; ".join(f"{name}: {target.help}" for name, target in TARGETS.items()) + ".",
    )
    define_option_flags(ExportSettings)
    flags.DEFINE_string(
        "representative_data",
        None,
        "full_int8: real text to calibrate on, a text file (one example per line) or a GLUE TSV "
        "(with --representative_task).",
    )
    flags.DEFINE_string("representative_task", None, "full_int8: the GLUE task whose TSV --representative_data is.")
    flags.DEFINE_integer(
        "representative_samples",
        DEFAULT_SAMPLES,
        "full_int8: how many examples (from the top) to calibrate on.",
    )
    flags.DEFINE_string("albert_config_file", None, "Config for a TF1 checkpoint without albert_config.json.")
    define_vocabulary_flags(" Default: the one beside the weights.")
    flags.mark_flags_as_required(["model_dir", "output_dir"])


def main(argv):
    del argv
    require_tensorflow("albert_tf.export", "writes TensorFlow graphs (SavedModel, TFLite)")
    target = TARGETS[FLAGS.format]
    settings = settings_from_flags(
        ExportSettings, calibration_texts=calibration_from_flags(FLAGS.format, FLAGS.quantize)
    )
    target.check(settings)
    from albert_tf import formats  # Keras and TensorFlow load here, after the flags

    given = given_tokenizer()
    loaded = formats.load(FLAGS.model_dir, FLAGS.albert_config_file, given, FLAGS.do_lower_case)
    target.check_model(loaded.model)
    # Written once the export has checked its flags and holds the output directory's lock.
    record_settings(FLAGS.output_dir, loaded.tokenizer)
    path = target.write(loaded.model, loaded.tokenizer, settings)
    tokenizer = loaded.tokenizer
    print(
        json.dumps(
            {
                "model": loaded.source,
                "model_class": type(loaded.model).__name__,
                "export": path,
                "tokenizer": tokenizer.metadata() | {"file": tokenizer.model_file} if tokenizer else None,
            },
            indent=2,
        )
    )


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    run_cli(main, define_flags)


if __name__ == "__main__":
    cli()
