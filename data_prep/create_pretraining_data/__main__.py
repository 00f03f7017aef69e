"""`python -m data_prep.create_pretraining_data`: the door to the command `albert_tf.cli.create_pretraining_data`.

data_prep is a library below the command layer; only this entry point, which
nothing imports, reaches up to it.
"""

from albert_tf.cli.create_pretraining_data import cli

cli()
