"""ALBERT model configuration in Google's `albert_config.json` format.

The field names are those of the released `albert_config.json` files, so a
Google config loads unchanged. Unlike the original `AlbertConfig.from_dict`,
a missing field is an error (the original silently falls back to xxlarge
values), and every value is validated with an error that names the field.

Example:

>>> config = AlbertConfig.from_json_file("configs/albert_tiny.json")
>>> config.hidden_size % config.num_attention_heads
0
"""

import dataclasses
import json
import os
import sys
from typing import Any, Dict, Optional

from albert_tf.errors import AlbertError
from albert_tf.publish import staged_file

# `hidden_act` names, matched case-insensitively as the original's `get_activation`
# (which lower-cases). "gelu" is the original's tanh approximation; "gelu_new" is
# Hugging Face's name for that same function (its v2 configs), not HF's erf "gelu".
ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "linear")
ACTIVATION_ALIASES = {"gelu_new": "gelu"}


def canonical_activation(name) -> Optional[str]:
    """The `ACTIVATIONS` entry a config's `hidden_act` names, or None.

    >>> canonical_activation("GELU"), canonical_activation("gelu_new"), canonical_activation("swish")
    ('gelu', 'gelu', None)
    """
    if not isinstance(name, str):
        return None
    name = name.lower()
    name = ACTIVATION_ALIASES.get(name, name)
    return name if name in ACTIVATIONS else None


SHARING_MODES = ("all", "attention", "ffn", "none")

# Fields every albert_config.json must have, in the order Google writes them.
REQUIRED_FIELDS = (
    "attention_probs_dropout_prob",
    "hidden_act",
    "hidden_dropout_prob",
    "embedding_size",
    "hidden_size",
    "initializer_range",
    "intermediate_size",
    "max_position_embeddings",
    "num_attention_heads",
    "num_hidden_layers",
    "num_hidden_groups",
    "inner_group_num",
    "type_vocab_size",
    "vocab_size",
)
# Optional fields and their defaults. `down_scale_factor` is stored but unused
# by the original code; `sharing` is ours (the paper's sharing ablation).
OPTIONAL_FIELDS = {"down_scale_factor": 1, "sharing": "all"}
# Keys the released `albert_config.json` files carry that Google's code stores
# but never uses (Google's released configs; `net_structure_type` only for --init_from_group0).
# Accepted, kept in `extra` and written back; any other key is an error.
PASSTHROUGH_FIELDS = ("gap_size", "layers_to_keep", "net_structure_type", "num_memory_blocks")


class ConfigError(AlbertError, ValueError):
    """A config file or dict is malformed or inconsistent."""


