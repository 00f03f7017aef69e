"""What the early-exit test files share: a tiny early-exit classifier and the exit rule in plain numpy."""

import keras
import numpy as np

from albert_tf import AlbertBackbone
from albert_tf.config import AlbertConfig
from albert_tf.models.early_exit import AlbertEarlyExitClassifier

from paths import CONFIGS

TINY = str(CONFIGS / "albert_tiny.json")


def build(num_classes=3, seed=0, **config_changes):
    keras.utils.set_random_seed(seed)
    fields = {**AlbertConfig.from_json_file(TINY).backbone_kwargs(), **config_changes}
    backbone = AlbertBackbone(**fields)
    # Larger head weights than the 0.02 init, so that the classifiers disagree across layers and rows.
    model = AlbertEarlyExitClassifier(backbone, num_classes=num_classes)
    kernel = model.exit_classifiers.kernel
    kernel.assign(np.random.default_rng(seed).normal(0, 1.0, kernel.shape).astype("float32"))
    return model


def reference_exit(exit_logits, patience, threshold=None):
    """The rule in plain numpy, row by row: exit when `patience` consecutive classifiers agree."""
    answers, layers = [], []
    for row in exit_logits:
        run = 0
        for j, logits in enumerate(row):
            if j == 0:
                run = 1
            elif threshold is None:
                run = run + 1 if logits.argmax() == row[j - 1].argmax() else 1
            else:
                run = run + 1 if abs(logits[0] - row[j - 1][0]) < threshold else 1
            if run >= patience or j == len(row) - 1:
                answers.append(logits)
                layers.append(j + 1)
                break
    return np.array(answers), np.array(layers)
