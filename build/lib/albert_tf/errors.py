"""One base class for every error albert_tf raises on bad input or a job that cannot go on.

Errors are raised where the problem is known, with the file, flag or field in
the message; each CLI turns them (and `OSError`, TensorFlow's `OpError`) into
one line at its boundary (`albert_tf.cli.app`).

Example:

>>> from albert_tf.config import ConfigError
>>> issubclass(ConfigError, AlbertError)
True
"""


class AlbertError(Exception):
    """Bad input, or a job that cannot start or continue; the message says what and where."""
