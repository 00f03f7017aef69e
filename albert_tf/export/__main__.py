"""`python -m albert_tf.export`: the command lives in `albert_tf.cli.export_model`."""

from albert_tf.cli.export_model import cli

if __name__ == "__main__":
    cli()
