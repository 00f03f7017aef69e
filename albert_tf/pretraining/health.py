"""Training health: what a pretraining run's numbers mean, said as it happens (one line each).

Pure Python (no TensorFlow): the loop feeds it each step's loss and each logging window's
metrics; it returns the lines to report and, for a loss spike or an accuracy collapse, a
`Divergence` the loop acts on as `--on_divergence` says (warn, stop, or roll back).

Lines, all starting with "health: ":
- at start, the data's sentence task, its label share and its masked share (`metadata.json`),
  with a warning when the run wants SOP and reads NSP data, or the reverse;
- "the run is not learning": the masked-LM loss made no progress over the first
  `learning_window_steps` steps;
- "sentence order not learnt yet (plateau, N steps so far)": the sentence loss sits at chance
  while the masked-LM loss falls; expected early in joint MLM + SOP training;
- "sentence order learnt": it left the plateau;
- a loss spike (a step's loss far above the median of the steps before it) or an accuracy
  collapse (a window keeps less than half of the best window's gain over chance, by more than
  the windows' sampling noise; never on a sentence task still on its plateau, "not learnt yet").

Example:

>>> monitor = HealthMonitor(HealthSettings(median_steps=4, min_history=4), "warn")
>>> [monitor.step_loss(step, 3.0) for step in range(1, 5)]
[None, None, None, None]
>>> monitor.step_loss(5, 9.0).kind
'loss spike'
"""

import collections
import dataclasses
import math
import statistics
from typing import Dict, List, Optional, Tuple

from albert_tf.errors import AlbertError
from albert_tf.progress import window_label

SENTENCE_TASKS = ("sop", "nsp")
DIVERGENCE_ACTIONS = ("warn", "stop", "rollback")
PREFIX = "health: "
SENTENCE_LOSS = "sentence_order_loss"
SENTENCE_ACCURACY = "sentence_order_accuracy"
MLM_LOSS = "masked_lm_loss"
MLM_ACCURACY = "masked_lm_accuracy"

NOT_LEARNING_CAUSES = (
    "usual causes: a learning rate far too small or too large for the batch (or a warmup longer than "
    "this window), masks without targets (see the masked share above), a config whose vocab_size does "
    "not match the data, or a warm start from weights that do not fit"
)


class HealthSettingError(AlbertError, ValueError):
    """A health flag with a value it does not know."""


@dataclasses.dataclass
class HealthSettings:
    """Thresholds of the health checks (defaults suit real runs; tests shrink the windows)."""

    learning_window_steps: int = 1000  # MLM must have moved by then
    min_relative_progress: float = 0.02  # ... by at least this fraction of its first window's loss
    chance_margin: float = 0.02  # a sentence loss within this of chance is "at chance"
    median_steps: int = 100  # the steps a spike is measured against
    min_history: int = 20  # no spike verdict on fewer steps
    spike_ratio: float = 2.0  # a step's loss above ratio × that median is a spike
    collapse_fraction: float = 0.5  # a window keeping less than this of the best gain is a collapse
    min_mlm_gain: float = 0.05  # best MLM accuracy before a collapse can be called
    min_sentence_gain: float = 0.1  # best sentence accuracy above chance before a collapse can be called
    max_rollbacks: int = 3


@dataclasses.dataclass(frozen=True)
class Divergence:
    """A spike or collapse: detected at `step`; the weights after `since_step` are suspect."""

    kind: str
    step: int
    since_step: int
    message: str


def binary_entropy(p: float) -> float:
    """The loss of a classifier that knows only the label share `p` (ln 2 at 0.5)."""
    if p <= 0 or p >= 1:
        return 0.0
    return -(p * math.log(p) + (1 - p) * math.log(1 - p))


@dataclasses.dataclass(frozen=True)
class DataFacts:
    """What `metadata.json` says about the labels and masks (None where an older data set lacks it)."""

    directory: str
    task: Optional[str]
    instances: Optional[int]
    label_share: Optional[float]  # share of label 1 (swapped for SOP, random next for NSP)
    masked_share: Optional[float]  # masked tokens / non-special tokens
    sentences_per_document: Optional[float] = None
    packing: Optional[dict] = None  # counts.packing: rows and their share of text (data made since packing existed)
    rows_hold: int = 1  # max_instances_per_row

    @classmethod
    def from_metadata(cls, directory: str, metadata: dict) -> "DataFacts":
        counts = metadata.get("counts") or {}
        instances = counts.get("instances") or metadata.get("num_instances")
        label_1 = counts.get("sop_label_1")
        masked, tokens = counts.get("masked_tokens"), counts.get("non_special_tokens")
        return cls(
            directory=directory,
            task=metadata.get("task"),
            instances=instances,
            label_share=label_1 / instances if instances and label_1 is not None else None,
            masked_share=masked / tokens if tokens and masked is not None else None,
            sentences_per_document=(
                counts["sentences"] / counts["documents"] if counts.get("documents") and "sentences" in counts else None
            ),
            packing=counts.get("packing"),
            rows_hold=metadata.get("max_instances_per_row", 1),
        )

    @property
    def chance_loss(self) -> float:
        return binary_entropy(0.5 if self.label_share is None else self.label_share)

    @property
    def chance_accuracy(self) -> float:
        share = 0.5 if self.label_share is None else self.label_share
        return max(share, 1 - share)


