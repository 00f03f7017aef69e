"""A command run in the test process: its argv through the console script's own boundary.

`run_command("albert_tf.run_squad", [...])` calls the module's `cli()` (the entry point
`python -m` and the console script run) with that argv, and returns what a subprocess
would: the exit status, stdout and stderr. It costs no interpreter start and no second
import of TensorFlow, Keras and Beam. A test keeps a true subprocess only where the
process itself is under test (signals, kill -9, the installed wheel, locks between
processes, what is imported at start-up), and says so.

The flags the command defined are removed afterwards and every flag is reset, so the next
command defines and parses its own as in a fresh process.
"""

import contextlib
import dataclasses
import importlib
import importlib.util
import io
import logging
import signal
import sys
import traceback
import types

from absl import flags

from albert_tf.cli.app import LIBRARY_FLAG_MODULES, LIBRARY_LOGGERS


@dataclasses.dataclass
class Completed:
    """What `subprocess.run(..., capture_output=True, text=True)` returns, for the same command."""

    returncode: int
    stdout: str
    stderr: str


def run_command(module: str, argv) -> Completed:
    """`python -m <module> *argv`, in this process."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    saved_argv = sys.argv
    stdout, stderr = io.StringIO(), io.StringIO()
    returncode = 0
    sys.argv = [module, *map(str, argv)]
    try:
        with (
            command_flags(),
            logging_as_it_was(),
            op_determinism_as_it_was(),
            main_module_as(module),
            absl_log_output_to(stderr),
            sigterm_record_as_it_was(),
            pending_lock_actions_as_they_were(),
            contextlib.redirect_stdout(stdout),
            contextlib.redirect_stderr(stderr),
        ):
            defined_before = set(flags.FLAGS)
            entry = imported_cli(module)
            try:
                entry()
            except SystemExit as exit_:
                returncode = exit_status(exit_.code)
                if isinstance(exit_.code, str):  # as the interpreter does with sys.exit("message")
                    print(exit_.code, file=sys.stderr)
            except Exception:  # noqa: BLE001  (what escapes the command: the interpreter prints it, exits 1)
                traceback.print_exc()
                returncode = 1
            finally:
                remember_library_flags(module, defined_before)
    finally:
        sys.argv = saved_argv
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return Completed(returncode, stdout.getvalue(), stderr.getvalue())


# module -> [(flag, the module that defined it, its validators)]: the flags that importing a command's
# module, or a library it imports while it runs, defines (TensorFlow's saved_model_cli defines --dir,
# --output_dir, ... when imported), kept here while they are removed between its runs, where they would
# clash with our commands' own flags.
_IMPORT_FLAGS: dict = {}


def remember_library_flags(module: str, defined_before) -> None:
    """The flags a library defined while `module` ran (`albert_tf.saved_model_cli` imports TensorFlow's tool
    only once its command line is checked): put back before its next run, as the library, imported once,
    will not define them again. Without validators: those it has now are the run's own (required flags)."""
    known = {flag.name for flag, _, _ in _IMPORT_FLAGS.setdefault(module, [])}
    for name in set(flags.FLAGS) - set(defined_before) - known:
        flag, defined_in = flags.FLAGS[name], flags.FLAGS.find_module_defining_flag(name)
        if name == flag.name and defined_in and defined_in.startswith(LIBRARY_FLAG_MODULES):
            _IMPORT_FLAGS[module].append((flag, defined_in, []))


def imported_cli(module: str):
    """`module.cli`, with the flags its import defines registered as a fresh process's import would."""
    before = set(flags.FLAGS)
    entry = importlib.import_module(entry_module(module)).cli
    if module not in _IMPORT_FLAGS:
        _IMPORT_FLAGS[module] = [
            (flags.FLAGS[name], flags.FLAGS.find_module_defining_flag(name), list(flags.FLAGS[name].validators))
            for name in set(flags.FLAGS) - before
            if name == flags.FLAGS[name].name  # not a short name
        ]
    for flag, defined_in, validators in _IMPORT_FLAGS[module]:
        if flag.name not in flags.FLAGS:  # removed after its last run
            flag.unparse()
            flag.validators[:] = validators
            flags.DEFINE_flag(flag, flags.FLAGS, module_name=defined_in)
    return entry


# Packages whose `__main__` forwards to a command module of another name.
_PACKAGE_COMMANDS = {"albert_tf.export": "albert_tf.cli.export_model"}


def entry_module(module: str) -> str:
    """The module whose `cli()` `python -m <module>` runs: a data_prep job's `__main__` forwards to
    `albert_tf.cli.<job>` (importing that `__main__` would run it), `albert_tf.export`'s to
    `albert_tf.cli.export_model`."""
    package, _, job = module.rpartition(".")
    return f"albert_tf.cli.{job}" if package == "data_prep" else _PACKAGE_COMMANDS.get(module, module)


