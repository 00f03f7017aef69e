"""`python -m albert_tf.run_pretraining`: forwards to `albert_tf.cli.run_pretraining` (names importable here)."""

from albert_tf.cli.run_pretraining import cli, define_flags, main  # noqa: F401

if __name__ == "__main__":
    cli()
