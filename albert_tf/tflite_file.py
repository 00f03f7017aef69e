"""Reading a .tflite file we exported: its metadata (`max_seq_length`, class names) and a runner of its inputs.

The reading side of `albert_tf.export.tflite` and `albert_tf.export.early_exit` (which write the
files), apart so that fine-tuning (`--init_checkpoint x.tflite`), `predict` and the export's own
verification all read a file the same way without importing the writer. LiteRT loads only when a
file is run. A file answers through `serving_default`, or, an early-exit classifier's file,
through `serve_early_exit` (its `patience` and `threshold` inputs given per request; full depth
unless asked).
"""

import json
import os
from typing import Dict, Optional, Tuple

import numpy as np

from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError
from albert_tf.request_checks import ServingInputError, check_patience, check_tflite_inputs
from albert_tf.run_layout import CONFIG_FILE

TFLITE_SUFFIX = ".tflite"  # what `predict --model_dir` and `--init_checkpoint` take for a TFLite file
MAX_SEQ_LENGTH_METADATA = "albert_tf.max_seq_length"
LABELS_METADATA = "albert_tf.labels"  # a JSON list of the class names
SERVING_SIGNATURE = "serving_default"
EARLY_EXIT_SIGNATURE = "serve_early_exit"  # the early-exit file's one signature (`albert_tf.export.early_exit`)
EARLY_EXIT_TFLITE_NAME = "albert_early_exit_float32.tflite"
EARLY_EXIT_INPUTS = ("patience", "threshold")  # the early-exit signature's inputs besides the ids


class TFLiteFileError(AlbertError, ValueError):
    """A .tflite file that cannot be run (missing, not ours, no `serving_default`), or a bad runner setting."""


def is_tflite_path(path: Optional[str]) -> bool:
    """Whether `path` names a .tflite file (what the CLIs run through LiteRT instead of loading into Keras)."""
    return bool(path) and path.endswith(TFLITE_SUFFIX)


def file_metadata(model_file: str) -> Dict[str, str]:
    """The albert_tf records of a .tflite file (`MAX_SEQ_LENGTH_METADATA`, `LABELS_METADATA`), read once."""
    from ai_edge_litert import schema_py_generated as schema

    with open(model_file, "rb") as f:
        model = schema.Model.GetRootAs(f.read(), 0)
    records = {}
    for i in range(model.MetadataLength()):
        entry = model.Metadata(i)
        name = entry.Name().decode()
        if name in (MAX_SEQ_LENGTH_METADATA, LABELS_METADATA):
            records[name] = model.Buffers(entry.Buffer()).DataAsNumpy().tobytes().decode("utf-8")
    return records


def max_seq_length_of(model_file: str, records: Optional[Dict[str, str]] = None) -> Optional[int]:
    """The `max_seq_length` a .tflite file was exported for (None: a file without the record)."""
    text = (records if records is not None else file_metadata(model_file)).get(MAX_SEQ_LENGTH_METADATA)
    return None if text is None else int(text)


def labels_of(model_file: str, records: Optional[Dict[str, str]] = None) -> Optional[Tuple[str, ...]]:
    """The class names of a .tflite classifier fine-tuned with names (None: no names recorded)."""
    text = (records if records is not None else file_metadata(model_file)).get(LABELS_METADATA)
    return None if text is None else tuple(json.loads(text))


def file_input_shapes(runner) -> Dict[str, Tuple[int, ...]]:
    """{input: shape} of a signature runner's inputs, -1 where the file takes any size."""
    details = runner.get_input_details()
    return {name: tuple(int(d) for d in detail["shape_signature"]) for name, detail in details.items()}


