"""TensorFlow's `saved_model_cli` with tf-text's ops registered.

Exports with text signatures hold tf-text ops (`SentencepieceOp`, ...), which
the plain `saved_model_cli run` cannot load ("Op type not registered").
TF Serving links them in; this wrapper does the same for the CLI:

    python -m albert_tf.saved_model_cli run --dir exports/albert/1 --tag_set serve \
        --signature_def serve_text --input_exprs 'text_a=["ALBERT is a lite BERT."]'
"""

import sys

import tensorflow_text  # noqa: F401  registers the ops before the graph is imported
from tensorflow.python.tools.saved_model_cli import main  # what the `saved_model_cli` script runs


def cli():
    """The console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    cli()
