"""`python -m data_prep.create_pretraining_data` (`__main__`) runs `albert_tf.cli.create_pretraining_data`.

The Beam job it runs is `data_prep.pipeline`.
"""
