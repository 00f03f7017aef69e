"""The one name-table engine: a format's tensors <-> our weights, all or nothing, values checked.

Every foreign format (Google's TF1 layout, HF safetensors, keras-hub presets)
is described by a list of `TensorMapping`s: the tensor's name in that format,
the weight of ours it becomes, and a layout that says how the array changes.
`load_table` and `export_table` read the same table in both directions, and
`load_table` checks every value (float, finite, plausible magnitude) for every
format alike before anything is assigned.

Layouts (ours -> theirs):
- `same`: identical arrays;
- `transposed`: Dense kernel `[in, out]` <-> `[out, in]` (torch Linear, the SOP `output_weights`);
- `heads_last`: per-head `[..., N, D]` <-> `[..., N·D]` (Q/K/V kernels and biases);
- `heads_first`: attention output `[N, D, H]` <-> `[N·D, H]`;
- `t_heads_last` / `t_heads_first`: the same, then transposed (torch Linear weights).

Example:

>>> to_theirs(np.arange(6.0).reshape(1, 2, 3), T_HEADS_LAST).shape
(6, 1)
>>> to_ours(np.arange(6.0).reshape(6, 1), T_HEADS_LAST, (1, 2, 3)).shape
(1, 2, 3)
"""

import dataclasses
import re
from typing import Dict, Iterable, List

import numpy as np

from albert_tf.config import AlbertConfig, ConfigError
from albert_tf.errors import AlbertError
from albert_tf.models.backbone import block_name, block_slot

SAME, TRANSPOSED = "same", "transposed"
HEADS_LAST, HEADS_FIRST = "heads_last", "heads_first"
T_HEADS_LAST, T_HEADS_FIRST = "t_heads_last", "t_heads_first"
BACKBONE, MODEL = "backbone", "model"  # what a weight path is resolved from
IDENTITY = "identity"  # a foreign-only tensor: the E→H projection peers keep when E = H
EYE, ZEROS = "eye", "zeros"  # its layouts: identity kernel [H, H] / zero bias [H]


class CheckpointError(AlbertError, ValueError):
    """Weights that do not fit the model or cannot be trusted; the message lists every problem."""


class NoHeadsError(CheckpointError):
    """Weights of an encoder alone, asked to fill a model with the pretraining heads."""


# No trained ALBERT/BERT weight comes near this: every weight starts at
# N(0, 0.02) (LayerNorm gains at 1), and the largest values reported for trained
# BERT-family models (LayerNorm "outlier" gains and biases) are in the tens, not
# thousands. 1e4 leaves over two orders of magnitude of headroom, still catches
# corrupted floats (a flipped high exponent bit turns 0.02 into ~1e36), and keeps
# every weight inside float16's range (65504) for mixed-precision serving.
MAX_ABS_WEIGHT = 1e4


def check_weight_values(source, name, value):
    """Raises `CheckpointError` naming `source` and `name` unless `value` is float, finite and plausible."""
    value = np.asarray(value)
    if not np.issubdtype(value.dtype, np.floating):
        raise CheckpointError(
            f"{source}: tensor {name} is {value.dtype}, not floating point; model weights are float "
            "(the file is not an ALBERT checkpoint or was written wrongly)"
        )
    if value.size == 0:
        return
    finite = np.isfinite(value)
    if not finite.all():
        bad = value[~finite]
        raise CheckpointError(
            f"{source}: tensor {name} holds {bad.size} non-finite value(s) (e.g. {bad.flat[0]}) "
            f"out of {value.size}; the file is corrupt or came from a diverged run"
        )
    largest = float(np.abs(value).max())
    if largest > MAX_ABS_WEIGHT:
        raise CheckpointError(
            f"{source}: tensor {name} holds |w| = {largest:.3g}, above {MAX_ABS_WEIGHT:g} "
            "(trained ALBERT weights are of order 1; the file is corrupt)"
        )


@dataclasses.dataclass(frozen=True)
class TensorMapping:
    """One tensor of a format and the weight of ours it maps to.

    `weight`: a layer name then public attributes, resolved from the backbone or
    the whole model (`scope`), e.g. `embeddings/word_embeddings/embeddings`.
    `optional`: the format may lack it (its architecture has no such tensor);
    it is then set to zeros and reported. `weight=IDENTITY` marks a tensor with
    no weight of ours that must be the identity (`layout=EYE`) or zeros
    (`layout=ZEROS`): the E→H projection peers keep when E = H.
    """

    name: str
    weight: str
    scope: str = BACKBONE
    layout: str = SAME
    optional: bool = False


