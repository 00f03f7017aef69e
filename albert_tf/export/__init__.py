"""Exports any albert_tf model: a SavedModel for TF Serving, or TFLite files for phones.

    python -m albert_tf.export --model_dir runs/base/final --output_dir exports/albert \
        --format saved_model [--version 3] [--max_seq_length 128]
    python -m albert_tf.export --model_dir runs/base/final --output_dir exports/tflite \
        --format tflite --quantize {none,float16,dynamic_int8}

One module per job: `signatures` (the serving functions), `saved_model`,
`warmup` (TF Serving's warm-up requests), `verify` (a SavedModel checked
against its Keras model), `tflite`, `from_run` (the SavedModels at the
end of a pretraining run), `common` (the error, test inputs, comparison);
`__main__` is the CLI.
"""

from albert_tf.export.common import ExportError
from albert_tf.export.from_run import export_pretraining_run
from albert_tf.export.saved_model import export_saved_model, next_version
from albert_tf.export.tflite import QUANTIZATIONS, TFLITE_NAMES, export_tflite, run_tflite, tokenizer_test_vectors
from albert_tf.export.verify import reference_text_inputs
from albert_tf.export.warmup import WARMUP_FILE

__all__ = [
    "ExportError",
    "QUANTIZATIONS",
    "TFLITE_NAMES",
    "WARMUP_FILE",
    "export_pretraining_run",
    "export_saved_model",
    "export_tflite",
    "next_version",
    "reference_text_inputs",
    "run_tflite",
    "tokenizer_test_vectors",
]
