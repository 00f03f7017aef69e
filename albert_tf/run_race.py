"""`python -m albert_tf.run_race`: forwards to `albert_tf.cli.run_race`, whose names stay importable here."""

from albert_tf.cli.run_race import RaceSettings, cli, define_flags, main, run  # noqa: F401

if __name__ == "__main__":
    cli()
