"""Every CLI's entry point: quiet output by default, and bad input as one line.

    run_cli(main, define_flags)

- Library chatter (TensorFlow's C++ and Python INFO/WARNING logs, absl INFO)
  is off unless `-v 1` / `--verbosity 1` is given; our own messages and the
  progress bars are printed once each.
- `AlbertError`, `OSError` (h5py's file errors are OSErrors) and TensorFlow's `OpError` become
  `error: <message>` on stderr with exit status 1 (75 for a run stopped by SIGTERM/SIGINT after
  saving its work: `albert_tf.preemption`). SIGTERM elsewhere unwinds like Ctrl-C (locks released,
  staging removed): `error: terminated by SIGTERM`, exit status 143. `-v 1` (or
  `ALBERT_TF_TRACEBACK=1`) shows the traceback instead.
- A bad or unknown flag is absl's one line (`FATAL Flags parsing error: …`), also in a command that
  hands other flags on (data_prep to Beam: one that Beam does not take either is refused too).
- A reader of stdout that leaves (`| head -1`) does not end the run: what is printed after is dropped.
- A flag given an empty (or blank) string is refused before any work: `error: --output_dir '': empty value …`.
"""

import contextlib
import ctypes
import difflib
import functools
import importlib.util
import logging
import os
import signal
import sys
from typing import Callable, List, Optional, Sequence, Tuple

from absl import app, flags

from albert_tf import preemption
from albert_tf.cli.backend import check_backend
from albert_tf.cli.verbosity import verbosity_from_argv
from albert_tf.errors import AlbertError
from albert_tf.progress import end_bar_line

TRACEBACK_ENV = "ALBERT_TF_TRACEBACK"


LIBRARY_LOGGERS = ("tensorflow", "absl", "apache_beam", "h5py", "keras", "jax")
LIBRARY_PATHS = tuple(
    f"{os.sep}{name}{os.sep}" for name in ("tensorflow", "apache_beam", "keras", "tf_keras", "absl", "tensorflow_text")
)


