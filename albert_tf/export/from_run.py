"""The SavedModels of a finished pretraining run: `<run>/saved_model/{backbone,pretrainer}/<step>/`."""

import os
from typing import Dict, Optional

from albert_tf import formats
from albert_tf.export.saved_model import export_saved_model

SAVED_MODEL_DIR = "saved_model"


def export_pretraining_run(
    run_dir: str, version: int, max_seq_length: int, model_dir: Optional[str] = None
) -> Dict[str, str]:
    """Exports the run's `final/` model (or `model_dir`) as a backbone and a pretrainer SavedModel.

    The tokenizer (and its lowercasing) is the one saved in `final/`.

    Returns `{"saved_model_backbone": path, "saved_model_pretrainer": path}`.
    """
    loaded = formats.load(model_dir or os.path.join(run_dir, "final"))
    model = loaded.model
    outputs = {}
    for kind, exported in (("backbone", model.backbone), ("pretrainer", model)):
        outputs[f"saved_model_{kind}"] = export_saved_model(
            exported,
            os.path.join(run_dir, SAVED_MODEL_DIR, kind),
            version=version,
            tokenizer=loaded.tokenizer,
            max_seq_length=max_seq_length,
        )
    return outputs
