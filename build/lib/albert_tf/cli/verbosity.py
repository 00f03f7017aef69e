"""absl's `-v/--verbosity`, read from argv before any flag is parsed (TensorFlow reads its log level at import).

Example:

>>> verbosity_from_argv(["run", "--verbosity=1"]), verbosity_from_argv(["run"])
(1, -1)
"""


def verbosity_from_argv(argv) -> int:
    """absl's `-v/--verbosity` read before flags are parsed (TensorFlow reads its log level at import)."""
    for index, arg in enumerate(argv):
        for prefix in ("--verbosity=", "-v="):
            if arg.startswith(prefix):
                return _int(arg[len(prefix) :])
        if arg in ("-v", "--verbosity") and index + 1 < len(argv):
            return _int(argv[index + 1])
    return -1


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return -1
