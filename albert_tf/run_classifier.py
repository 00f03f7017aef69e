"""`python -m albert_tf.run_classifier`: forwards to `albert_tf.cli.run_classifier` (names importable here)."""

from albert_tf.cli.run_classifier import ClassifierSettings, FileOptions, cli, define_flags, main, run  # noqa: F401

if __name__ == "__main__":
    cli()
