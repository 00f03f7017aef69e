"""keras-hub ALBERT presets <-> our models, through one name table.

A preset directory holds `config.json` (a serialized `keras_hub>AlbertBackbone`),
`model.weights.h5`, `tokenizer.json` with `assets/tokenizer/vocabulary.spm`,
and for a task `task.json` + `task.weights.h5` (a classifier with a vocabulary
also `preprocessor.json`). The weights are read and
written with h5py at the paths Keras' `save_weights` gives keras-hub's layers
(`layers/<layer>/vars/<i>`, attention under `_self_attention_layer/...`), so
keras-hub itself is not needed. keras-hub's EinsumDense kernels have our
per-head shapes: nothing is transposed.

Mapping: `num_groups` / `num_inner_repetitions` are our `num_hidden_groups` /
`inner_group_num` (keras-hub needs L divisible by G); `max_sequence_length` is
`max_position_embeddings`; `num_segments` is `type_vocab_size`; its one
`dropout` is both of ours. keras-hub always has the E→H projection (identity
here when E = H), only the tanh GELU, and no SOP head: `AlbertMaskedLM` loads
as our `AlbertPretrainer` with a zero SOP head, and ours exports without it.
Its masked-LM LayerNorm uses ε = 1e-5 (ours and Google's 1e-12), so MLM
logits differ slightly for the same weights.

Example:

>>> config = AlbertConfig.from_json_file("configs/albert_tiny.json")
>>> backbone_config(config)["config"]["num_groups"]
1
>>> name_table(config)[0].name
'layers/reversible_embedding/vars/0'
"""

import os
import shutil
from typing import Dict, List, Optional

import h5py
import keras
import numpy as np

from albert_tf.config import AlbertConfig, ConfigError
from albert_tf.formats.base import PeerDirectoryFormat, json_object_problem
from albert_tf.formats.table import (
    BACKBONE,
    EYE,
    IDENTITY,
    MODEL,
    ZEROS,
    CheckpointError,
    TensorMapping,
    backbone_of,
    block_weights,
    check_contiguous_groups,
    export_table,
    load_table,
    unwritten_notes,
)
from albert_tf.json_records import UnreadableJsonError, read_json, write_json
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.models.task_base import label_names
from albert_tf.tokenization import SentencePieceTokenizer

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
TASK_FILE = "task.json"
TASK_WEIGHTS_FILE = "task.weights.h5"
TOKENIZER_FILE = "tokenizer.json"
PREPROCESSOR_FILE = "preprocessor.json"
PREPROCESSOR_CLASS = "keras_hub>AlbertTextClassifierPreprocessor"
METADATA_FILE = "metadata.json"
VOCABULARY_ASSET = os.path.join("assets", "tokenizer", "vocabulary.spm")
KERAS_HUB_VERSION = "0.32.0"  # the version whose preset layout we write (and test with)
BACKBONE_CLASS = "keras_hub>AlbertBackbone"
MASKED_LM_CLASS = "keras_hub>AlbertMaskedLM"
CLASSIFIER_CLASSES = ("keras_hub>AlbertTextClassifier", "keras_hub>AlbertClassifier")
IGNORED = (r"^optimizer/",)
INITIALIZER_RANGE = 0.02  # keras-hub's fixed initializer


def _dense(path, weight, scope=BACKBONE, optional=False):
    kernel, bias = ("gamma", "beta") if weight.endswith("layer_norm") else ("kernel", "bias")
    return [
        TensorMapping(f"{path}/vars/0", f"{weight}/{kernel}", scope, optional=optional),
        TensorMapping(f"{path}/vars/1", f"{weight}/{bias}", scope, optional=optional),
    ]


def _suffix(index):
    return "" if index == 0 else f"_{index}"


def group_of_layer(config: AlbertConfig, layer: int) -> int:
    """keras-hub runs each group `L // G` times in a row."""
    return layer // (config.num_hidden_layers // config.num_hidden_groups)


def _check(config: AlbertConfig):
    if config.num_hidden_layers % config.num_hidden_groups:
        raise ConfigError(
            f"num_hidden_layers={config.num_hidden_layers} is not divisible by "
            f"num_hidden_groups={config.num_hidden_groups}, which keras-hub requires"
        )
    if config.hidden_act != "gelu":
        raise ConfigError(f"hidden_act {config.hidden_act!r}: keras-hub's ALBERT has only the tanh GELU")
    return check_contiguous_groups(config, "keras-hub", lambda l: group_of_layer(config, l))


