"""Google's TF1 ALBERT checkpoints <-> albert_tf models, through one name table.

`name_table(config)` lists every variable of the original layout with the
weight of ours it maps to and how its layout changes. Import and export both
read that table; nothing is renamed by string rewriting.

Layouts (spec §3): Q/K/V kernels are stored `[H, N·D]` head-major and become
EinsumDense `[H, N, D]` by a row-major reshape; the attention output kernel
`[N·D, H]` becomes `[N, D, H]`; the SOP `output_weights` `[2, H]` is the
transpose of a Dense kernel. Everything else is stored as Keras stores it.

Example (a round trip through the original layout):

>>> backbone = AlbertBackbone.from_albert_config("configs/albert_tiny.json")
>>> model = AlbertPretrainer(backbone)
>>> prefix = save_original_checkpoint(model, tempfile.mkdtemp() + "/model.ckpt")
>>> load_original_checkpoint(model, prefix).loaded > 0
True
"""

import dataclasses
import os
import re
from typing import List

import h5py
import numpy as np

from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError
from albert_tf.models.backbone import (
    AlbertBackbone,
    block_name,
    block_slot,
    group_index,
)
from albert_tf.models.pretrainer import AlbertPretrainer

# Layout transforms between the original variable and ours.
SAME = "same"
HEADS_LAST = "heads_last"  # [..., N·D] <-> [..., N, D]  (Q/K/V kernels, biases)
HEADS_FIRST = "heads_first"  # [N·D, H] <-> [N, D, H]     (attention output)
TRANSPOSED = "transposed"  # [C, H] <-> [H, C]            (SOP output_weights)

# Variables a model checkpoint may hold that are not model weights.
IGNORED_PATTERNS = (
    re.compile(r"(^|/)global_step$"),
    re.compile(r"/(adam|lamb)_[mv]$"),
)
HUB_PREFIX = "module/"
BACKBONE, HEADS = "backbone", "heads"


class CheckpointError(AlbertError, ValueError):
    """A checkpoint does not fit the model; the message lists every problem."""


# No trained ALBERT/BERT weight comes near this: every weight starts at
# N(0, 0.02) (LayerNorm gains at 1), and the largest values reported for trained
# BERT-family models (LayerNorm "outlier" gains and biases) are in the tens, not
# thousands. 1e4 leaves over two orders of magnitude of headroom, still catches
# corrupted floats (a flipped high exponent bit turns 0.02 into ~1e36), and keeps
# every weight inside float16's range (65504) for mixed-precision serving.
MAX_ABS_WEIGHT = 1e4


def check_weight_values(source, name, value):
    """Raises `CheckpointError` naming `source` and `name` if `value` is non-finite or absurdly large."""
    value = np.asarray(value)
    if not np.issubdtype(value.dtype, np.floating) or value.size == 0:
        return
    finite = np.isfinite(value)
    if not finite.all():
        bad = value[~finite]
        raise CheckpointError(
            f"{source}: variable {name} holds {bad.size} non-finite value(s) (e.g. {bad.flat[0]}) "
            f"out of {value.size}; the file is corrupt or came from a diverged run"
        )
    largest = float(np.abs(value).max())
    if largest > MAX_ABS_WEIGHT:
        raise CheckpointError(
            f"{source}: variable {name} holds |w| = {largest:.3g}, above {MAX_ABS_WEIGHT:g} "
            "(trained ALBERT weights are of order 1; the file is corrupt)"
        )


@dataclasses.dataclass(frozen=True)
class WeightMapping:
    """One original variable and the weight of ours it maps to.

    `weight` is a path resolved from the owner model (`scope`: the backbone or
    the pretrainer): the first part is a layer name (`get_layer`), the rest
    public attributes, e.g. `embeddings/word_embeddings/embeddings`.
    """

    original: str
    weight: str
    scope: str = BACKBONE
    layout: str = SAME


