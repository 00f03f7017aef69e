"""What every format's `load` returns, and the error for a path that holds no model.

Example:

>>> issubclass(ModelFileError, ValueError)
True
"""

import dataclasses
from typing import Optional

from albert_tf.errors import AlbertError
from albert_tf.formats.table import backbone_of


class ModelFileError(AlbertError, ValueError):
    """A path that holds no loadable model; the message says what was looked for."""


@dataclasses.dataclass
class LoadedModel:
    """A model read from disk: the model, its tokenizer, where it came from and what the user should know."""

    model: object  # a keras.Model of ours
    source: str  # the file or directory the weights came from
    tokenizer: Optional[object] = None  # the one saved with the model (or given), None if there is none
    zero_filled: tuple = ()  # tensors the source lacks (e.g. keras-hub's SOP head), set to zeros
    format: str = ""  # the format name `albert_tf.formats.detect` gives
    notes: tuple = ()  # one line each: what was filled in, left out or cannot be checked
    no_tokenizer_hint: str = ""  # what to do instead, where the format never holds a tokenizer

    @property
    def config(self):
        """The model's `AlbertConfig`."""
        return backbone_of(self.model).albert_config

    @property
    def spm_model_file(self) -> Optional[str]:
        return self.tokenizer.model_file if self.tokenizer and self.tokenizer.kind == "sentencepiece" else None

    @property
    def vocab_file(self) -> Optional[str]:
        return self.tokenizer.model_file if self.tokenizer and self.tokenizer.kind == "wordpiece" else None