class TFLiteRunner:
    """A .tflite file's `serving_default` (or `serve_early_exit`) signature, loaded once, run on checked inputs
    of any length.

    The inputs are checked first (`check_tflite_inputs`: names, shapes, value
    ranges, a length up to the file's `max_seq_length`; an early-exit file's
    `patience` in [1, L]), against `config` or the
    `albert_config.json` beside the file: the file itself refuses bad values only
    with GATHER's "index out of bounds". LiteRT's signature runner resizes the
    inputs to the request's shape and allocates the tensors on every call
    (`resize_tensor_input`, `allocate_tensors`). `num_threads`: LiteRT's kernel
    threads (default: every CPU this process may use, as TensorFlow; LiteRT
    alone would take one).
    """

    def __init__(self, model_file: str, config=None, num_threads: Optional[int] = None):
        from ai_edge_litert.interpreter import Interpreter  # the runtime loads only to run a file

        self.model_file = model_file
        if num_threads is not None and num_threads < 1:
            raise TFLiteFileError(f"num_threads {num_threads}: must be at least 1")
        if not os.path.isfile(model_file):
            raise TFLiteFileError(f"{model_file}: no such file")
        self.num_threads = num_threads or usable_cpus()
        try:
            interpreter = Interpreter(model_path=model_file, num_threads=self.num_threads)
            signatures = interpreter.get_signature_list()
        except ValueError as error:  # LiteRT's one error type for a missing, unreadable or foreign file
            raise TFLiteFileError(
                f"{model_file}: not a TFLite file with a serving_default signature ({error})"
            ) from None
        self.signature = next((s for s in (SERVING_SIGNATURE, EARLY_EXIT_SIGNATURE) if s in signatures), None)
        if self.signature is None:
            raise TFLiteFileError(
                f"{model_file}: has no {SERVING_SIGNATURE} or {EARLY_EXIT_SIGNATURE} signature "
                f"(it has {', '.join(signatures) or 'none'}); not a file albert_tf exported"
            )
        self.runner = interpreter.get_signature_runner(self.signature)
        self.config = config or AlbertConfig.from_json_file(
            os.path.join(os.path.dirname(os.path.abspath(model_file)), CONFIG_FILE)
        )
        shapes = file_input_shapes(self.runner)
        self.input_shapes = {name: shape for name, shape in shapes.items() if name not in EARLY_EXIT_INPUTS}
        records = file_metadata(model_file)
        self.max_seq_length = max_seq_length_of(model_file, records)
        self.labels = labels_of(model_file, records)
        self.output_names = sorted(self.runner.get_output_details())

    @property
    def early_exit(self) -> bool:
        """Whether the file exits early (`serve_early_exit`: `patience` and `threshold` per request)."""
        return self.signature == EARLY_EXIT_SIGNATURE

    @property
    def num_exits(self) -> Optional[int]:
        """An early-exit file's layer applications (the largest patience, full depth); None for another file."""
        return self.config.num_hidden_layers * self.config.inner_group_num if self.early_exit else None

    def __call__(
        self, inputs: Dict[str, np.ndarray], patience: Optional[int] = None, threshold: float = 0.0
    ) -> Dict[str, np.ndarray]:
        """The file's outputs; an early-exit file's at `patience` (default: full depth), with `layers_used`."""
        check_tflite_inputs(inputs, self.config, self.input_shapes, self.max_seq_length)
        if not self.early_exit:
            if patience is not None:
                raise ServingInputError(f"patience: {self.model_file} has no {EARLY_EXIT_SIGNATURE}: full depth only")
            return self.runner(**inputs)
        patience = self.num_exits if patience is None else patience
        check_patience(patience, self.num_exits)
        if np.ndim(threshold) != 0:
            raise ServingInputError(f"threshold: must be a scalar, got {np.asarray(threshold).tolist()!r}")
        return self.runner(**inputs, patience=np.array(patience, "int32"), threshold=np.array(threshold, "float32"))


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def run_tflite(model_file: str, inputs: Dict[str, np.ndarray], config=None) -> Dict[str, np.ndarray]:
    """Runs a .tflite file's signature once (`TFLiteRunner`; an early-exit file at full depth) at the inputs' length."""
    return TFLiteRunner(model_file, config)(inputs)
