"""`python -m albert_tf.export`: a SavedModel for TF Serving, or TFLite files (see the package docstring).

`--model_dir` takes whatever `albert_tf.formats.load` does (our
model dirs, run_pretraining output, a `.keras` task model, Google's TF1
checkpoints).
"""

import json

from absl import flags

from albert_tf import formats
from albert_tf.cli.app import run_cli
from albert_tf.cli.backend import require_tensorflow
from albert_tf.cli.flags import define_vocabulary_flags, vocabulary_flag_values
from albert_tf.cli.run_record import record_settings
from albert_tf.export.common import ExportError
from albert_tf.export.patience_signatures import EARLY_EXIT_MODELS, export_early_exit_tflite
from albert_tf.export.precision import PRECISIONS
from albert_tf.export.representative import DEFAULT_SAMPLES
from albert_tf.export.saved_model import export_saved_model
from albert_tf.export.tflite import QUANTIZATIONS, export_tflite
from albert_tf.tokenization import resolve_tokenizer

FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_string(
        "model_dir",
        None,
        "The model: our model dir, a run_pretraining output dir, a .keras "
        "file (or a dir with model.keras), or Google's TF1 checkpoint.",
    )
    flags.DEFINE_string(
        "output_dir",
        None,
        "SavedModel: TF Serving's model base path (versions go under it). "
        "TFLite: the directory for the .tflite file and its side files.",
    )
    flags.DEFINE_enum("format", "saved_model", ["saved_model", "tflite"], "What to write.")
    flags.DEFINE_enum(
        "quantize",
        "none",
        list(QUANTIZATIONS),
        "TFLite: float32, float16 or int8 weights (dynamic_int8), or int8 weights and activations (full_int8).",
    )
    flags.DEFINE_string(
        "representative_data",
        None,
        "full_int8: real text to calibrate on, a text file (one example per line) or a GLUE TSV "
        "(with --representative_task).",
    )
    flags.DEFINE_string("representative_task", None, "full_int8: the GLUE task whose TSV --representative_data is.")
    flags.DEFINE_integer(
        "representative_samples", DEFAULT_SAMPLES, "full_int8: how many examples (from the top) to calibrate on."
    )
    flags.DEFINE_enum(
        "precision",
        "float32",
        list(PRECISIONS),
        "SavedModel compute dtype: bfloat16 runs the matmuls in bf16 (float32 weights, LayerNorm, softmax, "
        "logits); faster on CPUs with AVX512_BF16 or AMX.",
    )
    flags.DEFINE_integer("max_seq_length", 128, "Text signatures' truncation / TFLite input length.")
    flags.DEFINE_integer("max_predictions_per_seq", 20, "TFLite MLM model: masked positions input length.")
    flags.DEFINE_integer("version", None, "SavedModel version directory (default: next free number).")
    flags.DEFINE_string("albert_config_file", None, "Config for a TF1 checkpoint without albert_config.json.")
    define_vocabulary_flags(" Default: the one beside the weights.")
    flags.DEFINE_integer("top_k", 5, "MLM candidates returned by the SavedModel.")
    flags.DEFINE_bool(
        "jit_compile",
        False,
        "SavedModel: XLA-compile the model in serving_default (faster on "
        "CPU; compiles once per input shape; the server needs XLA's CPU JIT).",
    )
    flags.mark_flags_as_required(["model_dir", "output_dir"])


def main(argv):
    del argv
    require_tensorflow("albert_tf.export", "writes TensorFlow graphs (SavedModel, TFLite)")
    if FLAGS.format == "tflite" and FLAGS.precision != "float32":
        raise ExportError(f"--precision {FLAGS.precision}: TFLite has no bf16 kernels; use --quantize for TFLite")
    if FLAGS.format == "saved_model":
        for flag in ("representative_data", "representative_task"):
            if FLAGS[flag].value:
                raise ExportError(
                    f"--{flag}: only --format tflite --quantize full_int8 calibrates (got --format saved_model)"
                )
    given = resolve_tokenizer(do_lower_case=FLAGS.do_lower_case, required=False, files=vocabulary_flag_values())
    loaded = formats.load(FLAGS.model_dir, FLAGS.albert_config_file, given, FLAGS.do_lower_case)
    # Written once the export has checked its flags and holds the output directory's lock.
    record_settings(FLAGS.output_dir, loaded.tokenizer)
    if FLAGS.format == "saved_model":
        path = export_saved_model(
            loaded.model,
            FLAGS.output_dir,
            FLAGS.version,
            max_seq_length=FLAGS.max_seq_length,
            top_k=FLAGS.top_k,
            tokenizer=loaded.tokenizer,
            jit_compile=FLAGS.jit_compile,
            precision=FLAGS.precision,
        )
    else:
        path = export_tflite(
            loaded.model,
            FLAGS.output_dir,
            FLAGS.quantize,
            FLAGS.max_seq_length,
            FLAGS.max_predictions_per_seq,
            tokenizer=loaded.tokenizer,
            representative_data=FLAGS.representative_data,
            representative_task=FLAGS.representative_task,
            representative_samples_count=FLAGS.representative_samples,
        )
        if isinstance(loaded.model, EARLY_EXIT_MODELS):
            export_early_exit_tflite(loaded.model, FLAGS.output_dir, FLAGS.max_seq_length)
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
