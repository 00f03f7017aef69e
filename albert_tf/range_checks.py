"""Range checks of settings fields, named by their flags, for the settings dataclasses' `__post_init__`.

A count or interval of zero or less, a negative learning rate or a fraction
outside [0, 1] fails at once with one line naming the flag, instead of a
traceback (or a silent no-op) later in the run.

Example:

>>> import dataclasses
>>> @dataclasses.dataclass
... class Demo:
...     train_batch_size: int = 0
>>> check_ranges(Demo(), ValueError, positive=("train_batch_size",))
Traceback (most recent call last):
...
ValueError: --train_batch_size 0: must be a positive number
"""

import math
from typing import Iterable


def check_ranges(
    settings,
    error: type,
    positive: Iterable[str] = (),
    non_negative: Iterable[str] = (),
    fractions: Iterable[str] = (),
) -> None:
    """Raises `error` for the first field out of its range; a None field (not set) is not checked."""
    rules = (
        (positive, lambda v: v > 0, "must be a positive number"),
        (non_negative, lambda v: v >= 0, "must be 0 or more"),
        (fractions, lambda v: 0 <= v <= 1, "must be in [0, 1]"),
    )
    for names, valid, requirement in rules:
        for name in names:
            value = getattr(settings, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise error(f"--{name} {value!r}: expected a number")
            if not math.isfinite(value) or not valid(value):
                raise error(f"--{name} {value}: {requirement}")


def check_seed(settings, error: type) -> None:
    """Keras' `set_random_seed` takes [0, 2**32 - 1] (and raises a bare ValueError otherwise)."""
    if not 0 <= settings.seed < 2**32:
        raise error(f"--seed {settings.seed}: must be in [0, 2**32 - 1]")
