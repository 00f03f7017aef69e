"""SQuAD v1.1 / v2.0: reading, windows, answer decoding, the official EM/F1, and the task.

- `reading`: JSON → `SquadExample`s (words with character offsets).
- `windows`: examples → doc-stride windows (`Feature`) and model inputs.
- `decoding`: model outputs → n-best answers, v2's null scores and threshold.
- `evaluation`: the official evaluation scripts' EM/F1 (v1.1, v2.0).
- `task`: `SquadTask`, what `albert_tf.finetuning.runner` drives.
"""

from albert_tf.tasks.squad.decoding import apply_threshold, decode, decode_v2
from albert_tf.tasks.squad.evaluation import best_threshold, evaluate, exact_match, f1_score, normalize_answer
from albert_tf.tasks.squad.reading import SquadDataError, SquadExample, read_examples
from albert_tf.tasks.squad.task import SquadPredictions, SquadTask
from albert_tf.tasks.squad.windows import Feature, convert_examples, feature_arrays

__all__ = [
    "Feature",
    "SquadDataError",
    "SquadExample",
    "SquadPredictions",
    "SquadTask",
    "apply_threshold",
    "best_threshold",
    "convert_examples",
    "decode",
    "decode_v2",
    "evaluate",
    "exact_match",
    "f1_score",
    "feature_arrays",
    "normalize_answer",
    "read_examples",
]
