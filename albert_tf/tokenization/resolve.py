"""Finding a model's vocabulary: from a flag, from bytes, from a model directory; and checking its size.

Every step looks the kind up in the registry, so a new kind needs nothing here.
"""

import fnmatch
import os
from typing import Mapping, Optional

from albert_tf.file_safety import path_inside
from albert_tf.json_records import UnreadableJsonError, read_json
from albert_tf.tokenization import registry
from albert_tf.tokenization.base import TOKENIZER_FILE, Tokenizer, TokenizerError


def _flag_list() -> str:
    return " and ".join(f"--{k.flag} ({k.description})" for k in registry.kinds())


def load_vocabulary(kind: str, path: str, do_lower_case: bool = True, named_by: Optional[str] = None) -> Tokenizer:
    """The tokenizer of `kind` from the file `path`; an unreadable file's message starts with `named_by`.

    `named_by` defaults to the kind's flag ("--spm_model_file ").
    """
    entry = registry.kind_named(kind)
    try:
        return entry.from_file(path, do_lower_case)
    except OSError as error:
        where = f"--{entry.flag} " if named_by is None else named_by
        raise TokenizerError(f"{where}{path}: cannot be read ({error.strerror or error})") from None


def tokenizer_from_files(files: Mapping[str, Optional[str]], do_lower_case: bool = True) -> Tokenizer:
    """The tokenizer of the one vocabulary file given, `files` mapping each kind's flag to a path (or None)."""
    given = [(k, files[k.flag]) for k in registry.kinds() if files.get(k.flag)]
    if len(given) != 1:
        raise TokenizerError(f"give exactly one of {_flag_list()}; got {'neither' if not given else 'both'}")
    (kind, path), *_ = given
    return load_vocabulary(kind.name, path, do_lower_case)


def load_tokenizer(spm_model_file: Optional[str] = None, vocab_file: Optional[str] = None, do_lower_case: bool = True):
    """The tokenizer of exactly one of a SentencePiece model and a WordPiece `vocab.txt`."""
    return tokenizer_from_files({"spm_model_file": spm_model_file, "vocab_file": vocab_file}, do_lower_case)


def tokenizer_from_bytes(kind: str, data: bytes, do_lower_case: bool = True) -> Tokenizer:
    """Rebuilds a tokenizer from its `kind` and `model_proto` (Beam workers, SavedModel assets)."""
    return registry.kind_named(kind).from_bytes(data, do_lower_case)


def vocabulary_in(directory: str) -> Optional[tuple]:
    """(kind, path) of the vocabulary file in `directory`, None if none.

    Each kind's `asset_name` first, then (kinds in registration order) its
    `asset_patterns` where exactly one file matches: spm.model, Google's one
    *.model, vocab.txt.
    """
    for kind in registry.kinds():
        path = os.path.join(directory, kind.asset_name)
        if os.path.isfile(path):
            return kind.name, path
        for pattern in kind.asset_patterns:
            matches = sorted(n for n in os.listdir(directory) if fnmatch.fnmatch(n, pattern))
            if len(matches) == 1:
                return kind.name, os.path.join(directory, matches[0])
    return None


def load_tokenizer_dir(directory: str, do_lower_case: Optional[bool] = None) -> Optional[Tokenizer]:
    """The tokenizer saved in a model directory (None when it holds no vocabulary).

    `tokenizer.json` gives the kind and `do_lower_case`; a directory without
    it (Google's archives, older runs) uses its vocabulary file with
    `do_lower_case` True, as the released models. `do_lower_case` overrides.

    Raises:
        TokenizerError: an unreadable `tokenizer.json` or vocabulary file.
    """
    if not os.path.isdir(directory):
        return None
    settings_file = os.path.join(directory, TOKENIZER_FILE)
    saved = {}
    if os.path.isfile(settings_file):
        try:
            saved = read_json(settings_file)
        except OSError as error:
            raise TokenizerError(f"{settings_file}: not readable JSON ({error.strerror})") from None
        except UnreadableJsonError as error:
            raise TokenizerError(str(error)) from None
        if not isinstance(saved, dict):
            raise TokenizerError(f"{settings_file}: expected a JSON object, got {type(saved).__name__}")
        known = registry.kind_names()
        if not isinstance(saved.get("kind"), str) or saved["kind"] not in known:
            raise TokenizerError(f"{settings_file}: field 'kind': expected one of {known}, got {saved.get('kind')!r}")
        name = saved.get("vocabulary") or registry.kind_named(saved["kind"]).asset_name
        found = (saved["kind"], path_inside(directory, name, f"{settings_file}: field 'vocabulary'"))
    else:
        found = vocabulary_in(directory)
        if found is None:
            return None
    kind, path = found
    lower = do_lower_case if do_lower_case is not None else saved.get("do_lower_case", True)
    tokenizer = load_vocabulary(kind, path, lower, named_by="")
    recorded = saved.get("vocab_sha256")
    if recorded is not None and recorded != tokenizer.model_sha256:
        raise TokenizerError(
            f"{path}: not the vocabulary this model was saved with ({settings_file} records vocab_sha256 "
            f"{str(recorded)[:12]}…, the file has {tokenizer.model_sha256[:12]}…); restore the model's own file"
        )
    return tokenizer


def resolve_tokenizer(
    files: Optional[Mapping[str, Optional[str]]] = None,
    do_lower_case: Optional[bool] = None,
    model_dir: Optional[str] = None,
    required: bool = True,
) -> Optional[Tokenizer]:
    """The one place a command picks its tokenizer.

    A vocabulary given by flag wins (`do_lower_case` default True); otherwise
    the one saved with the model in `model_dir` (its own `do_lower_case`
    unless the flag is given).

    Args:
        files: every kind's flag value by flag name (`{"spm_model_file": path, ...}`; unnamed kinds: none given).

    Raises:
        TokenizerError: two files given, or none found when `required`.
    """
    files = {kind.flag: None for kind in registry.kinds()} | dict(files or {})
    if any(files.values()):
        return tokenizer_from_files(files, True if do_lower_case is None else do_lower_case)
    tokenizer = load_tokenizer_dir(model_dir, do_lower_case) if model_dir else None
    if tokenizer is None and required:
        where = f" and {model_dir} holds none" if model_dir else ""
        raise TokenizerError(f"no vocabulary: give {vocabulary_flags()}{where}")
    return tokenizer


def vocabulary_flags() -> str:
    """Every registered kind's flag, for messages: `--spm_model_file or --vocab_file`."""
    return " or ".join(f"--{k.flag}" for k in registry.kinds())


def check_vocab_size(vocab_size: int, tokenizer: Optional[Tokenizer], where: str) -> None:
    """The config's `vocab_size` must be the tokenizer's (ids beyond the table would crash or mislead)."""
    if tokenizer is not None and tokenizer.vocab_size != vocab_size:
        raise TokenizerError(
            f"{where}: the config's vocab_size is {vocab_size} but {tokenizer.model_file} has "
            f"{tokenizer.vocab_size} pieces"
        )
