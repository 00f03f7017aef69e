"""Google's TF1 ALBERT checkpoints <-> albert_tf models, through one name table.

`name_table(config)` lists every variable of the original layout with the
weight of ours it maps to and how its layout changes. Import and export both
read that table; nothing is renamed by string rewriting.

Layouts (`albert_tf.formats.table`): Q/K/V kernels are stored `[H, N·D]` head-major and become
EinsumDense `[H, N, D]` by a row-major reshape; the attention output kernel
`[N·D, H]` becomes `[N, D, H]`; the SOP `output_weights` `[2, H]` is the
transpose of a Dense kernel. Everything else is stored as Keras stores it.

Example (a round trip through the original layout):

>>> import tempfile
>>> from albert_tf import AlbertBackbone, AlbertPretrainer
>>> model = AlbertPretrainer(AlbertBackbone.from_albert_config("configs/albert_tiny.json"))
>>> prefix = save_original_checkpoint(model, tempfile.mkdtemp() + "/model.ckpt")
>>> load_original_checkpoint(model, prefix).loaded > 0
True
"""

import os
import re
from typing import Dict, List

import numpy as np

from albert_tf.config import AlbertConfig
from albert_tf.formats.base import Format, tokenizer_beside
from albert_tf.formats.loaded import LoadedModel, ModelFileError
from albert_tf.formats.table import (
    HEADS_FIRST,
    HEADS_LAST,
    MODEL,
    TRANSPOSED,
    CheckpointError,
    LoadReport,
    TensorMapping,
    backbone_of,
    export_table,
    fill_missing_groups,
    load_table,
)
from albert_tf.models.backbone import AlbertBackbone, block_name, block_slot, group_index
from albert_tf.models.pretrainer import AlbertPretrainer

NAME = "original"


class TrainingStateError(ModelFileError, CheckpointError):
    """A run's own training checkpoint (weights + optimizer state) where a model was expected."""


CONFIG_FILE = "albert_config.json"  # beside Google's released checkpoints, and ours
PREFIX = "model.ckpt"  # what we write (with a `checkpoint` index file)
# Variables a model checkpoint may hold that are not model weights.
IGNORED = (r"(^|/)global_step$", r"/(adam|lamb)_[mv]$")
HUB_PREFIX = "module/"
MLM_HEAD_VARIABLE = "cls/predictions/output_bias"


