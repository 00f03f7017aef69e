"""Declarative name tables between a peer's tensors and our weights, and applying them.

Each `TensorMapping` names one peer tensor, the weight of ours it becomes
(`scope`/`weight`, resolved as in `albert_tf.checkpoints`) and a layout that
says how the array changes; import and export both read the same table.

Layouts (ours ↔ peer):
- `same`: identical arrays;
- `transposed`: Dense kernel `[in, out]` ↔ torch Linear weight `[out, in]`;
- `t_heads_out`: query/key/value kernel `[H, N, D]` ↔ Linear weight `[N·D, H]`;
- `t_heads_in`: attention output kernel `[N, D, H]` ↔ Linear weight `[H, N·D]`;
- `flat_heads`: query/key/value bias `[N, D]` ↔ `[N·D]`.

Example:

>>> to_peer(np.arange(6.0).reshape(1, 2, 3), T_HEADS_OUT).shape
(6, 1)
>>> to_ours(np.arange(6.0).reshape(6, 1), T_HEADS_OUT, (1, 2, 3)).shape
(1, 2, 3)
"""

import dataclasses
import re
from typing import Dict, Iterable, List

import numpy as np

from albert_tf.checkpoints import CheckpointError
from albert_tf.config import AlbertConfig, ConfigError
from albert_tf.models.backbone import block_name, block_slot

SAME, TRANSPOSED, T_HEADS_OUT, T_HEADS_IN, FLAT_HEADS = (
    "same",
    "transposed",
    "t_heads_out",
    "t_heads_in",
    "flat_heads",
)
BACKBONE, MODEL = "backbone", "model"  # what a weight path is resolved from
IDENTITY = "identity"  # peer-only tensor: the E→H projection peers keep when E = H
EYE, ZEROS = "eye", "zeros"  # its layouts: identity kernel [H, H] / zero bias [H]


@dataclasses.dataclass(frozen=True)
class TensorMapping:
    """One peer tensor and our weight.

    `weight`: a layer name then public attributes, e.g. `pooler/kernel`;
    `optional`: the peer may leave it out (its architecture has no such
    tensor); we then set it to zeros and say so. `weight=IDENTITY` marks a
    peer tensor that has no weight of ours and must be the identity
    (`layout=EYE`) or zeros (`layout=ZEROS`): the E→H projection peers keep
    when E = H.
    """

    peer: str
    weight: str
    scope: str = BACKBONE
    layout: str = SAME
    optional: bool = False


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
def resolve(owner, path):
    """Our variable at `path` (`layer/attr/...`) from a model."""
    first, *attributes = path.split("/")
    target = owner.get_layer(first)
    for attribute in attributes:
        target = getattr(target, attribute)
    return target


def to_ours(value: np.ndarray, layout: str, shape) -> np.ndarray:
    """The peer array as our weight of `shape`."""
    if layout in (TRANSPOSED, T_HEADS_OUT, T_HEADS_IN):
        value = value.T
    return np.ascontiguousarray(value.reshape(shape))


def to_peer(value: np.ndarray, layout: str) -> np.ndarray:
    """Our weight as the peer stores it."""
    if layout == TRANSPOSED:
        value = value.T
    elif layout == T_HEADS_OUT:  # [H, N, D] -> [N·D, H]
        value = value.reshape(value.shape[0], -1).T
    elif layout == T_HEADS_IN:  # [N, D, H] -> [H, N·D]
        value = value.reshape(-1, value.shape[-1]).T
    elif layout == FLAT_HEADS:
        value = value.reshape(-1)
    return np.ascontiguousarray(value)


def peer_shape(shape, layout: str):
    """The peer's shape of our weight of `shape`."""
    return to_peer(np.zeros(shape, dtype=np.int8), layout).shape


def identity_value(layout: str, hidden_size: int) -> np.ndarray:
    """The identity kernel or zero bias a peer needs for the E = H projection."""
    if layout == EYE:
        return np.eye(hidden_size, dtype=np.float32)
    return np.zeros((hidden_size,), np.float32)


# ---- import / export ------------------------------------------------------------------------
@dataclasses.dataclass
class ImportReport:
    loaded: int
    zero_filled: List[str]  # optional peer tensors that were absent
    ignored: List[str]


def import_tensors(
    model, backbone, table: List[TensorMapping], values: Dict[str, np.ndarray], source: str, ignored: Iterable[str] = ()
) -> ImportReport:
    """Assigns `values` to `model` through `table`, or raises one error listing every problem.

    Every peer tensor must be mapped (or match an `ignored` regex), every
    weight of `model` set, every shape right; otherwise nothing is assigned.
    """
    ignored = [re.compile(p) for p in ignored]
    hidden = backbone.albert_config.hidden_size
    by_peer = {m.peer: m for m in table}
    problems, skipped = [], []
    for name in sorted(values):
        if name in by_peer:
            continue
        if any(p.search(name) for p in ignored):
            skipped.append(name)
        else:
            problems.append(f"tensor {name} {list(values[name].shape)} matches no weight of the model")
    assignments, filled = [], []
    for mapping in table:
        if mapping.weight == IDENTITY:
            value = values.get(mapping.peer)
            if value is None:
                problems.append(f"tensor {mapping.peer} is missing")
            elif value.shape != identity_value(mapping.layout, hidden).shape or not np.array_equal(
                value, identity_value(mapping.layout, hidden)
            ):
                problems.append(
                    f"tensor {mapping.peer} is not the identity/zero that "
                    "embedding_size == hidden_size needs (we have no projection then)"
                )
            continue
        variable = resolve(backbone if mapping.scope == BACKBONE else model, mapping.weight)
        expected = peer_shape(tuple(variable.shape), mapping.layout)
        if mapping.peer not in values:
            if mapping.optional:
                filled.append(mapping.peer)
                assignments.append((variable, np.zeros(variable.shape, np.float32)))
            else:
                problems.append(
                    f"model weight {variable.path} {list(variable.shape)} has no tensor {mapping.peer} {list(expected)}"
                )
            continue
        value = values[mapping.peer]
        if tuple(value.shape) != tuple(expected):
            problems.append(f"tensor {mapping.peer} has shape {list(value.shape)}, the model expects {list(expected)}")
            continue
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
    return ImportReport(len(assignments), filled, skipped)


def export_tensors(model, backbone, table: List[TensorMapping]) -> Dict[str, np.ndarray]:
    """{peer name: array} of `model` through `table` (optional tensors included)."""
    out = {}
    for mapping in table:
        if mapping.weight == IDENTITY:
            out[mapping.peer] = identity_value(mapping.layout, backbone.albert_config.hidden_size)
            continue
        variable = resolve(backbone if mapping.scope == BACKBONE else model, mapping.weight)
        out[mapping.peer] = to_peer(np.asarray(variable.numpy(), np.float32), mapping.layout)
    return out
