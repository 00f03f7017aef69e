"""Flags that several CLIs share, defined once, and settings objects built from flags.

Names and help are the original's where it has the flag.
"""

import dataclasses
import typing
from typing import Dict, Optional, Type, TypeVar

from absl import flags

from albert_tf import tokenization
from albert_tf.cli.backend import define_backend_flag
from albert_tf.distribution import PRECISIONS, STRATEGIES

FLAGS = flags.FLAGS
Settings = TypeVar("Settings")


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


def define_model_flags(init_help: str = "Google's TF1 checkpoint, our model dir, run dir or .keras.") -> None:
    flags.DEFINE_string("albert_config_file", None, "ALBERT config (default: the one beside --init_checkpoint).")
    flags.DEFINE_string("init_checkpoint", None, init_help)


def define_speed_flags(defaults) -> None:
    """--mixed_precision, --strategy (and --tpu), --jit_compile, --backend: pretraining's and every fine-tuning
    runner's.

    `defaults` has `mixed_precision` and `jit_compile` (a `PretrainSettings` or `FineTuneSettings`).
    """
    flags.DEFINE_enum(
        "mixed_precision",
        defaults.mixed_precision,
        sorted(PRECISIONS),
        "Compute dtype policy: bfloat16/float16 matmuls, float32 weights, LayerNorm and softmax "
        "(float16 with loss scaling).",
    )
    flags.DEFINE_enum("strategy", STRATEGIES[0], STRATEGIES, "tf.distribute strategy (multi_worker reads TF_CONFIG).")
    flags.DEFINE_string("tpu", None, "TPU name or address for --strategy=tpu.")
    flags.DEFINE_bool("jit_compile", defaults.jit_compile, "XLA-compile the training step.")
    define_backend_flag()