def name_table(config: AlbertConfig) -> List[TensorMapping]:
    """Every `model.weights.h5` dataset of an AlbertBackbone for `config`."""
    groups = _check(config)
    table = [
        TensorMapping("layers/reversible_embedding/vars/0", "embeddings/word_embeddings/embeddings"),
        TensorMapping("layers/position_embedding/vars/0", "embeddings/position_embeddings"),
        TensorMapping("layers/embedding/vars/0", "embeddings/token_type_embeddings/embeddings"),
        *_dense("layers/layer_normalization", "embeddings/layer_norm"),
    ]
    if config.embedding_size != config.hidden_size:
        table += _dense("layers/dense", "embedding_projection")
    else:
        table += [
            TensorMapping("layers/dense/vars/0", IDENTITY, layout=EYE),
            TensorMapping("layers/dense/vars/1", IDENTITY, layout=ZEROS),
        ]
    for group, layer in sorted(groups.items()):
        for inner in range(config.inner_group_num):
            attention, ffn = block_weights(config, layer, inner)
            base = f"layers/transformer_encoder{_suffix(group * config.inner_group_num + inner)}"
            for part in ("query", "key", "value"):
                table += _dense(f"{base}/_self_attention_layer/{part}_dense", f"{attention}/{part}")
            table += _dense(f"{base}/_self_attention_layer/output_dense", f"{attention}/output_dense")
            table += _dense(f"{base}/_self_attention_layer_norm", f"{attention}/layer_norm")
            table += _dense(f"{base}/_feedforward_intermediate_dense", f"{ffn}/intermediate")
            table += _dense(f"{base}/_feedforward_output_dense", f"{ffn}/output_dense")
            table += _dense(f"{base}/_feedforward_layer_norm", f"{ffn}/layer_norm")
    table += _dense("layers/dense_1", "pooler")
    return table


def task_table(task: str) -> List[TensorMapping]:
    """The `task.weights.h5` datasets of `masked_lm` or `classifier`."""
    if task == "masked_lm":
        return [
            *_dense("layers/masked_lm_head/_intermediate_dense", "mlm_head/transform", MODEL),
            *_dense("layers/masked_lm_head/_intermediate_layer_norm", "mlm_head/layer_norm", MODEL),
            TensorMapping("layers/masked_lm_head/vars/0", "mlm_head/output_bias", MODEL),
            *_dense("sop_head", "sop_head", MODEL, optional=True),
        ]  # keras-hub has none
    return _dense("layers/dense", "classifier", MODEL)


# ---- config ---------------------------------------------------------------------------------
def _serialized(module, class_name, registered, config):
    return {"module": module, "class_name": class_name, "config": config, "registered_name": registered}


def _dtype_policy(name):
    return _serialized("keras", "DTypePolicy", None, {"name": name})


def backbone_config(config: AlbertConfig) -> Dict:
    """config.json of the keras-hub AlbertBackbone for `config`."""
    _check(config)
    return _serialized(
        "keras_hub.src.models.albert.albert_backbone",
        "AlbertBackbone",
        BACKBONE_CLASS,
        {
            "name": "albert_backbone",
            "trainable": True,
            "dtype": _dtype_policy("float32"),
            "vocabulary_size": config.vocab_size,
            "num_layers": config.num_hidden_layers,
            "num_heads": config.num_attention_heads,
            "num_groups": config.num_hidden_groups,
            "num_inner_repetitions": config.inner_group_num,
            "embedding_dim": config.embedding_size,
            "hidden_dim": config.hidden_size,
            "intermediate_dim": config.intermediate_size,
            "dropout": config.hidden_dropout_prob,
            "max_sequence_length": config.max_position_embeddings,
            "num_segments": config.type_vocab_size,
        },
    )