@dataclasses.dataclass(frozen=True)
class AlbertConfig:
    """Hyperparameters of an ALBERT (or BERT) encoder.

    Args:
        vocab_size: rows of the word-embedding table (V).
        embedding_size: width E of the word, position and type embeddings.
        hidden_size: transformer width H.
        num_hidden_layers: number of layer applications L.
        num_hidden_groups: number of distinct parameter groups G; layer `l`
            uses group `int(l / L * G)`.
        num_attention_heads: attention heads N; H must be divisible by N.
        intermediate_size: FFN inner width.
        inner_group_num: attention+FFN blocks per layer, each with own weights.
        hidden_act: one of `gelu` (tanh approximation), `gelu_exact` (the erf
            form: HF's `gelu`, e.g. its ALBERT v1 configs), `relu`, `tanh`, `linear`,
            in any case, or `gelu_new` (HF's name for the same tanh GELU); kept
            as written (a saved config repeats it).
        hidden_dropout_prob: dropout on embeddings and sublayer outputs.
        attention_probs_dropout_prob: dropout on attention probabilities.
        max_position_embeddings: rows of the position table.
        type_vocab_size: rows of the token-type table.
        initializer_range: stddev of the truncated-normal initializer.
        down_scale_factor: stored for compatibility; unused (as in Google's).
        sharing: which sublayers follow the group routing: `all` (ALBERT),
            `attention` or `ffn` (the paper's ablations: the other sublayer
            gets its own weights in every layer), or `none` (BERT-like).
        extra: the original's stored-but-unused keys present in the JSON
            (`PASSTHROUGH_FIELDS`, e.g. `net_structure_type`), kept so that a
            round trip writes them back, otherwise ignored.
    """

    vocab_size: int
    embedding_size: int
    hidden_size: int
    num_hidden_layers: int
    num_hidden_groups: int
    num_attention_heads: int
    intermediate_size: int
    inner_group_num: int
    hidden_act: str
    hidden_dropout_prob: float
    attention_probs_dropout_prob: float
    max_position_embeddings: int
    type_vocab_size: int
    initializer_range: float
    down_scale_factor: int = 1
    sharing: str = "all"
    extra: Dict[str, Any] = dataclasses.field(default_factory=dict)
    source: Optional[str] = dataclasses.field(default=None, compare=False)

    def __post_init__(self):
        self._validate()

    # ---- construction -------------------------------------------------
    @classmethod
    def from_dict(cls, values: Dict[str, Any], source: Optional[str] = None):
        """Builds a config from a dict of `albert_config.json` fields."""
        where = source or "config"
        if not isinstance(values, dict):
            raise ConfigError(f"{where}: expected a JSON object of config fields, got {type(values).__name__}")
        missing = [name for name in REQUIRED_FIELDS if name not in values]
        if missing:
            raise ConfigError(f"{where}: missing required field(s): {', '.join(missing)}")
        known = set(REQUIRED_FIELDS) | set(OPTIONAL_FIELDS)
        unknown = sorted(k for k in values if k not in known and k not in PASSTHROUGH_FIELDS)
        if unknown:
            raise ConfigError(
                f"{where}: unknown field(s): {', '.join(unknown)} (a typo? the fields are "
                f"{', '.join(sorted(known | set(PASSTHROUGH_FIELDS)))})"
            )
        kwargs = {name: values[name] for name in REQUIRED_FIELDS}
        for name, default in OPTIONAL_FIELDS.items():
            kwargs[name] = values.get(name, default)
        extra = {k: v for k, v in values.items() if k not in known}
        return cls(**kwargs, extra=extra, source=source)

    @classmethod
    def from_json_file(cls, path: str) -> "AlbertConfig":
        """Reads an `albert_config.json` file."""
        if not os.path.isfile(path):
            raise ConfigError(f"{path}: config file does not exist")
        with open(path, "rb") as f:
            raw = f.read()
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise ConfigError(f"{path}: not UTF-8 text ({e})") from None
        try:
            values = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}: malformed JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
        return cls.from_dict(values, source=path)

    # ---- serialization ------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        """Returns the JSON fields; `sharing` only when it is not `all`."""
        values = {name: getattr(self, name) for name in REQUIRED_FIELDS}
        values["down_scale_factor"] = self.down_scale_factor
        if self.sharing != OPTIONAL_FIELDS["sharing"]:
            values["sharing"] = self.sharing
        values.update(self.extra)
        return values

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path: str) -> None:
        with staged_file(path) as staging, open(staging, "w", encoding="utf-8") as f:
            f.write(self.to_json_string())

    def backbone_kwargs(self) -> Dict[str, Any]:
        """Keyword arguments of `AlbertBackbone` (same names as the JSON)."""
        names = [n for n in REQUIRED_FIELDS] + ["sharing"]
        return {name: getattr(self, name) for name in names}

    # ---- validation ---------------------------------------------------
    def _fail(self, field: str, message: str):
        where = self.source or "config"
        raise ConfigError(f"{where}: field '{field}': {message}")

    def _validate(self):
        fields = dataclasses.fields(self)
        for name in (f.name for f in fields if f.type is int):  # every count and size
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                self._fail(name, f"must be an integer, got {value!r}")
            if value <= 0:
                self._fail(name, f"must be positive, got {value}")
        for name in (f.name for f in fields if f.name.endswith("_prob")):  # the dropout rates
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                self._fail(name, f"must be a number, got {value!r}")
            if not 0.0 <= value < 1.0:
                self._fail(name, f"must be in [0, 1), got {value}")
        value = self.initializer_range
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self._fail("initializer_range", f"must be a number, got {value!r}")
        if value <= 0:
            self._fail("initializer_range", f"must be positive, got {value}")
        if canonical_activation(self.hidden_act) is None:
            self._fail(
                "hidden_act",
                f"unknown activation {self.hidden_act!r}; expected one of "
                f"{', '.join(ACTIVATIONS + tuple(ACTIVATION_ALIASES))} (any case)",
            )
        if self.sharing not in SHARING_MODES:
            self._fail(
                "sharing",
                f"unknown mode {self.sharing!r}; expected one of {', '.join(SHARING_MODES)}",
            )
        if self.hidden_size % self.num_attention_heads:
            self._fail(
                "hidden_size",
                f"{self.hidden_size} is not divisible by num_attention_heads={self.num_attention_heads}",
            )
        if self.num_hidden_groups > self.num_hidden_layers:
            self._fail(
                "num_hidden_groups",
                f"{self.num_hidden_groups} groups exceed num_hidden_layers={self.num_hidden_layers}",
            )
        applications = self.num_hidden_layers * self.inner_group_num
        if applications > MAX_LAYER_APPLICATIONS:
            field = "num_hidden_layers" if self.num_hidden_layers >= self.inner_group_num else "inner_group_num"
            self._fail(
                field,
                f"{getattr(self, field):,} gives {applications:,} layer applications (num_hidden_layers × "
                f"inner_group_num); at most {MAX_LAYER_APPLICATIONS} are built (the paper's deepest model has 48)",
            )


# Keras builds the encoder as a graph one node deep per layer application, and about 490 applications
# exhaust Python's recursion limit (10⁶ took minutes before failing); the released models have 12 to 24.
MAX_LAYER_APPLICATIONS = 256


def shipped_configs_dir() -> str:
    """The released configs: the checkout's `configs/`, else where `pip install` put them.

    pyproject.toml's data-files install `configs/*.json` under `<prefix>/share/albert_tf/configs`.
    """
    checkout = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
    return checkout if os.path.isdir(checkout) else os.path.join(sys.prefix, "share", "albert_tf", "configs")
