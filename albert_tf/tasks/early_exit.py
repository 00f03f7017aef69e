"""Tasks fine-tuned with a classifier per layer (PABEE): `run_classifier --early_exit`, `run_race --early_exit`.

Everything but the model and its loss is the wrapped task's: reading,
encoding, scoring (of the full-depth answer, `logits`) and files.

Example:

>>> from albert_tf.tasks import glue
>>> task = glue.TASKS["sst-2"].with_early_exit()
>>> task.name, task.metric, sorted(task.losses())
('sst-2', 'accuracy', ['exit_logits'])
"""

import dataclasses
from typing import Callable

from albert_tf.finetuning.base import Task
from albert_tf.finetuning.losses import depth_weighted_loss, exit_classification_loss, exit_regression_loss


@dataclasses.dataclass(frozen=True)
class EarlyExitTask(Task):
    """`task` with an early-exit model trained on the depth-weighted sum of its classifiers' losses.

    Attributes:
        task: a task whose model has one `logits` output (its labels' key).
        build: `(backbone, dropout) -> model` with `logits` and `exit_logits` outputs.
        is_regression: squared error instead of cross-entropy.
    """

    task: Task
    build: Callable
    is_regression: bool = False

    @property
    def name(self):
        return self.task.name

    @property
    def metric(self):
        return self.task.metric

    def inputs(self, split):
        return self.task.inputs(split)

    def has_data(self, split):
        return self.task.has_data(split)

    def read(self, split):
        return self.task.read(split)

    def encode(self, split, examples, tokenizer, max_seq_length, training):
        encoded = self.task.encode(split, examples, tokenizer, max_seq_length, training)
        if encoded.labels is not None:
            # Every classifier learns the same label.
            encoded = dataclasses.replace(encoded, labels={"exit_logits": encoded.labels["logits"]})
        return encoded

    def build_model(self, backbone, dropout):
        return self.build(backbone, dropout)

    def losses(self):
        per_exit = exit_regression_loss if self.is_regression else exit_classification_loss
        return {"exit_logits": depth_weighted_loss(per_exit)}

    def postprocess(self, data, outputs, tokenizer):
        return self.task.postprocess(data, outputs, tokenizer)

    def score(self, data, predictions):
        return self.task.score(data, predictions)

    def metric_names(self):
        return self.task.metric_names()

    def binding(self):
        return self.task.binding()

    def baseline(self, data):
        return self.task.baseline(data)

    def write(self, output_dir, data, predictions):
        return self.task.write(output_dir, data, predictions)