def read_backbone_config(path: str) -> AlbertConfig:
    """Our AlbertConfig from a preset's config.json."""
    values = _read_json(path)
    if values.get("registered_name") != BACKBONE_CLASS:
        raise ConfigError(
            f"{path}: field 'registered_name' is {values.get('registered_name')!r}, expected {BACKBONE_CLASS!r}"
        )
    c = values.get("config", {})
    names = {
        "vocab_size": "vocabulary_size",
        "num_hidden_layers": "num_layers",
        "num_attention_heads": "num_heads",
        "num_hidden_groups": "num_groups",
        "inner_group_num": "num_inner_repetitions",
        "embedding_size": "embedding_dim",
        "hidden_size": "hidden_dim",
        "intermediate_size": "intermediate_dim",
        "max_position_embeddings": "max_sequence_length",
        "type_vocab_size": "num_segments",
    }
    defaults = {
        "num_groups": 1,
        "num_inner_repetitions": 1,
        "dropout": 0.0,
        "max_sequence_length": 512,
        "num_segments": 2,
    }
    missing = [theirs for theirs in names.values() if theirs not in c and theirs not in defaults]
    if missing:
        raise ConfigError(f"{path}: missing field(s) in 'config': {', '.join(missing)}")
    ours = {mine: c.get(theirs, defaults.get(theirs)) for mine, theirs in names.items()}
    dropout = c.get("dropout", 0.0)
    ours.update(
        hidden_act="gelu",
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        initializer_range=INITIALIZER_RANGE,
    )
    return AlbertConfig.from_dict(ours, source=path)


def _read_json(path):
    try:
        values = read_json(path)
    except OSError as e:
        raise ConfigError(f"{path}: not a readable JSON file ({e.strerror})") from None
    except UnreadableJsonError as e:
        raise ConfigError(str(e)) from None
    if not isinstance(values, dict) or not isinstance(values.get("config", {}), dict):
        what = values if not isinstance(values, dict) else values["config"]
        field = "" if not isinstance(values, dict) else "field 'config': "
        raise ConfigError(f"{path}: {field}expected a JSON object, got {type(what).__name__}")
    return values


def is_preset_dir(path: str) -> bool:
    """A directory whose config.json is a serialized Keras object (keras-hub's mark)."""
    config = os.path.join(path, CONFIG_FILE)
    if not os.path.isdir(path) or not os.path.isfile(config):
        return False
    try:
        values = read_json(config)
    except (OSError, ValueError):
        return False
    return isinstance(values, dict) and "registered_name" in values


# ---- h5 files ---------------------------------------------------------------------------------
def read_h5(path: str) -> Dict[str, np.ndarray]:
    """{dataset path: array} of a Keras `.weights.h5` file."""
    values = {}
    try:
        with h5py.File(path, "r") as f:

            def visit(name, obj):
                if isinstance(obj, h5py.Dataset):
                    value = np.asarray(obj[()])
                    values[name] = value.astype(np.float32) if value.dtype.kind == "f" else value

            f.visititems(visit)
    except OSError as e:
        raise CheckpointError(f"{path}: not a readable .weights.h5 file ({e})") from None
    return values


def write_h5(
    path: str,
    values: Dict[str, np.ndarray],
    layer_names: Dict[str, str],
    model_name: str,
    learning_rate: Optional[float] = None,
):
    """Writes datasets at their paths; `layer_names` gives each layer group's `vars` name attribute.

    A task file also holds the untrained optimizer of keras-hub's default
    `compile()` (iterations 0 and its learning rate), as keras-hub's own saver
    writes it; without it `from_preset` warns that it skips the optimizer.
    """
    with h5py.File(path, "w") as f:
        f.create_group("layers")
        f.create_group("vars").attrs["name"] = model_name
        if learning_rate is not None:
            optimizer = f.create_group("optimizer/vars")
            optimizer.attrs["name"] = "adam"
            optimizer.create_dataset("0", data=np.int64(0))
            optimizer.create_dataset("1", data=np.float32(learning_rate))
        for group, name in sorted(layer_names.items()):
            f.require_group(f"{group}/vars").attrs["name"] = name
        for key in sorted(values):
            f.create_dataset(key, data=values[key])


