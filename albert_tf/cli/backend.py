"""`--backend`: the Keras backend a command runs on, chosen before Keras is imported.

Keras reads `KERAS_BACKEND` once, when it is imported. `choose_from_argv` reads
`--backend` from argv (as `verbosity_from_argv` reads `-v`) and sets the variable
before any CLI module imports Keras; without the flag, `KERAS_BACKEND` (the Keras
convention) or TensorFlow. `check_backend` is the command's check that it took.

Example:

>>> backend_from_argv(["run", "--backend=jax"]), backend_from_argv(["run", "--backend", "tensorflow"])
('jax', 'tensorflow')
>>> backend_from_argv(["run"]) is None
True
"""

import importlib.util
import os
import sys
from typing import Optional

BACKENDS = ("tensorflow", "jax")


def backend_from_argv(argv) -> Optional[str]:
    for index, arg in enumerate(argv):
        if arg.startswith("--backend="):
            return arg[len("--backend=") :]
        if arg == "--backend" and index + 1 < len(argv):
            return argv[index + 1]
    return None


def installed(backend: str) -> bool:
    return importlib.util.find_spec(backend) is not None


def choose_from_argv(argv) -> None:
    """Sets `KERAS_BACKEND` from `--backend`, unless Keras is already imported or the backend is not installed
    (`check_backend` then says so)."""
    requested = backend_from_argv(argv)
    if requested in BACKENDS and "keras" not in sys.modules and installed(requested):
        os.environ["KERAS_BACKEND"] = requested


def default_backend() -> str:
    """`KERAS_BACKEND` where it names one of ours, else TensorFlow."""
    from_environment = os.environ.get("KERAS_BACKEND", "")
    return from_environment if from_environment in BACKENDS else BACKENDS[0]


def define_backend_flag() -> None:
    from absl import flags

    flags.DEFINE_enum(
        "backend",
        default_backend(),
        list(BACKENDS),
        "Keras backend of the model and the training step (default: KERAS_BACKEND, else tensorflow). jax: "
        "one jitted step, data parallel over every local device, cuDNN's fused attention on NVIDIA GPUs; "
        "the input pipeline is tf.data on both.",
    )


def check_backend(requested: str) -> None:
    """Raises `AlbertError` when Keras runs on another backend than `requested`."""
    import keras

    from albert_tf.errors import AlbertError

    if not installed(requested):
        raise AlbertError(
            f"--backend {requested}: {requested} is not installed (pip install 'albert_tf[{requested}]'; on NVIDIA "
            "GPUs: pip install 'jax[cuda12]')"
        )
    running = keras.backend.backend()
    if running != requested:
        raise AlbertError(
            f"--backend {requested}: Keras runs on {running} in this process (it was imported before the flag "
            f"was read, or KERAS_BACKEND={os.environ.get('KERAS_BACKEND', '')!r}); start a new process with "
            f"KERAS_BACKEND={requested}"
        )


def require_tensorflow(command: str, why: str) -> None:
    """Raises `AlbertError` when Keras runs on another backend than TensorFlow (`why`: what needs it)."""
    import keras

    from albert_tf.errors import AlbertError

    running = keras.backend.backend()
    if running != "tensorflow":
        raise AlbertError(
            f"{command} {why}, which needs Keras' TensorFlow backend, but Keras runs on {running} "
            f"(KERAS_BACKEND={os.environ.get('KERAS_BACKEND', '')!r}); run it with KERAS_BACKEND=tensorflow"
        )