def _block_mappings(slot_original, attention, ffn):
    table = []
    for part in ("query", "key", "value"):
        table += [
            WeightMapping(
                f"{slot_original}/attention_1/self/{part}/kernel",
                f"{attention}/{part}/kernel",
                layout=HEADS_LAST,
            ),
            WeightMapping(
                f"{slot_original}/attention_1/self/{part}/bias",
                f"{attention}/{part}/bias",
                layout=HEADS_LAST,
            ),
        ]
    table += [
        WeightMapping(
            f"{slot_original}/attention_1/output/dense/kernel",
            f"{attention}/output_dense/kernel",
            layout=HEADS_FIRST,
        ),
        WeightMapping(
            f"{slot_original}/attention_1/output/dense/bias",
            f"{attention}/output_dense/bias",
        ),
        WeightMapping(f"{slot_original}/LayerNorm/gamma", f"{attention}/layer_norm/gamma"),
        WeightMapping(f"{slot_original}/LayerNorm/beta", f"{attention}/layer_norm/beta"),
        WeightMapping(
            f"{slot_original}/ffn_1/intermediate/dense/kernel",
            f"{ffn}/intermediate/kernel",
        ),
        WeightMapping(f"{slot_original}/ffn_1/intermediate/dense/bias", f"{ffn}/intermediate/bias"),
        WeightMapping(
            f"{slot_original}/ffn_1/intermediate/output/dense/kernel",
            f"{ffn}/output_dense/kernel",
        ),
        WeightMapping(
            f"{slot_original}/ffn_1/intermediate/output/dense/bias",
            f"{ffn}/output_dense/bias",
        ),
        WeightMapping(f"{slot_original}/LayerNorm_1/gamma", f"{ffn}/layer_norm/gamma"),
        WeightMapping(f"{slot_original}/LayerNorm_1/beta", f"{ffn}/layer_norm/beta"),
    ]
    return table


def original_groups(config: AlbertConfig):
    """{group index: first layer using it} of the original layout for `config`.

    The original creates variables only for groups some layer uses (with its
    float routing, L = G = 22 never uses group 15). Its layout can express
    only configs whose attention and FFN follow the same routing.
    """
    num_layers = config.num_hidden_layers
    num_groups = config.num_hidden_groups
    if config.sharing != "all":
        if any(group_index(l, num_layers, num_groups) != l for l in range(num_layers)):
            raise CheckpointError(
                f"sharing={config.sharing!r} with num_hidden_groups={num_groups}"
                f" and num_hidden_layers={num_layers} has no equivalent in "
                "Google's checkpoint layout (its groups share attention and "
                "FFN together; use num_hidden_groups = num_hidden_layers)"
            )
    groups = {}
    for layer in range(num_layers):
        groups.setdefault(group_index(layer, num_layers, num_groups), layer)
    return groups


def name_table(config: AlbertConfig) -> List[WeightMapping]:
    """Every variable of the original layout for `config`, in Google's order."""
    table = [
        WeightMapping("bert/embeddings/word_embeddings", "embeddings/word_embeddings/embeddings"),
        WeightMapping(
            "bert/embeddings/token_type_embeddings",
            "embeddings/token_type_embeddings/embeddings",
        ),
        WeightMapping("bert/embeddings/position_embeddings", "embeddings/position_embeddings"),
        WeightMapping("bert/embeddings/LayerNorm/gamma", "embeddings/layer_norm/gamma"),
        WeightMapping("bert/embeddings/LayerNorm/beta", "embeddings/layer_norm/beta"),
    ]
    if config.embedding_size != config.hidden_size:
        table += [
            WeightMapping(
                "bert/encoder/embedding_hidden_mapping_in/kernel",
                "embedding_projection/kernel",
            ),
            WeightMapping(
                "bert/encoder/embedding_hidden_mapping_in/bias",
                "embedding_projection/bias",
            ),
        ]
    for group, layer in original_groups(config).items():
        # The first layer using the group names our block (group_g or layer_l).
        slots = {
            component: block_slot(
                component,
                layer,
                config.num_hidden_layers,
                config.num_hidden_groups,
                config.sharing,
            )
            for component in ("attention", "ffn")
        }
        for inner in range(config.inner_group_num):
            table += _block_mappings(
                f"bert/encoder/transformer/group_{group}/inner_group_{inner}",
                block_name(slots["attention"], inner, "attention"),
                block_name(slots["ffn"], inner, "ffn"),
            )
    table += [
        WeightMapping("bert/pooler/dense/kernel", "pooler/kernel"),
        WeightMapping("bert/pooler/dense/bias", "pooler/bias"),
        WeightMapping("cls/predictions/transform/dense/kernel", "mlm_head/transform/kernel", HEADS),
        WeightMapping("cls/predictions/transform/dense/bias", "mlm_head/transform/bias", HEADS),
        WeightMapping("cls/predictions/transform/LayerNorm/gamma", "mlm_head/layer_norm/gamma", HEADS),
        WeightMapping("cls/predictions/transform/LayerNorm/beta", "mlm_head/layer_norm/beta", HEADS),
        WeightMapping("cls/predictions/output_bias", "mlm_head/output_bias", HEADS),
        WeightMapping("cls/seq_relationship/output_weights", "sop_head/kernel", HEADS, TRANSPOSED),
        WeightMapping("cls/seq_relationship/output_bias", "sop_head/bias", HEADS),
    ]
    return table


