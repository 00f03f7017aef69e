"""What `python -m albert_tf.export --format` writes: one registered target per format.

A target refuses the settings that do not apply to it (before the model is loaded), then
writes its export from the loaded model, its tokenizer and `ExportSettings`. A new format
is one `ExportTarget` subclass registered with `@register`; `--format` offers every
registered name.

Example:

>>> sorted(TARGETS)
['early_exit_tflite', 'saved_model', 'tflite']
>>> TARGETS["tflite"].check(ExportSettings(output_dir="out", precision="bfloat16"))
Traceback (most recent call last):
...
albert_tf.export.common.ExportError: --precision bfloat16: TFLite has no bf16 kernels; use --quantize for TFLite
"""

import abc
import dataclasses
from typing import Dict, Optional, Tuple

from albert_tf.export.common import QUANTIZATIONS, ExportError
from albert_tf.export.precision import PRECISIONS
from albert_tf.options import option


@dataclasses.dataclass(frozen=True)
class ExportSettings:
    """Every setting that shapes an export (the `albert_tf.export` flags of the same names)."""

    output_dir: str = option(
        help="SavedModel: TF Serving's model base path (versions go under it). "
        "TFLite: the directory for the .tflite file and its side files."
    )
    max_seq_length: int = option(128, "Text signatures' truncation / TFLite input length.")
    max_predictions_per_seq: int = option(20, "TFLite MLM model: masked positions input length.")
    version: Optional[int] = option(None, "SavedModel version directory (default: next free number).")
    top_k: int = option(5, "MLM candidates returned by the SavedModel.")
    jit_compile: bool = option(
        False,
        "SavedModel: XLA-compile the model in serving_default (faster on "
        "CPU; compiles once per input shape; the server needs XLA's CPU JIT).",
    )
    precision: str = option(
        "float32",
        "SavedModel compute dtype: bfloat16 runs the matmuls in bf16 (float32 weights, LayerNorm, softmax, "
        "logits); faster on CPUs with AVX512_BF16 or AMX.",
        choices=PRECISIONS,
    )
    quantize: str = option(
        "none",
        "TFLite: float32, float16 or int8 weights (dynamic_int8), or int8 weights and activations (full_int8).",
        choices=QUANTIZATIONS,
    )
    # full_int8: the (text_a, text_b) pairs to calibrate on (the command reads --representative_data)
    calibration_texts: Optional[Tuple[Tuple[str, Optional[str]], ...]] = None


class ExportTarget(abc.ABC):
    """One `--format`: its name, a line of help, the settings it refuses, and how it writes."""

    name: str
    help: str

    def check(self, settings: ExportSettings) -> None:
        """Raises `ExportError` for a setting that does not apply to this format (before any loading)."""
        return None

    def check_model(self, model) -> None:
        """Raises `ExportError` for a model this format cannot write (before anything is written)."""
        return None

    @abc.abstractmethod
    def write(self, model, tokenizer, settings: ExportSettings) -> str:
        """Writes the export; returns its path."""


TARGETS: Dict[str, ExportTarget] = {}


def register(target_class):
    """Class decorator: one instance of `target_class` under its `name`."""
    TARGETS[target_class.name] = target_class()
    return target_class


def _refuse_calibration(settings: ExportSettings, format_name: str) -> None:
    if settings.calibration_texts:
        raise ExportError(
            f"calibration texts: only --format tflite --quantize full_int8 calibrates (got --format {format_name})"
        )


def _refuse_bf16(settings: ExportSettings) -> None:
    if settings.precision != "float32":
        raise ExportError(f"--precision {settings.precision}: TFLite has no bf16 kernels; use --quantize for TFLite")


@register
class SavedModelTarget(ExportTarget):
    name = "saved_model"
    help = "a SavedModel for TF Serving (a version directory under --output_dir)"

    def check(self, settings):
        _refuse_calibration(settings, self.name)

    def write(self, model, tokenizer, settings):
        from albert_tf.export.saved_model import export_saved_model

        return export_saved_model(
            model,
            settings.output_dir,
            settings.version,
            max_seq_length=settings.max_seq_length,
            top_k=settings.top_k,
            tokenizer=tokenizer,
            jit_compile=settings.jit_compile,
            precision=settings.precision,
        )


@register
class TFLiteTarget(ExportTarget):
    name = "tflite"
    help = "a builtin-ops .tflite file for phones (--quantize); an early-exit classifier's early-exit file too"

    def check(self, settings):
        _refuse_bf16(settings)

    def write(self, model, tokenizer, settings):
        from albert_tf.export.early_exit import EARLY_EXIT_MODELS, export_early_exit_tflite
        from albert_tf.export.tflite import export_tflite

        path = export_tflite(
            model,
            settings.output_dir,
            settings.quantize,
            settings.max_seq_length,
            settings.max_predictions_per_seq,
            tokenizer=tokenizer,
            calibration_texts=settings.calibration_texts,
        )
        if isinstance(model, EARLY_EXIT_MODELS):
            export_early_exit_tflite(model, settings.output_dir, settings.max_seq_length, tokenizer)
        return path


@register
class EarlyExitTFLiteTarget(ExportTarget):
    name = "early_exit_tflite"
    help = "an early-exit classifier's .tflite file alone, which stops at a patience given per request (float32)"

    def check(self, settings):
        _refuse_bf16(settings)
        _refuse_calibration(settings, self.name)
        if settings.quantize != "none":
            raise ExportError(f"--quantize {settings.quantize}: the early-exit TFLite file is float32 only")

    def check_model(self, model):
        from albert_tf.export.early_exit import check_early_exit_model

        check_early_exit_model(model)

    def write(self, model, tokenizer, settings):
        from albert_tf.export.early_exit import export_early_exit_tflite

        return export_early_exit_tflite(model, settings.output_dir, settings.max_seq_length, tokenizer)
