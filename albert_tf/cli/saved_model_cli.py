"""TensorFlow's `saved_model_cli` with tf-text's ops registered.

Exports with text signatures hold tf-text ops (`SentencepieceOp`, ...), which
the plain `saved_model_cli run` cannot load ("Op type not registered").
TF Serving links them in; this wrapper does the same for the CLI:

    python -m albert_tf.saved_model_cli run --dir exports/albert/1 --tag_set serve \\
        --signature_def serve_text --input_exprs 'text_a=["ALBERT is a lite BERT."]'
"""

import os
import sys

from absl import flags

from albert_tf.cli.app import HELP_ARGS, TRACEBACK_ENV, error_line
from albert_tf.errors import AlbertError

# TensorFlow's tool, as its module `tensorflow.python.tools.saved_model_cli` defines it: each command with
# the flags it requires (`command_required_flags`), and every flag with its kind (`flags.DEFINE_<kind>`;
# an enum: its values). Read here so that --help and a mistyped command or flag are answered before
# TensorFlow loads (14-17 s and 860 MB); tests/test_failures.py checks both against TensorFlow's source.
COMMANDS = {
    "show": ("dir",),
    "run": ("dir", "tag_set", "signature_def"),
    "scan": ("dir",),
    "convert": ("dir", "output_dir", "tag_set"),
    "freeze_model": ("dir", "output_prefix", "tag_set"),
    "aot_compile_cpu": ("cpp_class",),
}
TOOL_FLAGS = {
    "dir": "string",
    "all": "bool",
    "tag_set": "string",
    "signature_def": "string",
    "list_ops": "bool",
    "inputs": "string",
    "input_exprs": "string",
    "input_examples": "string",
    "outdir": "string",
    "overwrite": "bool",
    "tf_debug": "bool",
    "worker": "string",
    "init_tpu": "bool",
    "use_tfrt": "bool",
    "op_denylist": "string",
    "output_dir": "string",
    "max_workspace_size_bytes": "integer",
    "precision_mode": ("FP32", "FP16", "INT8"),
    "minimum_segment_size": "integer",
    "convert_tf1_model": "bool",
    "output_prefix": "string",
    "signature_def_key": "string",
    "checkpoint_path": "string",
    "variables_to_feed": "string",
    "target_triple": "string",
    "target_cpu": "string",
    "cpp_class": "string",
    "multithreading": "string",
}
FULL_HELP_ARGS = ("--helpfull", "--helpxml")  # TensorFlow's own, with every flag's help: it loads TensorFlow


class UsageError(AlbertError, ValueError):
    """A command line that TensorFlow's tool would refuse, said before it loads."""


def usage() -> str:
    lines = [f"  {name:<16} needs --{', --'.join(required)}" for name, required in COMMANDS.items()]
    return "\n".join(
        [
            __doc__.strip(),
            "",
            "Commands (TensorFlow's saved_model_cli):",
            *lines,
            "",
            f"Flags: --{', --'.join(TOOL_FLAGS)}.",
            "--helpfull: every flag with TensorFlow's help for it (loads TensorFlow).",
        ]
    )


def check_command_line(argv) -> None:
    """Parses `argv` as TensorFlow's tool will (absl's flags, then the command): `UsageError` or
    `flags.Error` (absl's own message, as TensorFlow's tool would print it) for what it would refuse."""
    values = flags.FlagValues()
    for name, kind in TOOL_FLAGS.items():
        if isinstance(kind, tuple):
            flags.DEFINE_enum(name, None, kind, "", flag_values=values)
        else:
            getattr(flags, f"DEFINE_{kind}")(name, None, "", flag_values=values)
    for module, module_flags in flags.FLAGS.flags_by_module_dict().items():
        if module.startswith("absl."):  # absl's own (--verbosity, --logtostderr, ...)
            for flag in module_flags:
                flags.DEFINE_flag(flag, values)
    rest = values(argv)
    if len(rest) < 2:
        raise UsageError(f"give a command: one of {', '.join(COMMANDS)} (--help says more)")
    command = rest[1]
    if command not in COMMANDS:
        raise UsageError(f"{command}: not a command of saved_model_cli; one of {', '.join(COMMANDS)}")
    missing = [f"--{name}" for name in COMMANDS[command] if values[name].value is None]
    if missing:
        raise UsageError(f"saved_model_cli {command} needs {', '.join(missing)}")


def cli():
    """The console-script entry point."""
    if len(sys.argv) < 2 or any(arg in HELP_ARGS for arg in sys.argv[1:]):  # TF's own says little and exits 1
        print(usage())
        sys.exit(0)
    if not any(arg in FULL_HELP_ARGS for arg in sys.argv[1:]):
        try:
            check_command_line(sys.argv)
        except flags.Error as error:  # absl's message, as TensorFlow's tool prints it
            print(f"FATAL Flags parsing error: {error}\nPass --help to see help on flags.", file=sys.stderr)
            sys.exit(1)
        except UsageError as error:
            print(error_line(error), file=sys.stderr)
            sys.exit(1)
    run_tool()


def run_tool():
    """TensorFlow's tool, with tf-text's ops registered, its bad input said in one line."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  registers the ops before the graph is imported
    from tensorflow.python.tools.saved_model_cli import main  # what the `saved_model_cli` script runs

    # What TF's tool raises on bad input: RuntimeError for a malformed --input_exprs (its documented error),
    # ValueError/KeyError for an unknown signature or input, OSError for a missing SavedModel.
    bad_input_errors = (RuntimeError, ValueError, KeyError, OSError, tf.errors.OpError)
    try:
        status = main()
    except bad_input_errors as error:
        if os.environ.get(TRACEBACK_ENV):
            raise
        print(error_line(error).splitlines()[0], file=sys.stderr)
        sys.exit(1)
    sys.exit(status)


if __name__ == "__main__":
    cli()