class _LibraryChatterFilter(logging.Filter):
    """Drops below-ERROR records that libraries log through the root logger (Beam does)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or not any(p in record.pathname for p in LIBRARY_PATHS)


# TensorFlow 2.20's XLA logs INFO lines through the absl inside libtensorflow_framework ("Compiled cluster
# using XLA!" after "All log messages before absl::InitializeLog() ..." on every --jit_compile run), which
# TF_CPP_MIN_LOG_LEVEL does not reach; that library exports absl::SetMinLogLevel (this version's name).
ABSL_SET_MIN_LOG_LEVEL = "_ZN4absl12lts_2025012714SetMinLogLevelENS0_18LogSeverityAtLeastE"


def quiet_tensorflow_absl_log() -> None:
    """TensorFlow's absl logs from `TF_CPP_MIN_LOG_LEVEL` up, as its own logging (nothing if it cannot)."""
    spec = importlib.util.find_spec("tensorflow")  # finds, does not import
    if spec is None or spec.origin is None:
        return
    try:
        level = min(max(int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0")), 0), 3)  # absl: INFO 0 .. FATAL 3
        library = ctypes.CDLL(os.path.join(os.path.dirname(spec.origin), "libtensorflow_framework.so.2"))
        getattr(library, ABSL_SET_MIN_LOG_LEVEL)(ctypes.c_int(level))
    except (OSError, AttributeError, ValueError):  # another build or platform, or a malformed level: as it was
        return


def quiet_libraries(verbosity: int) -> None:
    """Silences TensorFlow/Beam/absl INFO and WARNING chatter unless verbosity ≥ 1."""
    if verbosity >= 1:
        return
    # 3: even TF's C++ "errors" that are not ours to report (e.g. no CUDA driver on a CPU machine).
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    root = logging.getLogger()
    root.setLevel(logging.WARNING)  # absl's app.run leaves the root at INFO
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    # Records that libraries log through the root or an unlevelled logger (Beam, TF's absl-logging
    # modules) reach the root's handlers directly: filter there, not on the logger.
    for handler in root.handlers:
        if not any(isinstance(f, _LibraryChatterFilter) for f in handler.filters):
            handler.addFilter(_LibraryChatterFilter())


def _boundary_errors() -> tuple:
    """The exception types a CLI reports as one line (library types only when already imported)."""
    types = [AlbertError, OSError]
    tf = sys.modules.get("tensorflow")
    if tf is not None:
        types.append(tf.errors.OpError)
    return tuple(types)


def error_line(error: BaseException) -> str:
    """`error: <message>`; a message that lists several problems keeps its list (one problem a line)."""
    message = str(error).strip() or type(error).__name__
    if isinstance(error, OSError) and error.filename and str(error.filename) not in message:
        message = f"{error.filename}: {message}"
    return f"error: {message}"


HELP_ARGS = ("--help", "-h", "-?", "--helpshort")
HELPFULL_ARGS = ("--helpfull", "-helpfull", "--helpfull=true", "-helpfull=true")  # every flag defined so far
# Flags that libraries define when imported; under `python -m`, absl names our own by the script's path.
LIBRARY_FLAG_MODULES = ("absl", "tensorflow", "tf_keras", "keras", "jax", "apache_beam")


def our_flags(flag_values=None) -> list:
    """The flags the program itself defined (absl's and TensorFlow's own left out)."""
    flag_values = flag_values or flags.FLAGS
    return [
        flag
        for module, module_flags in sorted(flag_values.flags_by_module_dict().items())
        if not module.startswith(LIBRARY_FLAG_MODULES)
        for flag in module_flags
    ]


def check_no_empty_values(flag_values=None) -> None:
    """Refuses a flag given an empty (or blank) string: a path or name that is no value, not the flag's default."""
    for flag in our_flags(flag_values):
        if flag.present and isinstance(flag.value, str) and not flag.value.strip():
            raise AlbertError(f"--{flag.name} {flag.value!r}: empty value (leave the flag out for its default)")


def help_text(description) -> str:
    """The command's description and every flag it defined, absl's own left to `--helpfull`.

    absl's `--help` lists only the flags of the `__main__` module (none under a console
    script, whose `__main__` is a wrapper) and exits with status 1.
    """
    sections = [(description or "").strip()]
    for module, module_flags in sorted(flags.FLAGS.flags_by_module_dict().items()):
        if not module.startswith(LIBRARY_FLAG_MODULES) and module_flags:
            sections.append(flags.FLAGS.module_help(module).strip())
    sections.append("Try --helpfull for absl's own flags too.")
    return "\n\n".join(s for s in sections if s)


# A command that hands the flags it does not define to another program (data_prep: Beam's options) says,
# given those, which that program does not take either and the names it does take (raising an AlbertError
# for a value it cannot parse).
PassThrough = Callable[[List[str]], Tuple[List[str], Sequence[str]]]


def flags_usage_error(message: str) -> None:
    """Exits as absl's own parser does on a bad flag (every command says a bad flag the same way)."""
    if "\n" in message:
        sys.stderr.write("FATAL Flags parsing error:\n" + "".join(f"  {line}\n" for line in message.splitlines()))
    else:
        sys.stderr.write(f"FATAL Flags parsing error: {message}\n")
    sys.stderr.write("Pass --helpshort or --helpfull to see help on flags.\n")
    sys.exit(1)


def parse_with_pass_through(pass_through: PassThrough, argv: List[str]) -> List[str]:
    """Our flags parsed; the rest left in `argv` when the other program takes them, else refused."""
    try:
        argv = flags.FLAGS(argv, known_only=True)
        unknown, their_names = pass_through(argv[1:])
    except (flags.Error, AlbertError) as error:
        flags_usage_error(str(error))
    if unknown:
        name = unknown[0].split("=", 1)[0]
        if not name.startswith("-"):
            flags_usage_error(f"unexpected argument {name!r} (every input is a flag's value; quote a glob)")
        name = name.lstrip("-")
        ours = [flag.name for flag in our_flags()]
        close = difflib.get_close_matches(name, ours + list(their_names), n=3)
        flags_usage_error(str(flags.UnrecognizedFlagError(name, suggestions=close)))
    return argv


class _ReaderMayLeave:
    """`sys.stdout` whose reader may leave (`| head -1`): what is printed after that is dropped and the
    run goes on to its end (its files whole, its exit status its own)."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._reader_left()
            return len(text)

    def flush(self):
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._reader_left()

    def _reader_left(self):
        # Later writes, and the flush at exit, go nowhere (not an error the interpreter reports on exit).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.stream.fileno())
        os.close(devnull)

    def __getattr__(self, name):  # isatty, fileno, encoding, ...: the stream's own
        return getattr(self.stream, name)


@contextlib.contextmanager
def stdout_reader_may_leave():
    """Runs the block with `sys.stdout` a `_ReaderMayLeave`."""
    stream = sys.stdout
    sys.stdout = _ReaderMayLeave(stream)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stdout = stream


def run_cli(
    main: Callable,
    define_flags: Callable[[], None],
    pass_through: Optional[PassThrough] = None,
    check_flags: Optional[Callable[[], None]] = None,
) -> None:
    """Defines the flags, parses them, runs `main(argv)` inside the error boundary.

    `pass_through` leaves the flags another program takes in `argv` (data_prep passes them to Beam); any
    other unknown flag is refused, as in every command. `check_flags`: the command's checks of its flags
    alone, run before the backend check imports Keras (and TensorFlow).
    """
    verbosity = verbosity_from_argv(sys.argv)
    quiet_libraries(verbosity)
    define_flags()
    asked_for_help = [arg for arg in sys.argv[1:] if arg in HELP_ARGS or arg.lower() in HELPFULL_ARGS]
    if asked_for_help:
        full = any(arg.lower() in HELPFULL_ARGS for arg in asked_for_help)  # absl's own --helpfull exits 1
        try:
            print(flags.FLAGS.get_help() if full else help_text(sys.modules[main.__module__].__doc__), flush=True)
        except BrokenPipeError:  # `--help | head`: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)

    def guarded(argv):
        quiet_libraries(verbosity)  # again: absl's flag parsing reset the levels and added its handler
        if verbosity < 1:
            quiet_tensorflow_absl_log()
        show_trace = verbosity >= 1 or os.environ.get(TRACEBACK_ENV) == "1"
        # SIGTERM unwinds (locks released, staging removed) unless a training loop defers it to save first.
        signal.signal(signal.SIGTERM, preemption.raise_terminated)
        try:
            check_no_empty_values()
            if check_flags is not None:
                check_flags()
            if "backend" in flags.FLAGS:  # the commands that train or run a model: Keras must run on it
                check_backend(flags.FLAGS.backend)
            with stdout_reader_may_leave():
                result = main(argv)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the work is done: exiting is not worth a 143
            return result
        except BaseException as error:
            end_bar_line()  # what is printed next (error line, traceback) starts a line of its own
            if isinstance(error, KeyboardInterrupt):
                print("error: interrupted", file=sys.stderr)
                sys.exit(130)
            if isinstance(error, preemption.Terminated):
                print("error: terminated by SIGTERM; nothing half-written is left", file=sys.stderr)
                sys.exit(preemption.TERMINATED_EXIT_STATUS)
            if not isinstance(error, _boundary_errors()) or show_trace:
                raise
            print(error_line(error), file=sys.stderr, flush=True)
            status = getattr(error, "exit_status", 1)  # a preempted run: 75 (albert_tf.preemption)
            if getattr(error, "exit_at_once", False):  # a lost process: exit handlers would wait for it
                sys.stdout.flush()
                os._exit(status)
            sys.exit(status)

    if pass_through is not None:
        app.run(guarded, flags_parser=functools.partial(parse_with_pass_through, pass_through))
    else:
        app.run(guarded)
