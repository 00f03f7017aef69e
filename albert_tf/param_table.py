"""`python -m albert_tf.param_table`: forwards to `albert_tf.cli.param_table`, whose names stay importable here."""

from albert_tf.cli.param_table import cli, count_parameters, define_flags, main  # noqa: F401

if __name__ == "__main__":
    cli()