def _backbone_layer_names(config: AlbertConfig) -> Dict[str, str]:
    """The layer groups keras-hub's backbone file has (weightless ones too) and their names."""
    names = {
        "layers/input_layer": "token_ids",
        "layers/input_layer_1": "segment_ids",
        "layers/input_layer_2": "padding_mask",
        "layers/reversible_embedding": "token_embedding",
        "layers/position_embedding": "position_embedding",
        "layers/embedding": "segment_embedding",
        "layers/add": "embeddings_add",
        "layers/layer_normalization": "embeddings_layer_norm",
        "layers/dropout": "embeddings_dropout",
        "layers/dense": "embedding_projection",
        "layers/dense_1": "pooled_dense",
    }
    count = 0
    for group in range(config.num_hidden_groups):
        for inner in range(config.inner_group_num):
            base = f"layers/transformer_encoder{_suffix(count)}"
            names[base] = f"group_{group}_inner_layer_{inner}"
            attention = f"{base}/_self_attention_layer"
            names.update(
                {
                    attention: "self_attention_layer",
                    f"{attention}/query_dense": "query",
                    f"{attention}/key_dense": "key",
                    f"{attention}/value_dense": "value",
                    f"{attention}/output_dense": "attention_output",
                    f"{attention}/_softmax": f"softmax{_suffix(count)}",
                    f"{attention}/_dropout_layer": f"dropout{_suffix(count)}",
                    f"{base}/_self_attention_layer_norm": "self_attention_layer_norm",
                    f"{base}/_self_attention_dropout": "self_attention_dropout",
                    f"{base}/_feedforward_intermediate_dense": "feedforward_intermediate_dense",
                    f"{base}/_feedforward_output_dense": "feedforward_output_dense",
                    f"{base}/_feedforward_layer_norm": "feedforward_layer_norm",
                    f"{base}/_feedforward_dropout": "feedforward_dropout",
                }
            )
            count += 1
    return names


TASK_CLASS_NAMES = {"masked_lm": "AlbertMaskedLM", "classifier": "AlbertTextClassifier"}
# keras-hub's default `compile()` learning rates (AlbertMaskedLM, AlbertTextClassifier).
TASK_LEARNING_RATE = {"masked_lm": 5e-5, "classifier": 1e-5}
TASK_LAYER_NAMES = {
    "masked_lm": {
        "layers/input_layer_3": "mask_positions",
        "layers/masked_lm_head": "mlm_head",
        "layers/masked_lm_head/_intermediate_dense": "intermediate_dense",
        "layers/masked_lm_head/_intermediate_layer_norm": "intermediate_layer_norm",
    },
    "classifier": {"layers/dense": "logits", "layers/dropout": "output_dropout"},
}


# ---- import -----------------------------------------------------------------------------------
def _task_of(directory: str):
    """(None | 'masked_lm' | 'classifier', task config) from task.json, if any."""
    path = os.path.join(directory, TASK_FILE)
    if not os.path.isfile(path):
        return None, {}
    values = _read_json(path)
    registered = values.get("registered_name")
    config = values.get("config", {})
    if registered == MASKED_LM_CLASS:
        return "masked_lm", config
    if registered in CLASSIFIER_CLASSES:
        if config.get("activation") not in (None, "linear"):
            raise ConfigError(
                f"{path}: field 'activation' is {config.get('activation')!r}; only a "
                "linear (logits) classifier maps to AlbertClassifier"
            )
        return "classifier", config
    raise ConfigError(
        f"{path}: task {registered!r} has no albert_tf equivalent "
        f"(supported: {MASKED_LM_CLASS}, {', '.join(CLASSIFIER_CLASSES)})"
    )


def _metadata_labels(directory: str, num_classes: int) -> Optional[List[str]]:
    """The class names our export wrote into `metadata.json`, when they fit the head; else None."""
    try:
        labels = read_json(os.path.join(directory, METADATA_FILE)).get("labels")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(labels, list) or len(labels) != num_classes or len(set(map(str, labels))) != num_classes:
        return None
    return [str(label) for label in labels]


