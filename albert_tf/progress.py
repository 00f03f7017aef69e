"""What a training run shows while it runs: a live bar of windowed values, lines below it, TensorBoard scalars.

Pretraining (`albert_tf.pretraining.loop`) and fine-tuning (`albert_tf.finetuning.training`) share it:
one bar over all the run's steps (Keras' `Progbar`: ETA), each value the last logging window's
(Keras would average the others since step 0), steps/s and the learning rate; a line said while
the bar holds the console's line goes below it; scalars go to `output_dir/train` and
`output_dir/eval` (TensorBoard: `tensorboard --logdir output_dir`).

Example:

>>> window_label(50), window_label(1)
('last 50 steps', 'last step')
>>> scalar_name("steps/s")
'steps_per_s'
"""

import os
import sys
from typing import Dict, Iterable, Optional


def window_label(steps: int) -> str:
    """How the bar and the log name a logging window's values."""
    return f"last {steps} steps" if steps != 1 else "last step"


def scalar_name(name: str) -> str:
    """A metric's TensorBoard tag (`steps/s` would open a tag group `steps`)."""
    return name.replace("/", "_per_")


_line_holder = None  # the TrainingBar whose line is the console's current one, if any


def end_bar_line() -> None:
    """Ends the line a live bar holds, so an error printed now starts a line of its own."""
    if _line_holder is not None:
        _line_holder.release()


class TrainingBar:
    """A live bar over `total` steps: `windowed` values labelled with the window, plus lr and steps/s.

    Args:
        total: the run's last step.
        windowed: the names of values averaged over a logging window.
        window_steps: the logging window (for the label).
        verbose: draw the bar (else every call is silent).
    """

    def __init__(self, total: int, windowed: Iterable[str], window_steps: int, verbose: bool):
        import keras

        self.label = f" ({window_label(window_steps)})"
        self.windowed = tuple(windowed)
        self.verbose = verbose
        self.shown = False  # the bar holds the console's current line
        # Not a terminal (a log file, a pipe): a plain line a logging window, without Keras' bar, whose
        # colour codes and carriage returns only a terminal reads.
        self.plain = verbose and not sys.stdout.isatty()
        self.total, self.window_steps, self.printed = total, window_steps, None
        self.bar = keras.utils.Progbar(
            total,
            stateful_metrics=[k + self.label for k in self.windowed] + ["lr", "steps/s", "mfu"],
            verbose=1 if verbose and not self.plain else 0,
        )

    def update(self, step: int, values: Optional[Dict[str, float]] = None) -> None:
        """Moves the bar to `step`, showing `values` (windowed ones labelled; lr and steps/s as they are)."""
        shown = []
        for name, value in (values or {}).items():
            shown.append((name + self.label if name in self.windowed else name, value))
        global _line_holder
        if self.plain:
            if shown and step != self.printed and (step % self.window_steps == 0 or step == self.total):
                print(f"step {step}/{self.total} - " + " - ".join(f"{k}: {v:.4g}" for k, v in shown), flush=True)
                self.printed = step
            return
        self.bar.update(step, shown)
        self.shown = self.verbose
        if self.shown:
            _line_holder = self

    def release(self) -> None:
        """Ends the bar's line, so what is printed next starts a line of its own (the bar redraws below)."""
        global _line_holder
        if self.shown:
            print(flush=True)
            self.shown = False
        if _line_holder is self:
            _line_holder = None

    def say(self, line: str) -> None:
        """Prints `line` on its own line, below the bar (never appended to the bar's line); silent unless verbose."""
        if self.verbose:
            self.release()
            print(line, flush=True)


def summary_writer(output_dir: Optional[str], name: str):
    """A TensorBoard writer for `output_dir/name`, or None without an `output_dir`."""
    if not output_dir:
        return None
    import tensorflow as tf

    return tf.summary.create_file_writer(os.path.join(output_dir, name))


def write_scalars(writer, step: int, values: Dict[str, object]) -> None:
    """Writes every numeric value of `values` as a scalar at `step` (others, e.g. a run id, are skipped)."""
    if writer is None:
        return
    import tensorflow as tf

    with writer.as_default(step=step):
        for name, value in values.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                tf.summary.scalar(scalar_name(name), float(value))
    writer.flush()