@dataclasses.dataclass
class LoadReport:
    loaded: int
    zero_filled: List[str] = dataclasses.field(default_factory=list)  # optional tensors the source lacked
    ignored: List[str] = dataclasses.field(default_factory=list)  # non-weights (optimizer slots, buffers)
    skipped_heads: List[str] = dataclasses.field(default_factory=list)  # head tensors a backbone has no place for
    fresh_heads: List[str] = dataclasses.field(default_factory=list)  # heads of ours kept as they were, and why


# How notes name the layers that a format may lack.
LAYER_DESCRIPTIONS = {"sop_head": "SOP head", "pooler": "pooler"}


def unwritten_notes(owner: str, table: List[TensorMapping]) -> List[str]:
    """One note per layer of ours that `owner`'s format has no tensor for (its optional rows)."""
    layers = sorted({m.weight.split("/")[0] for m in table if m.optional})
    return [f"{owner} has no {LAYER_DESCRIPTIONS.get(layer, layer)}: {layer} is not written" for layer in layers]


def block_weights(config: AlbertConfig, layer_index: int, inner: int):
    """(attention layer name, ffn layer name) of ours used at `layer_index`, `inner`."""
    names = []
    for component in ("attention", "ffn"):
        slot = block_slot(component, layer_index, config.num_hidden_layers, config.num_hidden_groups, config.sharing)
        names.append(block_name(slot, inner, component))
    return tuple(names)


def check_contiguous_groups(config: AlbertConfig, peer: str, peer_group_of_layer) -> Dict[int, int]:
    """{peer group: first layer using it}; raises unless the peer routes layers as we do."""
    if config.sharing != "all":
        raise ConfigError(
            f"sharing={config.sharing!r}: {peer} has no such layout (it shares "
            "attention and FFN together); only sharing='all' converts"
        )
    groups = {}
    for layer in range(config.num_hidden_layers):
        ours = int(layer / config.num_hidden_layers * config.num_hidden_groups)
        theirs = peer_group_of_layer(layer)
        if ours != theirs:
            raise ConfigError(
                f"num_hidden_layers={config.num_hidden_layers}, num_hidden_groups="
                f"{config.num_hidden_groups}: {peer} routes layer {layer} to group {theirs}, "
                f"we route it to group {ours}; no exact conversion"
            )
        groups.setdefault(theirs, layer)
    if sorted(groups) != list(range(config.num_hidden_groups)):
        raise ConfigError(
            f"num_hidden_groups={config.num_hidden_groups}: some groups are used by "
            f"no layer; {peer} would hold weights we cannot place"
        )
    return groups


# ---- resolving and converting ---------------------------------------------------------
def backbone_of(model):
    """The `AlbertBackbone` of any model of ours (itself for a backbone)."""
    backbone = getattr(model, "backbone", model)
    if not hasattr(backbone, "albert_config"):
        raise TypeError(f"expected an albert_tf model, got {type(model).__name__}")
    return backbone


def resolve(owner, path):
    """Our variable at `path` (`layer/attr/...`) from a model."""
    first, *attributes = path.split("/")
    target = owner.get_layer(first)
    for attribute in attributes:
        target = getattr(target, attribute)
    return target


def _transposes(layout: str) -> bool:
    return layout in (TRANSPOSED, T_HEADS_LAST, T_HEADS_FIRST)


def to_ours(value: np.ndarray, layout: str, shape) -> np.ndarray:
    """The format's array as our weight of `shape` (a row-major reshape undoes the head merge)."""
    if _transposes(layout):
        value = value.T
    return np.ascontiguousarray(value.reshape(shape))


def to_theirs(value: np.ndarray, layout: str) -> np.ndarray:
    """Our weight as the format stores it."""
    if layout in (HEADS_LAST, T_HEADS_LAST):
        value = value.reshape(value.shape[:-2] + (-1,))
    elif layout in (HEADS_FIRST, T_HEADS_FIRST):
        value = value.reshape((-1,) + value.shape[2:])
    if _transposes(layout):
        value = value.T
    return np.ascontiguousarray(value)


def their_shape(shape, layout: str):
    """The format's shape of our weight of `shape`."""
    return to_theirs(np.zeros(shape, dtype=np.int8), layout).shape


def identity_value(layout: str, hidden_size: int) -> np.ndarray:
    """The identity kernel or zero bias a peer needs for the E = H projection."""
    if layout == EYE:
        return np.eye(hidden_size, dtype=np.float32)
    return np.zeros((hidden_size,), np.float32)


