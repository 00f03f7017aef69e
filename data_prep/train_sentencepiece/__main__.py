"""`python -m data_prep.train_sentencepiece`: the door to the command `albert_tf.cli.train_sentencepiece`.

data_prep is a library below the command layer; only this entry point, which
nothing imports, reaches up to it.
"""

from albert_tf.cli.train_sentencepiece import cli

cli()