def define_finetune_flags(defaults, head_dropout: bool = True, epochs: bool = False, early_exit: bool = False) -> None:
    """The flags of every fine-tuning runner, with that runner's defaults (a `FineTuneSettings`).

    Args:
        defaults: the runner's settings with its defaults.
        head_dropout: the head has a dropout (classifier, multiple choice; not the span heads).
        epochs: the runner also takes `--num_train_epochs`/`--warmup_proportion` (run_squad); an
            explicit `--train_step` wins over them (`FineTuneSettings.schedule`).
        early_exit: the runner's tasks have an early-exit model (`--early_exit`).
    """
    define_model_flags()
    define_vocabulary_flags()
    flags.DEFINE_string("output_dir", None, "Where results and the best model go.")
    flags.DEFINE_bool("do_train", defaults.do_train, "Fine-tune.")
    flags.DEFINE_integer(
        "max_seq_length",
        defaults.max_seq_length,
        "Tokens per example (not given: this default, or the model's max_position_embeddings where smaller).",
    )
    flags.DEFINE_integer("train_batch_size", defaults.train_batch_size, "Training batch.")
    flags.DEFINE_integer("eval_batch_size", defaults.eval_batch_size, "Eval/predict batch.")
    flags.DEFINE_alias("predict_batch_size", "eval_batch_size")  # the original's name
    flags.DEFINE_float("learning_rate", defaults.learning_rate, "Peak learning rate.")
    if epochs:
        flags.DEFINE_float(
            "num_train_epochs", defaults.num_train_epochs, "Epochs over the training examples (the original's count)."
        )
        flags.DEFINE_float("warmup_proportion", defaults.warmup_proportion, "Fraction of the steps with linear warmup.")
        flags.DEFINE_integer("train_step", defaults.train_step, "Optimizer steps; given, wins over --num_train_epochs.")
        flags.DEFINE_integer("warmup_step", defaults.warmup_step, "Warmup steps (default: --warmup_proportion).")
    else:
        flags.DEFINE_integer("train_step", defaults.train_step, "Optimizer steps.")
        flags.DEFINE_integer("warmup_step", defaults.warmup_step, "Linear warmup steps.")
    flags.DEFINE_integer(
        "save_checkpoints_steps", defaults.save_checkpoints_steps, "Evaluate (and keep the best) every N steps."
    )
    flags.DEFINE_enum("optimizer", defaults.optimizer, ["adamw", "lamb"], "As the original.")
    flags.DEFINE_string(
        "metric",
        defaults.metric,
        "The dev metric that picks best/: any the task computes (classification: accuracy, macro_f1, "
        "matthews_corr, f1 of label 1 for two classes; regression: pearson, spearman, mse, lower better). "
        "Default: the task's.",
    )
    flags.DEFINE_integer(
        "early_stopping_patience",
        defaults.early_stopping_patience,
        "Stop after this many evaluations without a better --metric (0: train all steps); best/ is kept.",
    )
    if head_dropout:
        flags.DEFINE_float("dropout", defaults.dropout, "Head dropout (0.1 in the original; the README's v2 RACE: 0).")
    flags.DEFINE_integer("seed", defaults.seed, "Seed of head init and data order.")
    flags.DEFINE_integer(
        "grad_accum_steps",
        defaults.grad_accum_steps,
        "Micro-batches per optimizer step (their "
        "gradients averaged: the same update as one --train_batch_size batch, less memory).",
    )
    flags.DEFINE_bool(
        "remat",
        defaults.remat,
        "Recompute each layer application in the backward pass: much less "
        "activation memory for some extra compute (large models on small GPUs).",
    )
    define_speed_flags(defaults)
    flags.DEFINE_bool(
        "length_grouping",
        defaults.length_grouping,
        "Batch rows of similar length and cut each batch to its longest row (training under --jit_compile "
        "or a TPU: to the shortest of a few lengths that holds it); same outputs, much less padding. "
        "--nolength_grouping pads every row to --max_seq_length.",
    )
    flags.DEFINE_bool(
        "dry_run",
        defaults.dry_run,
        "Check the flags, the model, every file (read and tokenized as the run reads them), memory and a "
        "resume's settings; print the plan (examples, steps, epochs, memory, warnings) as JSON; train nothing.",
    )
    if early_exit:
        flags.DEFINE_bool(
            "early_exit",
            defaults.early_exit,
            "Train a classifier after every layer (PABEE): served with a patience, it stops early (README).",
        )


def task_options(task_cls) -> list:
    """The fields of the `Task` dataclass `task_cls` declared with `option(default, help)`: its flags."""
    return [field for field in dataclasses.fields(task_cls) if "help" in field.metadata]


def define_task_flags(task_cls) -> None:
    """A flag for each option of the `Task` dataclass `task_cls` (`task_options`)."""
    hints = typing.get_type_hints(task_cls)
    for field in task_options(task_cls):
        kind = [t for t in typing.get_args(hints[field.name]) if t is not type(None)] or [hints[field.name]]
        default, help_text = field.default, field.metadata["help"]
        if "choices" in field.metadata:
            flags.DEFINE_enum(field.name, default, list(field.metadata["choices"]), help_text)
        elif kind[0] is bool:
            flags.DEFINE_bool(field.name, default, help_text)
        elif kind[0] is int:
            flags.DEFINE_integer(field.name, default, help_text)
        elif kind[0] is float:
            flags.DEFINE_float(field.name, default, help_text)
        else:
            flags.DEFINE_string(field.name, default if default != "" else None, help_text)


def task_from_flags(task_cls, **overrides):
    """The `Task` its options' flags say; its other fields keep the task's values.

    A task's `metric` is not its flag: `--metric` is the run's choice (`FineTuneSettings.metric`,
    None for the task's own), and taking it here would make the task's default None.
    """
    values = {field.name: FLAGS[field.name].value for field in task_options(task_cls) if field.name in FLAGS}
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
            values[field.name] = FLAGS[field.name].value
    return cls(**values)
