"""The SavedModels of a finished pretraining run: `<run>/saved_model/{backbone,pretrainer}/<step>/`.

A SavedModel is a TensorFlow graph of the model: under another Keras backend (a JAX
run), a TensorFlow-backend process of its own writes it.
"""

import json
import os
import subprocess
import sys
from typing import Dict, Optional

import keras

import albert_tf
from albert_tf import formats
from albert_tf.export.common import ExportError
from albert_tf.export.saved_model import export_saved_model
from albert_tf.locking import OutputDirLock
from albert_tf.publish import remove_stale_staging

SAVED_MODEL_DIR = "saved_model"
KINDS = ("backbone", "pretrainer")


def export_pretraining_run(
    run_dir: str, version: int, max_seq_length: int, model_dir: Optional[str] = None
) -> Dict[str, str]:
    """Exports the run's `final/` model (or `model_dir`) as a backbone and a pretrainer SavedModel.

    The tokenizer (and its lowercasing) is the one saved in `final/`. A version an earlier run of the
    same command exported (published whole) is kept, and what a killed export left beside it (its
    staging copy, its lock) is removed.

    Returns `{"saved_model_backbone": path, "saved_model_pretrainer": path}`.
    """
    bases = {kind: os.path.join(run_dir, SAVED_MODEL_DIR, kind) for kind in KINDS}
    outputs = {f"saved_model_{kind}": os.path.join(base, str(version)) for kind, base in bases.items()}
    missing = [kind for kind in KINDS if not os.path.isdir(outputs[f"saved_model_{kind}"])]
    for kind in set(KINDS) - set(missing):
        if os.path.isdir(bases[kind]):
            with OutputDirLock(bases[kind]):
                remove_stale_staging(bases[kind])
    if not missing:
        return outputs
    if keras.backend.backend() != "tensorflow":
        return _export_in_tensorflow_process(run_dir, version, max_seq_length, model_dir)
    loaded = formats.load(model_dir or os.path.join(run_dir, "final"))
    model = loaded.model
    for kind, exported in (("backbone", model.backbone), ("pretrainer", model)):
        if kind not in missing:
            continue
        outputs[f"saved_model_{kind}"] = export_saved_model(
            exported,
            os.path.join(run_dir, SAVED_MODEL_DIR, kind),
            version=version,
            tokenizer=loaded.tokenizer,
            max_seq_length=max_seq_length,
        )
    return outputs


def exported_versions(run_dir: str, step: int, max_seq_length: int) -> Dict[str, str]:
    """The SavedModels of `step`: found from an earlier run of the same command (run again after it ended),
    else exported now."""
    existing = {
        f"saved_model_{kind}": os.path.join(run_dir, SAVED_MODEL_DIR, kind, str(step))
        for kind in ("backbone", "pretrainer")
    }
    if all(os.path.isdir(path) for path in existing.values()):
        return existing
    return export_pretraining_run(run_dir, version=step, max_seq_length=max_seq_length)


EXPORT_SCRIPT = (
    "import json, sys; from albert_tf.export.from_run import export_pretraining_run as export; "
    "print(json.dumps(export(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] or None)))"
)


def _export_in_tensorflow_process(run_dir: str, version: int, max_seq_length: int, model_dir: Optional[str]) -> dict:
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(albert_tf.__file__)))
    path = os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-c", EXPORT_SCRIPT, run_dir, str(version), str(max_seq_length), model_dir or ""],
        env={**os.environ, "KERAS_BACKEND": "tensorflow", "PYTHONPATH": path},
        capture_output=True,
        text=True,
    )
    if result.returncode:
        last = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise ExportError(f"{run_dir}: exporting the SavedModels (in a TensorFlow-backend process) failed: {last}")
    return json.loads(result.stdout.strip().splitlines()[-1])