# ---- load / export ------------------------------------------------------------------------
def load_table(
    model,
    table: List[TensorMapping],
    values: Dict[str, np.ndarray],
    source: str,
    ignored: Iterable[str] = (),
    noun: str = "tensor",
) -> LoadReport:
    """Assigns `values` to `model` through `table`, or raises one error listing every problem.

    Every tensor must be mapped (or match an `ignored` regex), every weight of
    `model` set, every shape right and every value float, finite and plausible;
    otherwise nothing is assigned. Loaded into a bare backbone, the table's
    model-scope tensors (the pretraining heads) are skipped and reported.
    `noun` is what the format calls its tensors in messages.
    """
    backbone = backbone_of(model)
    heads_have_no_place = model is backbone
    ignored = [re.compile(p) for p in ignored]
    by_name = {m.name: m for m in table}
    problems, skipped, skipped_heads = [], [], []
    for name in sorted(values):
        if name in by_name:
            continue
        if any(p.search(name) for p in ignored):
            skipped.append(name)
        else:
            problems.append(f"{noun} {name} {list(values[name].shape)} matches no weight of the model")
    assignments, filled = [], []
    hidden = backbone.albert_config.hidden_size
    for mapping in table:
        if mapping.weight == IDENTITY:
            value = values.get(mapping.name)
            expected = identity_value(mapping.layout, hidden)
            if value is None:
                problems.append(f"tensor {mapping.name} is missing")
            elif value.shape != expected.shape or not np.array_equal(value, expected):
                problems.append(
                    f"tensor {mapping.name} is not the identity/zero that "
                    "embedding_size == hidden_size needs (we have no projection then)"
                )
            continue
        if mapping.scope == MODEL and heads_have_no_place:
            if mapping.name in values:
                skipped_heads.append(mapping.name)
            continue
        variable = resolve(backbone if mapping.scope == BACKBONE else model, mapping.weight)
        expected = their_shape(tuple(variable.shape), mapping.layout)
        if mapping.name not in values:
            if mapping.optional:
                filled.append(mapping.name)
                assignments.append((variable, np.zeros(variable.shape, np.float32)))
            else:
                problems.append(
                    f"model weight {variable.path} {list(variable.shape)} has no {noun} {mapping.name} {list(expected)}"
                )
            continue
        value = values[mapping.name]
        if tuple(value.shape) != tuple(expected):
            problems.append(f"{noun} {mapping.name} has shape {list(value.shape)}, the model expects {list(expected)}")
            continue
        check_weight_values(source, mapping.name, value)
        assignments.append((variable, to_ours(value, mapping.layout, tuple(variable.shape))))
    if not problems:
        covered = {id(v) for v, _ in assignments}
        problems = [
            f"model weight {w.path} {list(w.shape)} is not in the name table"
            for w in model.weights
            if id(w) not in covered
        ]
    if problems:
        raise CheckpointError(
            f"{source}: does not fit the model ({len(problems)} problem(s)):\n  " + "\n  ".join(problems)
        )
    for variable, value in assignments:
        variable.assign(value.astype(variable.dtype))
    return LoadReport(len(assignments), filled, skipped, skipped_heads)


def fill_missing_groups(
    table: List[TensorMapping], values: Dict[str, np.ndarray], group: "re.Pattern", group_0: str
) -> Dict[str, np.ndarray]:
    """`values` where every tensor of `table` it lacks is its layer group 0's (`--init_from_group0`).

    `group` matches a format's group part of a name (`/group_3/`), `group_0` is group 0's; groups
    `values` holds load as themselves.
    """
    values = dict(values)
    for mapping in table:
        name_0 = group.sub(group_0, mapping.name)
        if mapping.name not in values and name_0 != mapping.name and name_0 in values:
            values[mapping.name] = values[name_0]
    return values


def export_table(model, table: List[TensorMapping]) -> Dict[str, np.ndarray]:
    """{tensor name: float32 array} of `model` through `table` (model-scope rows only if `model` has heads)."""
    backbone = backbone_of(model)
    out = {}
    for mapping in table:
        if mapping.weight == IDENTITY:
            out[mapping.name] = identity_value(mapping.layout, backbone.albert_config.hidden_size)
            continue
        if mapping.scope == MODEL and model is backbone:
            continue
        variable = resolve(backbone if mapping.scope == BACKBONE else model, mapping.weight)
        out[mapping.name] = to_theirs(np.asarray(variable.numpy(), np.float32), mapping.layout)
    return out
