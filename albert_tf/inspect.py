"""`python -m albert_tf.inspect`: forwards to `albert_tf.cli.inspect`, whose names stay importable here."""

from albert_tf.cli.inspect import cli, describe, main  # noqa: F401

if __name__ == "__main__":
    cli()
