"""TensorFlow's `saved_model_cli` with tf-text's ops registered.

Exports with text signatures hold tf-text ops (`SentencepieceOp`, ...), which
the plain `saved_model_cli run` cannot load ("Op type not registered").
TF Serving links them in; this wrapper does the same for the CLI:

    python -m albert_tf.saved_model_cli run --dir exports/albert/1 --tag_set serve \
        --signature_def serve_text --input_exprs 'text_a=["ALBERT is a lite BERT."]'
"""

import os
import sys

import tensorflow as tf
import tensorflow_text  # noqa: F401  registers the ops before the graph is imported
from tensorflow.python.tools.saved_model_cli import main  # what the `saved_model_cli` script runs

from albert_tf.cli.app import TRACEBACK_ENV, error_line

# What TF's tool raises on bad input: RuntimeError for a malformed --input_exprs (its documented error),
# ValueError/KeyError for an unknown signature or input, OSError for a missing SavedModel.
BAD_INPUT_ERRORS = (RuntimeError, ValueError, KeyError, OSError, tf.errors.OpError)

HELP_ARGS = ("--help", "-h", "-?", "--helpshort")


def cli():
    """The console-script entry point."""
    if len(sys.argv) < 2 or sys.argv[1] in HELP_ARGS:  # TF's own says nothing useful and exits 1
        commands = "Commands: show, run, scan (TensorFlow's saved_model_cli; `show --help` lists flags)."
        print(__doc__.strip() + "\n\n" + commands)
        sys.exit(0)
    try:
        status = main()
    except BAD_INPUT_ERRORS as error:
        if os.environ.get(TRACEBACK_ENV):
            raise
        print(error_line(error).splitlines()[0], file=sys.stderr)
        sys.exit(1)
    sys.exit(status)


if __name__ == "__main__":
    cli()
