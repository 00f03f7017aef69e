"""A .tflite file scored as a task's model: `run_classifier --do_eval --init_checkpoint model.tflite`.

The file is first checked against the model the task would build on its
config (the same inputs, the same outputs and their sizes, the same class
names), so a file of another task fails before any work and naming why. It
then runs as a phone runs it: one row at a time at the row's own length
(`albert_tf.export.tflite.TFLiteRunner`); the outputs come back in input
order, an output axis that follows the sequence length padded back to the
rows' width as `length_batching.predict_in_order` does.

Example (a file exported from an SST-2 run, scored on SST-2 dev):

    from albert_tf.run_classifier import ClassifierSettings, run

    summary = run(ClassifierSettings(
        output_dir="runs/sst2_tflite", task_name="sst-2", data_dir="glue_data", do_eval=True,
        init_checkpoint="exported/albert_dynamic_int8.tflite", max_seq_length=128,
    ))
    print(summary["eval"]["accuracy"])
"""

from typing import Dict

import numpy as np

from albert_tf.config import AlbertConfig
from albert_tf.finetuning.base import Task
from albert_tf.finetuning.settings import FineTuneError
from albert_tf.inputs.length_batching import MASK_FEATURE, PAD_LOGIT, true_lengths
from albert_tf.models.backbone import AlbertBackbone


class TFLiteTaskModel:
    """A `TFLiteRunner` answering whole splits: `predict(features)` as a Keras model's `predict`."""

    def __init__(self, runner):
        self.runner = runner
        # Each output's shape past the batch axis; None where the file leaves it open (the sequence length).
        self.output_shapes = {
            name: tuple(None if size < 0 else int(size) for size in detail["shape_signature"][1:])
            for name, detail in runner.runner.get_output_details().items()
        }
        self.output_dtypes = {name: detail["dtype"] for name, detail in runner.runner.get_output_details().items()}

    @property
    def model_file(self) -> str:
        return self.runner.model_file

    def check_fits(self, task: Task, config: AlbertConfig) -> None:
        """Fails unless the file has the inputs and outputs of `task`'s model on `config` (class names are
        matched by the runner: `Task.with_model_labels`)."""
        expected = task.build_model(AlbertBackbone.from_albert_config(config), 0.0)
        where = self.model_file
        inputs = sorted(tensor.name for tensor in expected.inputs)
        if sorted(self.runner.input_shapes) != inputs:
            raise FineTuneError(
                f"{where}: takes {', '.join(sorted(self.runner.input_shapes))}; a {task.name} model takes "
                f"{', '.join(inputs)} (export the fine-tuned {task.name} model)"
            )
        shapes = {name: tuple(spec.shape[1:]) for name, spec in expected.output.items()}
        if self.output_shapes != shapes:
            raise FineTuneError(
                f"{where}: outputs {_shapes_text(self.output_shapes)}; a {task.name} model on this config outputs "
                f"{_shapes_text(shapes)} (another task's file, or another label count)"
            )

    def predict(self, features: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """The file's outputs for every row of `features`, in order; each row runs at its own length."""
        lengths = true_lengths(features)
        if len(lengths) == 0:
            raise FineTuneError("no examples to predict")
        width = np.shape(features[MASK_FEATURE])[-1]
        results = {}
        for name, shape in self.output_shapes.items():
            dtype = self.output_dtypes[name]
            fill = PAD_LOGIT if np.issubdtype(dtype, np.floating) else 0
            results[name] = np.full((len(lengths),) + tuple(width if n is None else n for n in shape), fill, dtype)
        for row, length in enumerate(lengths):
            outputs = self.runner({name: features[name][row : row + 1, :length] for name in self.runner.input_shapes})
            for name, value in outputs.items():
                results[name][(row,) + tuple(slice(0, size) for size in value.shape[1:])] = value[0]
        return results


def _shapes_text(shapes: Dict[str, tuple]) -> str:
    return ", ".join(
        f"{name} [{', '.join('length' if size is None else str(size) for size in shape)}]"
        for name, shape in sorted(shapes.items())
    )