def data_lines(facts: DataFacts, sentence_task: str) -> List[str]:
    """The start-of-run lines: the data's sentence task, label and masked shares, and mismatches."""
    if sentence_task not in SENTENCE_TASKS:
        raise HealthSettingError(f"--sentence_task must be one of {', '.join(SENTENCE_TASKS)}, not {sentence_task!r}")
    task = facts.task.upper() if facts.task else "unknown task"
    labels = "label share unknown" if facts.label_share is None else f"label 1 in {facts.label_share:.1%}"
    instances = "" if facts.instances is None else f" of {facts.instances:,} instances"
    masked = "masked share unknown" if facts.masked_share is None else f"{facts.masked_share:.1%} of tokens masked"
    rows = ""
    if facts.packing:
        packed = f"packed up to {facts.rows_hold} a row into " if facts.rows_hold > 1 else ""
        rows = f"; {packed}{facts.packing['rows']:,} rows, {facts.packing['fill']:.0%} text"
    lines = [f"{PREFIX}data {facts.directory}: {task}, {labels}{instances}; {masked}{rows}"]
    if facts.task in SENTENCE_TASKS and facts.task != sentence_task:
        made_with = "with" if facts.task == "nsp" else "without"
        lines.append(
            f"{PREFIX}warning: this run trains {sentence_task.upper()} (--sentence_task={sentence_task}) but "
            f"{facts.directory} holds {facts.task.upper()} data (made {made_with} --random_next_sentence): "
            f"the sentence_order_* metrics measure {facts.task.upper()}. Pass --sentence_task={facts.task} if "
            "that is meant, else remake the data"
        )
    if facts.label_share is not None and not 0.3 <= facts.label_share <= 0.7:
        lines.append(
            f"{PREFIX}warning: label 1 in {facts.label_share:.1%} of the data: the sentence task's chance "
            f"accuracy is {facts.chance_accuracy:.1%}, not 50%"
        )
    if facts.masked_share == 0:
        lines.append(f"{PREFIX}warning: no token of the data is masked: the masked-LM loss has no target")
    if facts.sentences_per_document is not None and facts.sentences_per_document < 1.5:
        lines.append(
            f"{PREFIX}warning: the data's documents average {facts.sentences_per_document:.2f} sentences: "
            f"{sentence_task.upper()} pairs rarely come from two sentences of one document, so the sentence "
            "task means little (was data_prep's --input_format right?)"
        )
    return lines


def schedule_lines(num_train_steps: int, num_warmup_steps: int, do_eval: bool, eval_file_given: bool) -> List[str]:
    """Start-of-run warnings about the flags: a warm-up the run never finishes, an eval on the training data."""
    lines = []
    if num_warmup_steps > num_train_steps:
        lines.append(
            f"{PREFIX}warning: --num_warmup_steps {num_warmup_steps} is longer than --num_train_steps "
            f"{num_train_steps}: the learning rate never reaches --learning_rate (it ends at "
            f"{num_train_steps / num_warmup_steps:.0%} of it)"
        )
    if do_eval and not eval_file_given:
        lines.append(
            f"{PREFIX}warning: --do_eval without --eval_file evaluates on the training shards: its metrics "
            "measure fit, not generalisation (pass held-out data as --eval_file)"
        )
    return lines


