"""`python -m albert_tf.predict`: forwards to `albert_tf.cli.predict`, whose names stay importable here."""

from albert_tf.cli.predict import PredictError, PredictSettings, cli, define_flags, main, predict, run  # noqa: F401

if __name__ == "__main__":
    cli()
