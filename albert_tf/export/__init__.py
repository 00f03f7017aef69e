"""Exports any albert_tf model: a SavedModel for TF Serving, or TFLite files for phones.

    python -m albert_tf.export --model_dir runs/base/final --output_dir exports/albert \
        --format saved_model [--version 3] [--max_seq_length 128]
    python -m albert_tf.export --model_dir runs/base/final --output_dir exports/tflite \
        --format tflite --quantize {none,float16,dynamic_int8,full_int8} \
        [--representative_data dev.tsv --representative_task sst-2]

One module per job: `signatures` (the serving functions), `saved_model`,
`warmup` (TF Serving's warm-up requests), `verify` (a SavedModel checked
against its Keras model), `tflite`, `full_integer` and `representative` (full-integer int8 and its
calibration text), `from_run` (the SavedModels at the
end of a pretraining run), `common` (the error, test inputs, comparison),
`early_exit` (early exit's signatures and TFLite file), `targets` (the registered `--format`s); the CLI is
`albert_tf.cli.export_model`.
"""

import importlib
import importlib.util

# Imported on first use, so `python -m albert_tf.export` reaches the CLI (which quiets TensorFlow's
# start-up lines) before TensorFlow is imported.
_LAZY = {
    "ExportError": "common",
    "export_pretraining_run": "from_run",
    "exported_versions": "from_run",
    "export_saved_model": "saved_model",
    "next_version": "saved_model",
    "QUANTIZATIONS": "tflite",
    "TFLITE_NAMES": "tflite",
    "export_tflite": "tflite",
    "run_tflite": "tflite",
    "tokenizer_test_vectors": "tflite",
    "reference_text_inputs": "verify",
    "WARMUP_FILE": "warmup",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    if importlib.util.find_spec(f"{__name__}.{name}") is not None:  # a submodule, e.g. `export.verify`
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