def _block_mappings(slot_original, attention, ffn):
    table = []
    for part in ("query", "key", "value"):
        table += [
            TensorMapping(
                f"{slot_original}/attention_1/self/{part}/kernel",
                f"{attention}/{part}/kernel",
                layout=HEADS_LAST,
            ),
            TensorMapping(
                f"{slot_original}/attention_1/self/{part}/bias",
                f"{attention}/{part}/bias",
                layout=HEADS_LAST,
            ),
        ]
    table += [
        TensorMapping(
            f"{slot_original}/attention_1/output/dense/kernel",
            f"{attention}/output_dense/kernel",
            layout=HEADS_FIRST,
        ),
        TensorMapping(
            f"{slot_original}/attention_1/output/dense/bias",
            f"{attention}/output_dense/bias",
        ),
        TensorMapping(f"{slot_original}/LayerNorm/gamma", f"{attention}/layer_norm/gamma"),
        TensorMapping(f"{slot_original}/LayerNorm/beta", f"{attention}/layer_norm/beta"),
        TensorMapping(
            f"{slot_original}/ffn_1/intermediate/dense/kernel",
            f"{ffn}/intermediate/kernel",
        ),
        TensorMapping(f"{slot_original}/ffn_1/intermediate/dense/bias", f"{ffn}/intermediate/bias"),
        TensorMapping(
            f"{slot_original}/ffn_1/intermediate/output/dense/kernel",
            f"{ffn}/output_dense/kernel",
        ),
        TensorMapping(
            f"{slot_original}/ffn_1/intermediate/output/dense/bias",
            f"{ffn}/output_dense/bias",
        ),
        TensorMapping(f"{slot_original}/LayerNorm_1/gamma", f"{ffn}/layer_norm/gamma"),
        TensorMapping(f"{slot_original}/LayerNorm_1/beta", f"{ffn}/layer_norm/beta"),
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


def name_table(config: AlbertConfig) -> List[TensorMapping]:
    """Every variable of the original layout for `config`, in Google's order."""
    table = [
        TensorMapping("bert/embeddings/word_embeddings", "embeddings/word_embeddings/embeddings"),
        TensorMapping(
            "bert/embeddings/token_type_embeddings",
            "embeddings/token_type_embeddings/embeddings",
        ),
        TensorMapping("bert/embeddings/position_embeddings", "embeddings/position_embeddings"),
        TensorMapping("bert/embeddings/LayerNorm/gamma", "embeddings/layer_norm/gamma"),
        TensorMapping("bert/embeddings/LayerNorm/beta", "embeddings/layer_norm/beta"),
    ]
    if config.embedding_size != config.hidden_size:
        table += [
            TensorMapping(
                "bert/encoder/embedding_hidden_mapping_in/kernel",
                "embedding_projection/kernel",
            ),
            TensorMapping(
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
        TensorMapping("bert/pooler/dense/kernel", "pooler/kernel"),
        TensorMapping("bert/pooler/dense/bias", "pooler/bias"),
        TensorMapping("cls/predictions/transform/dense/kernel", "mlm_head/transform/kernel", MODEL),
        TensorMapping("cls/predictions/transform/dense/bias", "mlm_head/transform/bias", MODEL),
        TensorMapping("cls/predictions/transform/LayerNorm/gamma", "mlm_head/layer_norm/gamma", MODEL),
        TensorMapping("cls/predictions/transform/LayerNorm/beta", "mlm_head/layer_norm/beta", MODEL),
        TensorMapping("cls/predictions/output_bias", "mlm_head/output_bias", MODEL),
        TensorMapping("cls/seq_relationship/output_weights", "sop_head/kernel", MODEL, TRANSPOSED),
        TensorMapping("cls/seq_relationship/output_bias", "sop_head/bias", MODEL),
    ]
    return table


# ---- reading and writing ---------------------------------------------------------
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
        raise TrainingStateError(f"{prefix}: {TRAINING_CHECKPOINT_ADVICE}")
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


def load_original_checkpoint(model, path, values=None) -> LoadReport:
    """Loads Google's TF1 checkpoint into an AlbertBackbone or AlbertPretrainer (all or nothing).

    Every checkpoint variable must be mapped or ignorable (optimizer slots,
    `global_step`); every weight of the model must be set; shapes and values
    must be right (`albert_tf.formats.table.load_table`). Loading into a
    backbone skips the `cls/` head variables (reported). `values` ({TF1 name:
    array}), when given, is loaded instead of reading `path` (which then only
    names the source in errors).
    """
    backbone = backbone_of(model)
    prefix, values = (path, values) if values is not None else read_original_checkpoint(path)
    return load_table(model, name_table(backbone.albert_config), values, prefix, IGNORED, "checkpoint variable")


def original_variables(model) -> Dict[str, np.ndarray]:
    """{original name: np.ndarray} of a backbone's or pretrainer's weights."""
    backbone = backbone_of(model)
    return export_table(model, name_table(backbone.albert_config))


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


class OriginalFormat(Format):
    """Google's TF1 checkpoint: a prefix or a directory with a `checkpoint` index, the config beside it."""

    name = NAME

    def claims(self, path: str) -> bool:
        return os.path.exists(path + ".index") or (
            os.path.isdir(path) and os.path.isfile(os.path.join(path, "checkpoint"))
        )

    def load(self, path, albert_config_file=None, tokenizer=None, do_lower_case=None) -> LoadedModel:
        """Our backbone, or pretrainer when the checkpoint holds the heads."""
        prefix, values = read_original_checkpoint(path)
        directory = path if os.path.isdir(path) else os.path.dirname(path)
        config_file = albert_config_file or os.path.join(directory, CONFIG_FILE)
        if not os.path.isfile(config_file):
            raise CheckpointError(
                f"{path}: a TF1 checkpoint without {CONFIG_FILE} beside it; pass its config with --albert_config_file"
            )
        backbone = AlbertBackbone.from_albert_config(config_file)
        model = AlbertPretrainer(backbone) if MLM_HEAD_VARIABLE in values else backbone
        load_original_checkpoint(model, prefix, values)
        notes = []
        if tokenizer is None:
            tokenizer, notes = tokenizer_beside(directory, do_lower_case)
        return LoadedModel(model, path, tokenizer, format=NAME, notes=tuple(notes))

    def save(self, model, directory, tokenizer=None) -> None:
        """`<directory>/model.ckpt` in Google's layout, its `checkpoint` index, `albert_config.json`
        and the tokenizer."""
        backbone = backbone_of(model)
        if not isinstance(model, (AlbertBackbone, AlbertPretrainer)):
            raise CheckpointError(
                f"{type(model).__name__}: Google's TF1 layout here covers the encoder and "
                "the pretraining heads only; convert to albert_tf, hf or keras_hub instead"
            )
        save_original_checkpoint(model, os.path.join(directory, PREFIX))
        with open(os.path.join(directory, "checkpoint"), "w") as f:
            f.write(f'model_checkpoint_path: "{PREFIX}"\n')
        backbone.albert_config.to_json_file(os.path.join(directory, CONFIG_FILE))
        if tokenizer is not None:
            tokenizer.save(directory)

    def tf1_variables(self, path):
        return read_original_checkpoint(path)


FORMAT = OriginalFormat()


# ---- --init_from_group0: grow G from a checkpoint's group 0 --------------------
_GROUP = re.compile(r"/group_\d+/")


def fill_missing_groups_from_group0(config: AlbertConfig, values: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """`values` where every `.../group_k/...` tensor it lacks is its `.../group_0/...` one.

    The original's `run_pretraining.py --init_from_group0` (the paper's way to
    grow G from a model with shared layers, `get_assignment_map_from_checkpoint`);
    groups the checkpoint holds load as themselves. (`net_structure_type` > 0,
    which also maps `attention_k`/`ffn_k`, is not in the released code's configs;
    not supported.)
    """
    return fill_missing_groups(name_table(config), values, _GROUP, "/group_0/")
