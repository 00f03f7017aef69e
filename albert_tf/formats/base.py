"""What a model format is to albert_tf: one class with five members, registered once.

A format says whether a path is its own (`claims`), reads it into one
`LoadedModel` (`load`), writes a model with its tokenizer (`save`) and says
what of a model it cannot hold (`unwritten`). `albert_tf.formats` loops over
the registered formats; nothing else knows their names.

Two optional members let `albert_tf.formats.load_weights` take a shorter road:
`fill` (load straight into an existing model; ours does) and `tf1_variables`
(a format that stores Google's layout hands its variables over as they are).

Example (a format that holds nothing, to show the shape):

>>> class Nothing(Format):
...     name = "nothing"
...     def claims(self, path):
...         return path.endswith(".nothing")
>>> Nothing().claims("x.nothing"), Nothing().unwritten(None)
(True, [])
"""

import os
from typing import Dict, List, Optional, Tuple

import numpy as np

from albert_tf.formats.loaded import LoadedModel
from albert_tf.formats.table import LoadReport
from albert_tf.json_records import UnreadableJsonError, read_json
from albert_tf.tokenization import TOKENIZER_FILE, Tokenizer, load_tokenizer, load_tokenizer_dir


class Format:
    """One model format: its name, how to recognise it, read it, write it."""

    name = ""  # what `--output_format` and `detect` call it

    def claims(self, path: str) -> bool:
        """True when `path` holds a model in this format (cheap: file names and markers only)."""
        raise NotImplementedError

    def load(
        self,
        path: str,
        albert_config_file: Optional[str] = None,
        tokenizer: Optional[Tokenizer] = None,
        do_lower_case: Optional[bool] = None,
    ) -> LoadedModel:
        """The model at `path` with its tokenizer (None if none is stored with it), and notes for the user.

        `albert_config_file` replaces the config stored with the weights (formats that keep
        their own config ignore it); `tokenizer`, when given, is used instead of the stored
        one (which is then not read); `do_lower_case` overrides the stored one's setting.
        """
        raise NotImplementedError(f"{self.name}: a write-only format")

    def save(self, model, directory: str, tokenizer: Optional[Tokenizer] = None) -> None:
        """Writes `model` and `tokenizer` (when given) into the existing, empty `directory`."""
        raise NotImplementedError(f"{self.name}: a read-only format")

    def near_miss(self, path: str) -> Optional[str]:
        """Why `path`, which looks like this format, is not one (a missing or broken file); else None.

        Said instead of a bare "holds no model" when no format claims `path`.
        """
        del path
        return None

    def unwritten(self, model) -> List[str]:
        """One line per part of `model` this format has no place for (said as `note:` lines)."""
        del model
        return []

    def fill(self, model, path: str, from_group0: bool = False) -> Optional[LoadReport]:
        """Loads `path` straight into the existing `model`, or None to go through Google's name table.

        `from_group0`: every group `path` lacks starts as its group 0 (a format may leave that to the table).
        """
        del model, path, from_group0
        return None

    def tf1_variables(self, path: str) -> Optional[Tuple[str, Dict[str, np.ndarray]]]:
        """(source, {Google's variable name: array}) when the format stores that layout; None otherwise."""
        del path
        return None


class PeerDirectoryFormat(Format):
    """A peer library's directory (HF, keras-hub): its own config, weights and SentencePiece model.

    Subclasses say how to `read` the weights, where the SentencePiece model lies and
    whether the peer lowercases; loading is the same for all of them.
    """

    def read(self, path: str) -> Tuple[object, LoadReport]:
        """(our model, the report of what was filled) from the directory `path`."""
        raise NotImplementedError

    def spm_file(self, path: str) -> Optional[str]:
        """The SentencePiece model stored in `path`, or None."""
        raise NotImplementedError

    def lower_case(self, path: str) -> bool:
        """Whether the peer's tokenizer saved in `path` lowercases."""
        raise NotImplementedError

    def load(self, path, albert_config_file=None, tokenizer=None, do_lower_case=None) -> LoadedModel:
        """Our model (the directory's own config: `albert_config_file` is not used) and its SentencePiece model."""
        del albert_config_file
        model, report = self.read(path)
        notes = [f"{path}: has no {name}: set to zeros" for name in report.zero_filled]
        spm = self.spm_file(path)
        if tokenizer is None and spm is not None:
            lower = self.lower_case(path) if do_lower_case is None else do_lower_case
            tokenizer = load_tokenizer(spm_model_file=spm, do_lower_case=lower)
        return LoadedModel(model, path, tokenizer, tuple(report.zero_filled), self.name, tuple(notes))


def json_object_problem(path: str) -> Optional[str]:
    """What is wrong with the JSON object file at `path` (unreadable, not JSON, not an object), or None."""
    try:
        values = read_json(path)
    except OSError as error:
        return f"{path}: not a readable JSON file ({error.strerror})"
    except UnreadableJsonError as error:
        return str(error)
    return None if isinstance(values, dict) else f"{path}: expected a JSON object, got {type(values).__name__}"


def tokenizer_beside(directory: str, do_lower_case: Optional[bool] = None) -> Tuple[Optional[Tokenizer], List[str]]:
    """(the tokenizer saved in `directory` or None, notes on what cannot be checked about it).

    A vocabulary without `tokenizer.json`, or whose `tokenizer.json` records no
    `vocab_sha256`, cannot be told apart from another file of the same size
    put in its place: said, not refused (Google's archives have neither).
    """
    tokenizer = load_tokenizer_dir(directory, do_lower_case)
    if tokenizer is None:
        return None, []
    settings = os.path.join(directory, TOKENIZER_FILE)
    vocabulary = os.path.basename(tokenizer.model_file)
    if not os.path.isfile(settings):
        return tokenizer, [
            f"{directory}: {vocabulary} has no {TOKENIZER_FILE} beside it; nothing proves it is the "
            "vocabulary the model was trained with"
        ]
    recorded = read_json(settings).get("vocab_sha256")  # load_tokenizer_dir has read it already: a JSON object
    if not recorded:
        return tokenizer, [
            f"{settings}: records no vocab_sha256; nothing proves {vocabulary} is the vocabulary "
            "the model was trained with"
        ]
    return tokenizer, []