@contextlib.contextmanager
def pending_lock_actions_as_they_were():
    """The writes a command deferred until its run was accepted, which never came (`locking.when_accepted`: the
    settings.json of a run its flags, another process's lock or its resume's binding refused) die with it, as
    with its process."""
    from albert_tf import locking

    before = {key: list(actions) for key, actions in locking._pending.items()}
    try:
        yield
    finally:
        locking._pending.clear()
        locking._pending.update(before)


@contextlib.contextmanager
def main_module_as(module: str):
    """`sys.modules["__main__"]` named as `python -m <module>` names it (its `__spec__`: the module, or a
    package's `__main__`), so `run_record.command_name()` writes the command as typed in settings.json,
    not `pytest`. Nothing is executed: the spec is only looked up."""
    spec = importlib.util.find_spec(module)
    if spec.submodule_search_locations is not None:  # a package: `python -m` runs its __main__.py
        spec = importlib.util.find_spec(f"{module}.__main__")
    main = types.ModuleType("__main__")
    main.__spec__, main.__file__, main.__loader__ = spec, spec.origin, spec.loader
    saved = sys.modules["__main__"]
    sys.modules["__main__"] = main
    try:
        yield
    finally:
        sys.modules["__main__"] = saved


@contextlib.contextmanager
def command_flags():
    """The flags a command defines inside are removed on exit, the validators it adds to the others
    (`flags.mark_flags_as_required`) too, and every flag is reset to its default.

    Inside, only the libraries' flags (absl's, TensorFlow's, ...) are defined, as in a fresh process:
    flags that a test's imports defined (Model Garden's converter defines --albert_config_file) are
    set aside and put back on exit.
    """
    set_aside = []
    for module, module_flags in flags.FLAGS.flags_by_module_dict().items():
        if not module.startswith(LIBRARY_FLAG_MODULES):
            set_aside += [(flag, module) for flag in module_flags]
    for flag, _ in set_aside:
        for name in {flag.name, flag.short_name} - {None}:
            if name in flags.FLAGS:
                delattr(flags.FLAGS, name)
    defined_before = set(flags.FLAGS)
    validators = {name: list(flags.FLAGS[name].validators) for name in defined_before}
    try:
        yield flags.FLAGS
    finally:
        for name in set(flags.FLAGS) - defined_before:
            delattr(flags.FLAGS, name)
        for name, kept in validators.items():
            flags.FLAGS[name].validators[:] = kept
        flags.FLAGS.unparse_flags()
        for flag, module in set_aside:
            if flag.name not in flags.FLAGS:
                flags.DEFINE_flag(flag, flags.FLAGS, module_name=module)


@contextlib.contextmanager
def logging_as_it_was():
    """The levels and root handlers' filters a command changes (`quiet_libraries`) put back, so a later
    test's `caplog` sees what it would in a fresh worker."""
    loggers = [logging.getLogger(), *(logging.getLogger(name) for name in LIBRARY_LOGGERS)]
    levels = [logger.level for logger in loggers]
    handlers = {handler: list(handler.filters) for handler in logging.getLogger().handlers}
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
        root = logging.getLogger()
        for handler in list(root.handlers):
            if handler in handlers:
                handler.filters[:] = handlers[handler]
            else:  # absl's, added by app.run
                root.removeHandler(handler)


@contextlib.contextmanager
def op_determinism_as_it_was():
    """`run_pretraining --deterministic` turns on TensorFlow's op determinism for the process: turned off again.

    TensorFlow is not imported for a command that does not import it (train_sentencepiece, the vocab
    builder): a TensorFlow imported during the command started with determinism off."""

    def config():
        from tensorflow.python.framework import config  # the public API can only turn it on

        return config

    enabled = "tensorflow" in sys.modules and config().is_op_determinism_enabled()
    try:
        yield
    finally:
        if not enabled and "tensorflow" in sys.modules:
            config().disable_op_determinism()


@contextlib.contextmanager
def absl_log_output_to(stream):
    """absl's handler writes to the stderr it found at import; a process's would be captured: so is this."""
    from absl import logging as absl_logging

    handler = absl_logging.get_absl_handler().python_handler
    kept = handler.stream
    handler.stream = stream
    try:
        yield
    finally:
        handler.stream = kept


@contextlib.contextmanager
def sigterm_record_as_it_was():
    """A SIGTERM a command received (`preemption.check_terminated`) ends with its process: here, with its run."""
    from albert_tf import preemption

    kept = preemption._terminated
    try:
        yield
    finally:
        preemption._terminated = kept


def exit_status(code) -> int:
    """The process exit status `sys.exit(code)` gives."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1
