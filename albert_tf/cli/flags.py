"""Flags that several CLIs share, defined once, and settings objects built from flags.

Names and help are the original's where it has the flag.
"""

import dataclasses
from typing import Dict, Iterable, Optional, Type, TypeVar

from absl import flags

from albert_tf import tokenization
from albert_tf.cli.backend import define_backend_flag
from albert_tf.options import option_specs

FLAGS = flags.FLAGS
Settings = TypeVar("Settings")
# The flags these helpers define belong to the command that calls them (its --help shows them as its own).
flags.disclaim_key_flags()


def define_vocabulary_flags(default_help: str = "", lower_case_flag: bool = True) -> None:
    """Each tokenizer kind's vocabulary flag (at most one given) and, where the command tokenizes, --do_lower_case.

    The flags are the registry's (--spm_model_file, --vocab_file, ...), so a new kind adds its own.
    """
    for kind in tokenization.kinds():
        others = ", ".join(f"--{other.flag}" for other in tokenization.kinds() if other is not kind)
        flags.DEFINE_string(kind.flag, None, f"{kind.description} (instead of {others})." + default_help)
    if lower_case_flag:
        flags.DEFINE_bool(
            "do_lower_case",
            None,
            "Lowercase. Default: the setting saved with the model "
            "(tokenizer.json), else True (the released English models are uncased).",
        )


def vocabulary_flag_values() -> Dict[str, Optional[str]]:
    """{flag: value} of the vocabulary flags (for `resolve_tokenizer(files=...)`)."""
    return {kind.flag: FLAGS[kind.flag].value for kind in tokenization.kinds()}


def define_finetune_flags(defaults, exclude: Iterable[str] = ()) -> None:
    """The flags of every fine-tuning runner: its settings' options with that runner's defaults, the vocabulary
    and the backend.

    Args:
        defaults: the runner's settings (a `FineTuneSettings`) with its defaults.
        exclude: the options this runner does not take (run_squad: `dropout`, its span heads have none).
    """
    define_vocabulary_flags()
    define_option_flags(defaults, exclude)
    flags.DEFINE_alias("predict_batch_size", "eval_batch_size")  # the original's name
    define_backend_flag()


DEFINERS = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer, float: flags.DEFINE_float, str: flags.DEFINE_string}


def define_option_flags(settings, exclude: Iterable[str] = ()) -> None:
    """A flag for each `option` field of a settings dataclass or a `Task` (`albert_tf.options.option_specs`).

    `settings`: the class, or an instance whose values are the defaults (a runner's own); `exclude`: option
    fields this command does not take.
    """
    for spec in option_specs(settings, exclude):
        if spec.choices is not None:
            flags.DEFINE_enum(spec.name, spec.default, list(spec.choices), spec.help)
        elif spec.kind is tuple:
            flags.DEFINE_list(spec.name, list(spec.default) if spec.default is not None else None, spec.help)
        else:
            default = None if spec.kind is str and spec.default == "" else spec.default
            DEFINERS[spec.kind](spec.name, default, spec.help)


def task_from_flags(task_cls, **overrides):
    """The `Task` its options' flags say; its other fields keep the task's values.

    A task's `metric` is not its flag: `--metric` is the run's choice (`FineTuneSettings.metric`,
    None for the task's own), and taking it here would make the task's default None.
    """
    values = {spec.name: _field_value(FLAGS[spec.name].value) for spec in option_specs(task_cls) if spec.name in FLAGS}
    return task_cls(**{**values, **overrides})


def finetune_settings_from_flags(cls: Type[Settings]) -> Settings:
    """`settings_from_flags` for a fine-tuning command: the vocabulary flags resolved to a tokenizer (None: the
    model's own), and an absent `--max_seq_length` left for the model to set."""
    absent = {} if FLAGS["max_seq_length"].present else {"max_seq_length": None}
    return settings_from_flags(cls, tokenizer=given_tokenizer(), **absent)


def given_tokenizer() -> Optional[tokenization.Tokenizer]:
    """The tokenizer of the vocabulary flag given (any registered kind's), None if none is."""
    return tokenization.resolve_tokenizer(
        files=vocabulary_flag_values(), do_lower_case=FLAGS["do_lower_case"].value, required=False
    )


def settings_from_flags(cls: Type[Settings], **overrides) -> Settings:
    """An instance of the dataclass `cls` whose fields take the flags of the same name (where defined)."""
    values = {}
    for field in dataclasses.fields(cls):
        if field.name in overrides:
            values[field.name] = overrides[field.name]
        elif field.name in FLAGS:
            values[field.name] = _field_value(FLAGS[field.name].value)
    return cls(**values)


def _field_value(value):
    """A flag's value as its field holds it: a list flag's list as a tuple (settings are immutable)."""
    return tuple(value) if isinstance(value, list) else value