# ---- resolving our weights ---------------------------------------------------
def _split_model(model):
    """(backbone, pretrainer or None) for a backbone or a pretrainer."""
    if isinstance(model, AlbertPretrainer):
        return model.backbone, model
    if isinstance(model, AlbertBackbone):
        return model, None
    raise TypeError(f"expected an AlbertBackbone or AlbertPretrainer, got {type(model).__name__}")


def _resolve(owner, path):
    first, *attributes = path.split("/")
    target = owner.get_layer(first)
    for attribute in attributes:
        target = getattr(target, attribute)
    return target


def _to_ours(value, layout, shape):
    if layout == TRANSPOSED:
        value = value.T
    elif layout in (HEADS_LAST, HEADS_FIRST):
        value = value.reshape(shape)
    return value


def _to_original(value, layout):
    if layout == TRANSPOSED:
        return value.T
    if layout == HEADS_LAST:
        return value.reshape(value.shape[:-2] + (-1,))
    if layout == HEADS_FIRST:
        return value.reshape((-1, value.shape[-1]))
    return value


def _original_shape(mapping, shape):
    if mapping.layout == TRANSPOSED:
        return tuple(reversed(shape))
    if mapping.layout == HEADS_LAST:
        return tuple(shape[:-2]) + (shape[-2] * shape[-1],)
    if mapping.layout == HEADS_FIRST:
        return (shape[0] * shape[1], shape[2])
    return tuple(shape)


# ---- import --------------------------------------------------------------------
@dataclasses.dataclass
class LoadReport:
    loaded: int
    skipped_heads: List[str]
    ignored: List[str]


TF2_CHECKPOINT_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"  # object-based (TF2) checkpoints have it
TRAINING_CHECKPOINT_ADVICE = (
    "a run_pretraining training checkpoint (weights + optimizer state), not a model; "
    "use the run's final/ or best/ directory instead"
)


def _checkpoint_prefix(path):
    import tensorflow as tf  # TF1 checkpoints only: the model itself runs on any Keras backend

    if os.path.isdir(path):
        return tf.train.latest_checkpoint(path)
    if tf.io.gfile.exists(path + ".index"):
        return path
    return None


def read_original_checkpoint(path):
    """{name: np.ndarray} of a TF1 checkpoint, the TF-Hub `module/` prefix stripped."""
    import tensorflow as tf  # TF1 checkpoints only: the model itself runs on any Keras backend

    prefix = _checkpoint_prefix(path)
    if prefix is None:
        raise CheckpointError(
            f"{path}: no TF1 checkpoint there (expected {path}.index, or a directory with a 'checkpoint' file)"
        )
    try:
        reader = tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as e:
        raise CheckpointError(f"{prefix}: not a readable checkpoint ({e})") from None
    names = reader.get_variable_to_shape_map()
    if TF2_CHECKPOINT_KEY in names:
        # Its optimizer and iterator state read as "corrupt" variables otherwise.
        raise CheckpointError(f"{prefix}: {TRAINING_CHECKPOINT_ADVICE}")
    values = {}
    for name in names:
        key = name[len(HUB_PREFIX) :] if name.startswith(HUB_PREFIX) else name
        try:
            values[key] = reader.get_tensor(name)
        except (tf.errors.OpError, IndexError) as e:  # a truncated .data shard: DataLossError, or
            # IndexError "Read less bytes than requested" from the reader
            detail = (getattr(e, "message", None) or str(e)).splitlines()[0]
            raise CheckpointError(
                f"{prefix}: variable {name} cannot be read; the checkpoint's .data file is "
                f"truncated or corrupt ({type(e).__name__}: {detail})"
            ) from None
    return prefix, values


