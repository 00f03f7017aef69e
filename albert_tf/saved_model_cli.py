"""`python -m albert_tf.saved_model_cli`: forwards to `albert_tf.cli.saved_model_cli` (names importable here)."""

from albert_tf.cli.saved_model_cli import cli  # noqa: F401

if __name__ == "__main__":
    cli()
