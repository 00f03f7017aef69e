"""The shape of a fine-tuning task.

A task turns its files into model inputs and the model's outputs into its
official score and files. Every step is one method, in the order
`albert_tf.finetuning.runner.run` calls them:

0. `inputs(split)`: the files (or directories) a split reads, checked before any work.
1. `read(split)`: the examples of a split, and what was skipped.
2. `encode(split, examples, tokenizer, max_seq_length, training)`: an `Encoded`.
3. `build_model(backbone, dropout)`: the task model (`training_model` when
   training wires it differently, as SQuAD v2's answerability head).
4. `losses()` / `loss_weights()`: by model output.
5. `postprocess(data, outputs, tokenizer)`: the model's outputs → predictions.
6. `score(data, predictions)`: the official metric (`metric` picks the best checkpoint).
7. `write(output_dir, data, predictions)`: prediction / submission files.

A GLUE-style TSV task needs no subclass: see `albert_tf.tasks.glue.TsvTask`.

A task's own options are its dataclass fields; those declared with
`albert_tf.options.option(default, help)` become its CLI's flags, generated
(`albert_tf.cli.flags.define_option_flags`).
"""

import abc
import dataclasses
import os
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from albert_tf.finetuning.settings import FineTuneError
from albert_tf.options import option  # noqa: F401  (a task's own options: task authors import it here)

if TYPE_CHECKING:  # annotations only: the commands read their flags without importing Keras
    import keras


@dataclasses.dataclass
class ReadReport:
    """What reading one split left out: counts and the first few `file:line: why`."""

    file: str
    rows: int = 0
    skipped: int = 0
    first_problems: List[str] = dataclasses.field(default_factory=list)
    replaced_bytes: int = 0  # invalid UTF-8 sequences replaced by U+FFFD
    first_replaced: Optional[str] = None  # `file:line` of the first

    def skip(self, line: int, why: str):
        self.skipped += 1
        if len(self.first_problems) < 5:
            self.first_problems.append(f"{self.file}:{line}: {why}")


@dataclasses.dataclass
class Encoded:
    """One split, read and encoded.

    Attributes:
        split: "train", "dev", "test", ...
        examples: the task's examples, in file order.
        features: the model's inputs (int32 arrays, one row per model input row).
        labels: training targets by model output name (`training=True` only).
        rows: what decoding needs per input row (SQuAD's windows), if the rows are not the examples.
    """

    split: str
    examples: list
    features: Dict[str, np.ndarray]
    labels: Optional[Dict[str, np.ndarray]] = None
    rows: Optional[list] = None


@dataclasses.dataclass(frozen=True)
class Baseline:
    """A trivial predictor's dev score, shown beside every evaluation and warned about when not beaten.

    Example:

    >>> Baseline.majority(0.5).label
    'majority class'
    """

    name: str  # "majority class", "constant predictor", "always abstain"
    metric: str  # the score it is given in (a name the task's `score` returns)
    value: float
    meaning: str  # how it is computed, for the run's end table
    key: str  # its key in eval_results.json and TensorBoard

    @classmethod
    def majority(cls, share: float) -> "Baseline":
        return cls("majority class", "accuracy", share, "share of the most frequent dev label", "majority_baseline")

    @property
    def label(self) -> str:
        """How lines name it: the majority class is an accuracy by name; the others say their metric."""
        return self.name if self.metric == "accuracy" else f"{self.name} {self.metric}"


class Task(abc.ABC):
    """One fine-tuning task. Subclasses set `name` and `metric` and fill in the steps."""

    name: str  # reported as the summary's "task"
    metric: str  # the `score` key that picks the best checkpoint (higher is better)

    @abc.abstractmethod
    def inputs(self, split: str) -> List[str]:
        """The paths reading `split` needs (files or directories); an unset one is an error naming its flag."""

    def has_data(self, split: str) -> bool:
        """Whether `split`'s data is given (default: a path `inputs` names exists); a training run without dev
        data keeps its last step's model as `best/`."""
        return any(os.path.exists(path) for path in self.inputs(split))

    @abc.abstractmethod
    def read(self, split: str) -> "tuple[list, ReadReport]":
        """The examples of `split`; bad records are skipped and reported, none usable is an error."""

    @abc.abstractmethod
    def encode(self, split: str, examples: list, tokenizer, max_seq_length: int, training: bool) -> Encoded:
        """Model inputs (and with `training`, the labels) of `examples`."""

    @abc.abstractmethod
    def build_model(self, backbone, dropout: float) -> "keras.Model":
        """The task model on `backbone`: what is evaluated, saved and served."""

    def min_seq_length(self) -> "tuple[int, str]":
        """(the shortest `--max_seq_length` that holds a piece of every part of an input, what it holds)."""
        return 3, "[CLS] text [SEP]"

    def min_batch_width(self) -> int:
        """The narrowest batch the task's model predicts on (default: any width)."""
        return 1

    def binding(self) -> dict:
        """What a run's checkpoints are bound to besides its settings (a resume with another is refused)."""
        return {"task": self.name}

    def with_model_labels(self, labels: Optional[Tuple[str, ...]]) -> "Task":
        """This task as a fine-tuned model with class names `labels` (None: unnamed) reads it (default: as is)."""
        return self

    def with_early_exit(self) -> "Task":
        """This task trained with a classifier per layer (`--early_exit`), if it has such a model."""
        raise FineTuneError(f"--early_exit: {self.name} has no early-exit model")

    def training_model(self, model: "keras.Model") -> "keras.Model":
        """The model `fit` trains (default: `model` itself)."""
        return model

    @abc.abstractmethod
    def losses(self) -> Dict[str, Callable]:
        """Loss function by the training model's output name."""

    def loss_weights(self) -> Optional[Dict[str, float]]:
        return None

    def train_accuracy(self) -> bool:
        """Whether the training model's `logits` are class scores whose accuracy the bar shows while training."""
        return False

    @abc.abstractmethod
    def postprocess(self, data: Encoded, outputs: Dict[str, np.ndarray], tokenizer) -> Any:
        """The task's predictions from the model's outputs on `data.features`."""

    @abc.abstractmethod
    def score(self, data: Encoded, predictions: Any) -> Dict[str, float]:
        """The official metrics of `predictions` against `data`'s gold labels (includes `metric`)."""

    def metric_names(self) -> Optional[List[str]]:
        """The metric names `score` returns (what `--metric` may name), or None when known only after scoring."""
        return None

    def baseline(self, data: Encoded) -> Optional["Baseline"]:
        """What a model that learnt nothing scores on `data` (the floor fine-tuning must clear), or None."""
        return None

    @abc.abstractmethod
    def write(self, output_dir: str, data: Encoded, predictions: Any) -> List[str]:
        """Writes the prediction files for `data.split`; returns their paths."""