def load_preset(directory: str):
    """(our model, ImportReport) from a keras-hub preset directory; one error lists every problem."""
    config = read_backbone_config(os.path.join(directory, CONFIG_FILE))
    task, task_config = _task_of(directory)
    weights = os.path.join(directory, WEIGHTS_FILE)
    if not os.path.isfile(weights):
        raise CheckpointError(f"{directory}: no {WEIGHTS_FILE}")
    values = {f"backbone:{k}": v for k, v in read_h5(weights).items()}
    table = [TensorMapping(f"backbone:{m.name}", m.weight, m.scope, m.layout, m.optional) for m in name_table(config)]
    backbone = AlbertBackbone.from_albert_config(config)
    model = backbone
    if task is not None:
        task_weights = os.path.join(directory, TASK_WEIGHTS_FILE)
        if not os.path.isfile(task_weights):
            raise CheckpointError(f"{directory}: {TASK_FILE} without {TASK_WEIGHTS_FILE}")
        values.update({f"task:{k}": v for k, v in read_h5(task_weights).items()})
        table += [TensorMapping(f"task:{m.name}", m.weight, m.scope, m.layout, m.optional) for m in task_table(task)]
        if task == "masked_lm":
            model = AlbertPretrainer(backbone)
        else:
            kernel = values.get("task:layers/dense/vars/0")
            num_classes = task_config.get("num_classes") or (kernel.shape[-1] if kernel is not None else 2)
            labels = _metadata_labels(directory, num_classes)
            model = AlbertClassifier(
                backbone, num_classes=num_classes, dropout=task_config.get("dropout", 0.1), labels=labels
            )
    ignored = [r"^(backbone|task):" + p.lstrip("^") for p in IGNORED]
    report = load_table(model, table, values, directory, ignored)
    return model, report


def find_spm(directory: str) -> Optional[str]:
    path = os.path.join(directory, VOCABULARY_ASSET)
    return path if os.path.isfile(path) else None


# ---- export -----------------------------------------------------------------------------------
def task_of_model(model) -> Optional[str]:
    """None for a backbone, else the keras-hub task its class names (`keras_hub_task`)."""
    if isinstance(model, AlbertBackbone):
        return None
    task = getattr(type(model), "keras_hub_task", None)
    if task is None:
        raise CheckpointError(
            f"{type(model).__name__} has no keras-hub equivalent (keras-hub's ALBERT tasks are "
            "AlbertMaskedLM and AlbertTextClassifier); convert its backbone instead"
        )
    return task


def _write_json(path, values):
    write_json(path, values, indent=4)


def tokenizer_config() -> Dict:
    """tokenizer.json of keras-hub's AlbertTokenizer reading `assets/tokenizer/vocabulary.spm`."""
    return _serialized(
        "keras_hub.src.models.albert.albert_tokenizer",
        "AlbertTokenizer",
        "keras_hub>AlbertTokenizer",
        {
            "name": "albert_tokenizer",
            "trainable": True,
            "dtype": _dtype_policy("int32"),
            "config_file": TOKENIZER_FILE,
            "proto": None,
            "sequence_length": None,
            "add_bos": False,
            "add_eos": False,
        },
    )


def classifier_preprocessor_config(sequence_length: int) -> Dict:
    """preprocessor.json of keras-hub's AlbertTextClassifierPreprocessor (strings in, packed ids out)."""
    return _serialized(
        "keras_hub.src.models.albert.albert_text_classifier_preprocessor",
        "AlbertTextClassifierPreprocessor",
        PREPROCESSOR_CLASS,
        {
            "name": "albert_text_classifier_preprocessor",
            "trainable": True,
            "dtype": _dtype_policy("float32"),
            "tokenizer": tokenizer_config(),
            "config_file": PREPROCESSOR_FILE,
            "sequence_length": sequence_length,
            "truncate": "round_robin",
        },
    )