def load_original_checkpoint(model, path, values=None):
    """Loads Google's TF1 checkpoint into an AlbertBackbone or AlbertPretrainer.

    Every checkpoint variable must be mapped or ignorable (optimizer slots,
    `global_step`); every weight of the model must be set; shapes must match.
    Otherwise nothing is assigned and a `CheckpointError` lists all problems.
    Loading into a backbone skips the `cls/` head variables (reported).
    `values` ({TF1 name: array}), when given, is loaded instead of reading `path`
    (which then only names the source in errors).
    """
    backbone, pretrainer = _split_model(model)
    prefix, values = (path, values) if values is not None else read_original_checkpoint(path)
    table = name_table(backbone.albert_config)
    by_name = {m.original: m for m in table}

    problems, assignments, skipped_heads, ignored = [], [], [], []
    for name in sorted(values):
        if name in by_name:
            continue
        if any(p.search(name) for p in IGNORED_PATTERNS):
            ignored.append(name)
        else:
            problems.append(f"checkpoint variable {name} {list(values[name].shape)} matches no weight of the model")
    for mapping in table:
        owner = backbone if mapping.scope == BACKBONE else pretrainer
        if owner is None:
            if mapping.original in values:
                skipped_heads.append(mapping.original)
            continue
        variable = _resolve(owner, mapping.weight)
        expected = _original_shape(mapping, tuple(variable.shape))
        if mapping.original not in values:
            problems.append(
                f"model weight {variable.path} {list(variable.shape)} has no "
                f"checkpoint variable {mapping.original} {list(expected)}"
            )
            continue
        value = values[mapping.original]
        if tuple(value.shape) != expected:
            problems.append(
                f"checkpoint variable {mapping.original} has shape "
                f"{list(value.shape)}, the model expects {list(expected)}"
            )
            continue
        check_weight_values(prefix, mapping.original, value)
        assignments.append((variable, _to_ours(value, mapping.layout, variable.shape)))
    if not problems:  # every weight the table knows is set; any left over?
        covered = {id(variable) for variable, _ in assignments}
        problems = [
            f"model weight {w.path} {list(w.shape)} is not in the name table"
            for w in model.weights
            if id(w) not in covered
        ]
    if problems:
        raise CheckpointError(
            f"{prefix}: does not fit the model ({len(problems)} problem(s)):\n  " + "\n  ".join(problems)
        )
    for variable, value in assignments:
        variable.assign(value.astype(variable.dtype))
    return LoadReport(len(assignments), skipped_heads, ignored)


# ---- export --------------------------------------------------------------------
def original_variables(model):
    """{original name: np.ndarray} of a backbone's or pretrainer's weights."""
    backbone, pretrainer = _split_model(model)
    out = {}
    for mapping in name_table(backbone.albert_config):
        owner = backbone if mapping.scope == BACKBONE else pretrainer
        if owner is None:
            continue
        variable = _resolve(owner, mapping.weight)
        out[mapping.original] = _to_original(np.asarray(variable.numpy()), mapping.layout)
    return out


def save_original_checkpoint(model, prefix):
    """Writes the model in Google's TF1 layout (readable by the original code)."""
    return write_original_checkpoint(original_variables(model), prefix)


def write_original_checkpoint(values, prefix):
    """Writes {TF1 name: array} as a name-based (V2 bundle) checkpoint."""
    import tensorflow as tf  # TF1 checkpoints only: the model itself runs on any Keras backend

    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    names = sorted(values)
    tf.raw_ops.SaveV2(
        prefix=prefix,
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(values[n]) for n in names],
    )
    return prefix


# ---- our own format: a directory with albert_config.json + *.weights.h5 --------
CONFIG_FILE = "albert_config.json"
BACKBONE_WEIGHTS = "backbone.weights.h5"
PRETRAINER_WEIGHTS = "pretrainer.weights.h5"


def save_model_dir(model, directory):
    """Writes `albert_config.json` and the model's `.weights.h5` into `directory`."""
    backbone, pretrainer = _split_model(model)
    os.makedirs(directory, exist_ok=True)
    backbone.albert_config.to_json_file(os.path.join(directory, CONFIG_FILE))
    name = PRETRAINER_WEIGHTS if pretrainer is not None else BACKBONE_WEIGHTS
    model.save_weights(os.path.join(directory, name))
    return directory


def find_keras_weights(path):
    """(file, holds_heads) for a `.weights.h5` file or a directory holding one."""
    if os.path.isfile(path) and path.endswith(".weights.h5"):
        return path, os.path.basename(path) == PRETRAINER_WEIGHTS
    for name, heads in ((PRETRAINER_WEIGHTS, True), (BACKBONE_WEIGHTS, False)):
        candidate = os.path.join(path, name)
        if os.path.isfile(candidate):
            return candidate, heads
    return None, False


