"""Settings fields that are also command-line flags: declared once, with their default and help.

A settings dataclass (a run's, a task's, an export's) marks a field as a flag by
declaring it with `option(default, help)`; `albert_tf.cli.flags.define_option_flags`
generates the flags from the fields, and `settings_from_flags` reads them back.
A subclass that only changes a default (`do_train: bool = False`) keeps its
base's help, so a runner states its own defaults without repeating the text.

Example:

>>> import dataclasses
>>> @dataclasses.dataclass
... class Demo:
...     output_dir: str = option(help="Where it goes.")
...     optimizer: str = option("adamw", "As the original.", choices=("adamw", "lamb"))
...     verbose: bool = True  # not a flag: no help
>>> @dataclasses.dataclass
... class Quieter(Demo):
...     optimizer: str = "lamb"
>>> [(spec.name, spec.default, spec.choices) for spec in option_specs(Quieter)]
[('output_dir', None, None), ('optimizer', 'lamb', ('adamw', 'lamb'))]
>>> [(spec.name, spec.default) for spec in option_specs(Quieter(output_dir="out"))]
[('output_dir', 'out'), ('optimizer', 'lamb')]
"""

import dataclasses
import types
import typing
from typing import Any, Iterable, List, NamedTuple, Optional, Tuple


def option(default=dataclasses.MISSING, help: str = "", *, choices: Optional[Iterable[str]] = None, **field_args):
    """A dataclass field that is also a flag (same name, this default and help; an enum flag with `choices`)."""
    if not help:  # a flag without help would be listed blank in --help
        raise TypeError("option() needs the flag's help")
    metadata = {"help": help}
    if choices is not None:
        metadata["choices"] = tuple(choices)
    return dataclasses.field(default=default, metadata=metadata, **field_args)


class OptionSpec(NamedTuple):
    """What a flag is made of: its name, the Python type it holds, its default, help and choices."""

    name: str
    kind: type  # bool, int, float, str, or tuple (a comma-separated list of strings)
    default: Any
    help: str
    choices: Optional[Tuple[str, ...]]


def option_specs(settings, exclude: Iterable[str] = ()) -> List[OptionSpec]:
    """The flags of a settings dataclass (or instance: its values are the defaults), in field order.

    A field is a flag when it, or the same field of a base class, was declared with `option`.
    """
    cls = settings if isinstance(settings, type) else type(settings)
    hints = typing.get_type_hints(cls)
    specs = []
    for field in dataclasses.fields(cls):
        declared = _declared_metadata(cls, field.name)
        if declared is None or field.name in exclude:
            continue
        if isinstance(settings, type):
            default = field.default
            if default is dataclasses.MISSING:
                missing_factory = field.default_factory is dataclasses.MISSING
                default = None if missing_factory else field.default_factory()  # required: no default
        else:
            default = getattr(settings, field.name)
        specs.append(
            OptionSpec(field.name, _flag_kind(hints[field.name]), default, declared["help"], declared.get("choices"))
        )
    return specs


def _declared_metadata(cls, name: str) -> Optional[dict]:
    """The `option` metadata of field `name` on `cls` or the nearest base that declared it so."""
    for base in cls.__mro__:
        field = getattr(base, "__dataclass_fields__", {}).get(name)
        if field is not None and "help" in field.metadata:
            return field.metadata
    return None


def _flag_kind(hint) -> type:
    """bool/int/float/str from a field's annotation (`Optional[X]` and `X | None` are X); tuple for
    `Tuple[str, ...]` (a comma-separated list flag)."""
    kinds = [hint]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        kinds = [t for t in typing.get_args(hint) if t is not type(None)]
    if len(kinds) == 1 and kinds[0] in (bool, int, float, str):
        return kinds[0]
    if len(kinds) == 1 and typing.get_origin(kinds[0]) is tuple and typing.get_args(kinds[0]) == (str, ...):
        return tuple
    raise TypeError(f"an option's type must be bool, int, float, str or Tuple[str, ...] (or Optional), not {hint}")
