"""`python -m data_prep.build_wordpiece_vocab`: the door to the command `albert_tf.cli.build_wordpiece_vocab`.

data_prep is a library below the command layer; only this entry point, which
nothing imports, reaches up to it.
"""

from albert_tf.cli.build_wordpiece_vocab import cli

cli()