def load_checkpoint(model, path):
    """Loads any supported checkpoint into a backbone or pretrainer.

    `path` may be Google's TF1 checkpoint (prefix or directory), or ours: a
    directory from `save_model_dir`/`convert_checkpoint`, or its
    `.weights.h5` file. A pretrainer checkpoint loads into a bare backbone
    (the heads are dropped); a backbone checkpoint cannot fill a pretrainer.
    """
    backbone, pretrainer = _split_model(model)
    weights_file, has_heads = find_keras_weights(path)
    if weights_file is None:
        if not os.path.exists(path) and not os.path.exists(path + ".index"):
            raise CheckpointError(f"{path}: checkpoint does not exist")
        return load_original_checkpoint(model, path)
    if pretrainer is not None and not has_heads:
        raise CheckpointError(f"{weights_file}: holds a backbone only; the pretraining heads cannot be filled from it")
    target = model
    if has_heads and pretrainer is None:
        target = AlbertPretrainer(backbone)
    _check_h5_readable(weights_file)
    try:
        target.load_weights(weights_file)
    except ValueError as e:
        raise CheckpointError(f"{weights_file}: does not fit the model: {e}") from None
    # After loading, so names are the model's; a failed check leaves `model` unusable
    # (every caller discards it on the error).
    for weight in target.weights:
        check_weight_values(weights_file, weight.path, weight.numpy())
    return LoadReport(len(target.weights), [], [])


# ---- --init_from_group0: grow G from a checkpoint's group 0 --------------------
_GROUP = re.compile(r"/group_\d+/")


def checkpoint_as_original(path):
    """(source, {TF1 name: array}) of any checkpoint `load_checkpoint` reads.

    Ours (a model directory or its `.weights.h5`) is read through the
    `albert_config.json` beside it, so its groups are its own, not the model's.
    """
    weights_file, has_heads = find_keras_weights(path)
    if weights_file is None:
        if not os.path.exists(path) and not os.path.exists(path + ".index"):
            raise CheckpointError(f"{path}: checkpoint does not exist")
        return read_original_checkpoint(path)
    config_file = os.path.join(os.path.dirname(weights_file), CONFIG_FILE)
    if not os.path.isfile(config_file):
        raise CheckpointError(f"{weights_file}: no {CONFIG_FILE} beside it (needed to read its groups)")
    source = AlbertBackbone.from_albert_config(AlbertConfig.from_json_file(config_file))
    if has_heads:
        source = AlbertPretrainer(source)
    try:
        source.load_weights(weights_file)
    except ValueError as e:
        raise CheckpointError(f"{weights_file}: does not fit {config_file}: {e}") from None
    return weights_file, original_variables(source)


def load_group0_into_all_groups(model, path):
    """`load_checkpoint`, except that a group the checkpoint lacks starts as its group 0.

    The original's `run_pretraining.py --init_from_group0` (the paper's way to
    grow G from a model with shared layers): every variable
    `.../group_k/...` of the model that the checkpoint does not hold is
    initialised from `.../group_0/...` (`get_assignment_map_from_checkpoint`);
    groups the checkpoint holds load as themselves. Reads Google's TF1
    checkpoints and ours. (`net_structure_type` > 0, which also maps
    `attention_k`/`ffn_k`, is not in the released code's configs; not supported.)
    """
    backbone, pretrainer = _split_model(model)
    source, values = checkpoint_as_original(path)
    if pretrainer is not None and not any(name.startswith("cls/") for name in values):
        raise CheckpointError(f"{source}: holds a backbone only; the pretraining heads cannot be filled from it")
    values = dict(values)
    for mapping in name_table(backbone.albert_config):
        group_0 = _GROUP.sub("/group_0/", mapping.original)
        if mapping.original not in values and group_0 != mapping.original and group_0 in values:
            values[mapping.original] = values[group_0]
    return load_original_checkpoint(model, source, values)


def _check_h5_readable(weights_file):
    """One clear error for a `.weights.h5` that is not a complete HDF5 file (truncated, overwritten)."""
    try:
        with h5py.File(weights_file, "r"):  # HDF5 checks the stored end of file on open
            pass
    except OSError as e:  # h5py's error for a truncated or non-HDF5 file
        raise CheckpointError(
            f"{weights_file}: not a readable .weights.h5 file; it is truncated or corrupt ({e})"
        ) from None