class HealthMonitor:
    """Watches one run; `step_loss` every step, `window` every logging window.

    Args:
        settings: `HealthSettings`.
        on_divergence: "warn", "stop" or "rollback" (what the loop does with a `Divergence`).
        facts: the training data's `DataFacts` (the sentence task's chance level comes from them).
    """

    def __init__(self, settings: HealthSettings, on_divergence: str, facts: Optional[DataFacts] = None):
        if on_divergence not in DIVERGENCE_ACTIONS:
            raise HealthSettingError(
                f"--on_divergence must be one of {', '.join(DIVERGENCE_ACTIONS)}, not {on_divergence!r}"
            )
        self.settings = settings
        self.on_divergence = on_divergence
        self.facts = facts
        self.recent_losses = collections.deque(maxlen=settings.median_steps)
        self.in_spike = False
        self.in_collapse = False
        self.first_window: Optional[Dict[str, float]] = None
        self.first_window_step: Optional[int] = None
        self.start_step = 0  # where this process began training (after a resume: the checkpoint's step)
        self.learning_checked = False
        self.best_mlm_accuracy = 0.0
        self.best_sentence_accuracy = 0.0
        self.plateau_since: Optional[int] = None
        self.next_plateau_report: Optional[int] = None
        self.sentence_learnt = False
        self.rollbacks = 0

    @property
    def chance_loss(self) -> float:
        return self.facts.chance_loss if self.facts else math.log(2)

    @property
    def chance_accuracy(self) -> float:
        return self.facts.chance_accuracy if self.facts else 0.5

    def step_loss(self, step: int, loss: float) -> Optional[Divergence]:
        """One step's (finite) loss; a `Divergence` when it is a spike's first step."""
        s = self.settings
        divergence = None
        if len(self.recent_losses) >= s.min_history:
            median = statistics.median(self.recent_losses)
            spiking = loss > s.spike_ratio * median
            if spiking and not self.in_spike:
                divergence = Divergence(
                    "loss spike",
                    step,
                    since_step=step - 1,
                    message=(
                        f"loss spike at step {step}: {loss:.4f}, {loss / median:.1f}× the median "
                        f"{median:.4f} of the {len(self.recent_losses)} steps before"
                    ),
                )
            self.in_spike = spiking
        self.recent_losses.append(loss)
        return divergence

    def window(
        self, step: int, steps: int, metrics: Dict[str, float], counts: Optional[Dict[str, float]] = None
    ) -> Tuple[List[str], Optional[Divergence]]:
        """A logging window's metrics (over its `steps` steps, ending at `step`): lines to say, and a collapse.

        `counts`: how many predictions each accuracy of the window averages (its noise); unknown: none assumed.
        """
        s = self.settings
        lines = []
        if self.first_window is None:
            self.first_window, self.first_window_step = dict(metrics), step
            self.start_step = step - steps
        collapse = self._collapse(step, steps, metrics, counts or {})
        collapse, self.in_collapse = (None if self.in_collapse else collapse), collapse is not None  # once per episode
        self.best_mlm_accuracy = max(self.best_mlm_accuracy, metrics[MLM_ACCURACY])
        self.best_sentence_accuracy = max(self.best_sentence_accuracy, metrics[SENTENCE_ACCURACY])
        mlm_progress = self._learning_lines(step, metrics, MLM_LOSS, lines)
        lines.extend(self._sentence_lines(step, steps, metrics, mlm_progress >= s.min_relative_progress))
        return lines, collapse

    def token_window(
        self, step: int, steps: int, metrics: Dict[str, float], loss: str, accuracy: str, count: Optional[float] = None
    ) -> Tuple[List[str], Optional[Divergence]]:
        """`window` for an objective without a sentence task (PL-BERT's): its `loss` must fall, its `accuracy`
        must not collapse (`count`: the predictions the window's accuracy averages)."""
        s = self.settings
        lines = []
        if self.first_window is None:
            self.first_window, self.first_window_step = dict(metrics), step
            self.start_step = step - steps
        collapse = self._collapse_of(step, steps, metrics, accuracy, self.best_mlm_accuracy, 0.0, s.min_mlm_gain, count)
        collapse, self.in_collapse = (None if self.in_collapse else collapse), collapse is not None  # once per episode
        self.best_mlm_accuracy = max(self.best_mlm_accuracy, metrics[accuracy])
        self._learning_lines(step, metrics, loss, lines)
        return lines, collapse

    def _learning_lines(self, step: int, metrics: Dict[str, float], loss: str, lines: List[str]) -> float:
        """Appends "the run is not learning" once `learning_window_steps` passed without `loss` falling; returns
        the relative progress of `loss` since the first window."""
        s = self.settings
        progress = 1 - metrics[loss] / max(self.first_window[loss], 1e-9)
        # Only a run that began at its start: a resumed one's MLM may rightly move slowly by then.
        at_start = self.start_step < s.learning_window_steps
        if at_start and not self.learning_checked and step - self.start_step >= s.learning_window_steps:
            self.learning_checked = True
            if progress < s.min_relative_progress:
                lines.append(
                    f"{PREFIX}the run is not learning: {loss} {self.first_window[loss]:.4f} at step "
                    f"{self.first_window_step} → {metrics[loss]:.4f} at step {step} (less than "
                    f"{s.min_relative_progress:.0%} lower); {NOT_LEARNING_CAUSES}"
                )
        return progress

    def _sentence_lines(self, step: int, steps: int, metrics: Dict[str, float], mlm_improving: bool) -> List[str]:
        s = self.settings
        at_chance = metrics[SENTENCE_LOSS] >= self.chance_loss - s.chance_margin
        if not at_chance:
            if self.plateau_since is not None and not self.sentence_learnt:
                self.sentence_learnt = True
                return [
                    f"{PREFIX}sentence order learnt: {SENTENCE_ACCURACY} {metrics[SENTENCE_ACCURACY]:.3f} "
                    f"(chance {self.chance_accuracy:.3f}) at step {step}, after the plateau from step "
                    f"{self.plateau_since}"
                ]
            return []
        if self.plateau_since is None:
            self.plateau_since = step - steps
            self.next_plateau_report = self.plateau_since + s.learning_window_steps
        if not mlm_improving or step < self.next_plateau_report or self.sentence_learnt:
            return []
        so_far = step - self.plateau_since
        self.next_plateau_report = self.plateau_since + 2 * max(so_far, 1)  # then at doubling lengths
        counted = "" if self.plateau_since == 0 else f", counted from step {self.plateau_since}"
        return [
            f"{PREFIX}sentence order not learnt yet (plateau, {so_far} steps so far{counted}): {SENTENCE_LOSS} "
            f"{metrics[SENTENCE_LOSS]:.4f} ≈ chance {self.chance_loss:.4f} while masked_lm_loss falls "
            f"({self.first_window[MLM_LOSS]:.4f} → {metrics[MLM_LOSS]:.4f}). Expected early in joint MLM + "
            "sentence-order training: it sits at chance for hundreds to thousands of steps, then leaves it. "
            "Worry only if the data line above warns, or it lasts far longer than the masked-LM progress"
        ]

    def _collapse(
        self, step: int, steps: int, metrics: Dict[str, float], counts: Dict[str, float]
    ) -> Optional[Divergence]:
        s = self.settings
        checks = [(MLM_ACCURACY, self.best_mlm_accuracy, 0.0, s.min_mlm_gain)]
        # A sentence task on its plateau has no gain to lose: its best window was chance plus noise.
        if self.plateau_since is None or self.sentence_learnt:
            checks.append((SENTENCE_ACCURACY, self.best_sentence_accuracy, self.chance_accuracy, s.min_sentence_gain))
        for name, best, chance, min_gain in checks:
            collapse = self._collapse_of(step, steps, metrics, name, best, chance, min_gain, counts.get(name))
            if collapse is not None:
                return collapse
        return None

    def _collapse_of(self, step, steps, metrics, name, best, chance, min_gain, count) -> Optional[Divergence]:
        """The collapse of accuracy `name` from its `best` (above `chance`), beyond the noise of `count` predictions."""
        best_gain, gain = best - chance, metrics[name] - chance
        if (
            best_gain >= min_gain
            and gain < self.settings.collapse_fraction * best_gain
            and best - metrics[name] > self._noise(best, count)
        ):
            return Divergence(
                "accuracy collapse",
                step,
                since_step=step - steps,
                message=(
                    f"accuracy collapse at step {step}: {name} {metrics[name]:.3f} over the {window_label(steps)}"
                    f", down from a best of {best:.3f} (chance {chance:.3f})"
                ),
            )
        return None

    @staticmethod
    def _noise(accuracy: float, count: Optional[float]) -> float:
        """3σ of the difference of two windows' accuracies over `count` predictions each (0 when unknown)."""
        if not count:
            return 0.0
        return 3 * math.sqrt(2 * accuracy * (1 - accuracy) / count)

    def response(self, divergence: Divergence) -> str:
        """What to do now: "warn", "stop" or "rollback" ("stop" once the rollbacks are spent)."""
        if self.on_divergence == "rollback":
            if self.rollbacks >= self.settings.max_rollbacks:
                return "stop"
            self.rollbacks += 1
            # The run goes back to weights from before the episode: the next spike or collapse is a new one.
            if divergence.kind == "loss spike" and self.recent_losses:
                self.recent_losses.pop()
            self.in_spike = self.in_collapse = False
        return self.on_divergence

    def warning(self, divergence: Divergence) -> str:
        return (
            f"{PREFIX}warning: {divergence.message}; training goes on (--on_divergence=warn; "
            "=rollback restores the last good checkpoint and skips the batches after it, =stop stops)"
        )

    def stop_message(self, divergence: Divergence, last_checkpoint: Optional[str]) -> str:
        spent = (
            f" after {self.rollbacks} rollbacks (the most --on_divergence=rollback makes)"
            if self.on_divergence == "rollback"
            else " (--on_divergence=stop)"
        )
        return (
            f"training diverged: {divergence.message}; stopped{spent}. Last checkpoint: "
            f"{last_checkpoint or '(none)'}; resume from it with a lower --learning_rate (or more warmup)"
        )
