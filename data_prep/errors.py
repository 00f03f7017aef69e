"""The one error class of data_prep: bad input or settings, raised where the problem is known.

It is an `AlbertError` (every command's boundary, `albert_tf.cli.app`, prints it as one line) and a
`ValueError` (what callers of the library caught before it existed).

Example:

>>> from albert_tf.errors import AlbertError
>>> issubclass(DataPrepError, AlbertError) and issubclass(DataPrepError, ValueError)
True
"""

from albert_tf.errors import AlbertError


class DataPrepError(AlbertError, ValueError):
    """Bad input, settings or output for a data_prep job; the message says what and where."""
