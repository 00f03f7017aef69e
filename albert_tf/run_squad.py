"""`python -m albert_tf.run_squad`: forwards to `albert_tf.cli.run_squad`, whose names stay importable here."""

from albert_tf.cli.run_squad import SquadSettings, cli, define_flags, main, run  # noqa: F401

if __name__ == "__main__":
    cli()