def save_preset(model, directory: str, spm_model_file: Optional[str] = None) -> List[str]:
    """Writes `model` into `directory` (must exist) as a keras-hub preset; returns the file names.

    With a vocabulary, a classifier also gets keras-hub's preprocessor (in
    `preprocessor.json` and `task.json`, as keras-hub's `save_to_preset` writes
    them), so `TextClassifier.from_preset(directory).predict(["text"])` takes
    strings; its sequence length is the model's `max_position_embeddings`.
    """
    task = task_of_model(model)
    backbone = backbone_of(model)
    config = backbone.albert_config
    preprocessor = None
    if spm_model_file and task == "classifier":
        preprocessor = classifier_preprocessor_config(config.max_position_embeddings)
        _write_json(os.path.join(directory, PREPROCESSOR_FILE), preprocessor)
    backbone_json = backbone_config(config)
    _write_json(os.path.join(directory, CONFIG_FILE), backbone_json)
    _write_json(
        os.path.join(directory, METADATA_FILE),
        {
            "keras_version": keras.version(),
            "keras_hub_version": KERAS_HUB_VERSION,
            "parameter_count": int(sum(np.prod(w.shape) for w in backbone.weights)),
            "tasks": ["MaskedLM", "TextClassifier"],
            # The class names (keras-hub's classifier has no field for them; its loader ignores this key).
            **({"labels": list(label_names(model))} if task == "classifier" and label_names(model) else {}),
        },
    )
    write_h5(
        os.path.join(directory, WEIGHTS_FILE),
        export_table(model, name_table(config)),
        _backbone_layer_names(config),
        "albert_backbone",
    )
    if task is not None:
        head = [m for m in task_table(task) if not m.optional]
        if task == "masked_lm":
            task_json = _serialized(
                "keras_hub.src.models.albert.albert_masked_lm",
                "AlbertMaskedLM",
                MASKED_LM_CLASS,
                {"backbone": backbone_json, "preprocessor": None, "name": "albert_masked_lm"},
            )
            name = "albert_masked_lm"
        else:
            values = model.get_config()
            task_json = _serialized(
                "keras_hub.src.models.albert.albert_text_classifier",
                "AlbertTextClassifier",
                CLASSIFIER_CLASSES[0],
                {
                    "backbone": backbone_json,
                    "preprocessor": preprocessor,
                    "name": "albert_text_classifier",
                    "num_classes": values["num_classes"],
                    "activation": "linear",
                    "dropout": values["dropout"],
                },
            )
            name = "albert_text_classifier"
        _write_json(os.path.join(directory, TASK_FILE), task_json)
        write_h5(
            os.path.join(directory, TASK_WEIGHTS_FILE),
            export_table(model, head),
            TASK_LAYER_NAMES[task],
            name,
            TASK_LEARNING_RATE[task],
        )
    if spm_model_file:
        asset = os.path.join(directory, VOCABULARY_ASSET)
        os.makedirs(os.path.dirname(asset), exist_ok=True)
        shutil.copyfile(spm_model_file, asset)
        _write_json(os.path.join(directory, TOKENIZER_FILE), tokenizer_config())
    return sorted(os.listdir(directory))


# ---- the format (albert_tf.formats) -----------------------------------------------------------
NAME = "keras_hub"


class KerasHubFormat(PeerDirectoryFormat):
    """A keras-hub preset directory (`config.json` naming a Keras class + `model.weights.h5`)."""

    name = NAME

    def claims(self, path: str) -> bool:
        return is_preset_dir(path)

    def read(self, path):
        return load_preset(path)

    def spm_file(self, path):
        return find_spm(path)

    def lower_case(self, path: str) -> bool:
        """keras-hub records no lowercasing (it does none), but its weights are Google's uncased models."""
        del path
        return True

    def save(self, model, directory, tokenizer=None) -> None:
        """The model, and the tokenizer when it is a SentencePiece one (the only kind a preset holds)."""
        spm = tokenizer.model_file if isinstance(tokenizer, SentencePieceTokenizer) else None
        save_preset(model, directory, spm)

    def near_miss(self, path: str) -> Optional[str]:
        config = os.path.join(path, CONFIG_FILE)
        if not os.path.isdir(path):
            return None
        if os.path.isfile(config):  # broken JSON is said here, for HF's config.json too
            return json_object_problem(config) or (
                f"{config}: has neither 'registered_name' (a keras-hub preset) nor 'model_type' (HF transformers)"
            )
        if os.path.isfile(os.path.join(path, WEIGHTS_FILE)):
            return f"{path}: has {WEIGHTS_FILE} but no {CONFIG_FILE}; a keras-hub preset needs both"
        return None

    def unwritten(self, model) -> List[str]:
        """Tensors of `model` keras-hub's task lacks."""
        task = task_of_model(model)
        if task is None:
            return []
        return unwritten_notes(f"keras-hub's {TASK_CLASS_NAMES[task]}", task_table(task))


FORMAT = KerasHubFormat()
