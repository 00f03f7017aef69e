"""`python -m albert_tf.convert_checkpoint`: forwards to `albert_tf.cli.convert_checkpoint` (names importable here)."""

from albert_tf.cli.convert_checkpoint import cli, convert, define_flags, main  # noqa: F401

if __name__ == "__main__":
    cli()
