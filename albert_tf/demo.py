"""`python -m albert_tf.demo [DIR]`: forwards to `albert_tf.cli.demo` (names importable here)."""

from albert_tf.cli.demo import cli, run_demo  # noqa: F401

if __name__ == "__main__":
    cli()
