"""The command-line layer: absl flags → one settings object → the library, errors as one line.

Every CLI module lives here (`albert_tf.<name>` modules only forward to them,
so `python -m albert_tf.<name>` keeps working). `app.run_cli` is every CLI's
entry: quiet library logs unless `-v 1`, and the error boundary. `flags`
defines the flags several CLIs share, once; `run_record` writes a run's
`settings.json`.

Importing this package is launching a CLI: TensorFlow prints its C++ start-up
lines (CUDA probing, CPU features) when it is imported, so the log level is
set here, before any CLI module imports TensorFlow; and Keras reads its
backend when imported, so `--backend` is read here too (`backend`).
"""

import os
import sys

from albert_tf.cli.backend import choose_from_argv
from albert_tf.cli.verbosity import verbosity_from_argv

if verbosity_from_argv(sys.argv) < 1:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
choose_from_argv(sys.argv)  # Keras reads KERAS_BACKEND when first imported
