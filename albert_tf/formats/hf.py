"""HF transformers ALBERT directories <-> our models, through one name table.

An HF directory holds `config.json` (`model_type: albert`), `model.safetensors`
(or shards with `model.safetensors.index.json`) and the tokenizer files
(`spiece.model`, `tokenizer_config.json`, and `tokenizer.json`, with which
`AutoTokenizer` gives our ids: `albert_tf.formats.hf_tokenizer`). Tensor names are those of
transformers' `modeling_albert.py`: `AlbertModel` has no prefix, every other
architecture puts the encoder under `albert.`. Linear weights are `[out, in]`
(our Dense kernels transposed); query/key/value and the attention output are
reshaped between `[N·D, H]` and our per-head `[H, N, D]` / `[N, D, H]`.

| HF architecture | ours |
|---|---|
| AlbertModel | AlbertBackbone |
| AlbertForPreTraining, AlbertForMaskedLM | AlbertPretrainer (MaskedLM has no pooler or SOP head: zeros) |
| AlbertForSequenceClassification | AlbertClassifier |
| AlbertForQuestionAnswering | AlbertSpanQA (no pooler in HF: zeros here, dropped on export) |
| AlbertForMultipleChoice | AlbertMultipleChoice |
| AlbertForTokenClassification | AlbertTokenClassifier (no pooler in HF, as QA) |

Only safetensors are read: `pytorch_model.bin` is a pickle, refused.

Example:

>>> config = AlbertConfig.from_json_file("configs/albert_tiny.json")
>>> hf_config(config, "AlbertModel")["hidden_act"]
'gelu_new'
>>> [m.name for m in name_table(config, "AlbertModel")][:2]
['embeddings.word_embeddings.weight', 'embeddings.position_embeddings.weight']
"""

import os
from typing import Dict, List, Optional

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file

from albert_tf.config import REQUIRED_FIELDS, AlbertConfig, ConfigError
from albert_tf.file_safety import path_inside
from albert_tf.formats import hf_tokenizer
from albert_tf.formats.base import PeerDirectoryFormat
from albert_tf.formats.table import (
    BACKBONE,
    EYE,
    HEADS_LAST,
    IDENTITY,
    MODEL,
    SAME,
    T_HEADS_FIRST,
    T_HEADS_LAST,
    TRANSPOSED,
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
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.models.span_qa import AlbertSpanQA
from albert_tf.models.token_classifier import AlbertTokenClassifier
from albert_tf.tokenization import SentencePieceTokenizer

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX_FILE = "model.safetensors.index.json"
SPM_FILE = "spiece.model"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
HF_TOKENIZER_FILE = "tokenizer.json"
SPECIAL_TOKENS_FILE = "special_tokens_map.json"
PICKLE_FILES = ("pytorch_model.bin", "pytorch_model.bin.index.json")
TRANSFORMERS_VERSION = "5.23.0"  # the version whose save_pretrained output we write (and test with)
LAYER_NORM_EPS = 1e-12

# HF's `hidden_act` <-> ours. HF `gelu` is the exact (erf) GELU; `gelu_new` the tanh form.
HF_TO_OUR_ACTIVATION = {
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu": "gelu_exact",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}
OUR_TO_HF_ACTIVATION = {"gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu", "tanh": "tanh", "linear": "linear"}
# HF's AlbertConfig defaults, used for fields a config.json leaves out (as transformers does).
HF_DEFAULTS = {
    "vocab_size": 30000,
    "embedding_size": 128,
    "hidden_size": 4096,
    "num_hidden_layers": 12,
    "num_hidden_groups": 1,
    "num_attention_heads": 64,
    "intermediate_size": 16384,
    "inner_group_num": 1,
    "hidden_act": "gelu_new",
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-12,
    "classifier_dropout_prob": 0.1,
}
# Tensors a file may hold that are no weights: buffers, and the tied decoder (checked separately).
IGNORED = (r"(^|\.)position_ids$", r"(^|\.)token_type_ids$")
TIED = {
    "predictions.decoder.weight": "albert.embeddings.word_embeddings.weight",
    "predictions.decoder.bias": "predictions.bias",
}

# Each model class names its HF architectures (the first is the one it exports as).
MODEL_CLASSES = (
    AlbertBackbone,
    AlbertPretrainer,
    AlbertClassifier,
    AlbertSpanQA,
    AlbertMultipleChoice,
    AlbertTokenClassifier,
)
CLASS_OF_ARCHITECTURE = {name: cls for cls in MODEL_CLASSES for name in cls.hf_architectures}
ARCHITECTURES = tuple(CLASS_OF_ARCHITECTURE)
NO_POOLER = ("AlbertForMaskedLM", "AlbertForQuestionAnswering", "AlbertForTokenClassification")
HEAD_LAYER = {
    "AlbertForSequenceClassification": ("classifier", "classifier"),
    "AlbertForQuestionAnswering": ("qa_outputs", "span_scorer"),
    "AlbertForMultipleChoice": ("classifier", "choice_scorer"),
    "AlbertForTokenClassification": ("classifier", "tagger"),
}


# ---- the name table ---------------------------------------------------------------------
def _pair(peer, weight, layout=SAME, scope=BACKBONE, optional=False, bias_layout=SAME):
    """`<peer>.weight`/`.bias` <-> `<weight>/kernel`/`bias` (or gamma/beta for LayerNorm)."""
    kernel, bias = ("gamma", "beta") if weight.endswith("layer_norm") else ("kernel", "bias")
    return [
        TensorMapping(f"{peer}.weight", f"{weight}/{kernel}", scope, layout, optional),
        TensorMapping(f"{peer}.bias", f"{weight}/{bias}", scope, bias_layout, optional),
    ]


def group_of_layer(config: AlbertConfig, layer: int) -> int:
    """HF's routing: `int(layer / (num_hidden_layers / num_hidden_groups))`."""
    return int(layer / (config.num_hidden_layers / config.num_hidden_groups))


def name_table(config: AlbertConfig, architecture: str) -> List[TensorMapping]:
    """Every tensor of `architecture` for `config`, with the weight of ours it maps to."""
    groups = check_contiguous_groups(config, "HF transformers", lambda layer: group_of_layer(config, layer))
    p = "" if architecture == "AlbertModel" else "albert."
    table = [
        TensorMapping(f"{p}embeddings.word_embeddings.weight", "embeddings/word_embeddings/embeddings"),
        TensorMapping(f"{p}embeddings.position_embeddings.weight", "embeddings/position_embeddings"),
        TensorMapping(f"{p}embeddings.token_type_embeddings.weight", "embeddings/token_type_embeddings/embeddings"),
        *_pair(f"{p}embeddings.LayerNorm", "embeddings/layer_norm"),
    ]
    projection = f"{p}encoder.embedding_hidden_mapping_in"
    if config.embedding_size != config.hidden_size:
        table += _pair(projection, "embedding_projection", TRANSPOSED)
    else:  # HF always has the projection; ours has none when E = H
        table += [
            TensorMapping(f"{projection}.weight", IDENTITY, layout=EYE),
            TensorMapping(f"{projection}.bias", IDENTITY, layout=ZEROS),
        ]
    for group, layer in sorted(groups.items()):
        for inner in range(config.inner_group_num):
            attention, ffn = block_weights(config, layer, inner)
            base = f"{p}encoder.albert_layer_groups.{group}.albert_layers.{inner}"
            for part in ("query", "key", "value"):
                table += _pair(f"{base}.attention.{part}", f"{attention}/{part}", T_HEADS_LAST, bias_layout=HEADS_LAST)
            table += _pair(f"{base}.attention.dense", f"{attention}/output_dense", T_HEADS_FIRST)
            table += _pair(f"{base}.attention.LayerNorm", f"{attention}/layer_norm")
            table += _pair(f"{base}.ffn", f"{ffn}/intermediate", TRANSPOSED)
            table += _pair(f"{base}.ffn_output", f"{ffn}/output_dense", TRANSPOSED)
            table += _pair(f"{base}.full_layer_layer_norm", f"{ffn}/layer_norm")
    table += _pair(f"{p}pooler", "pooler", TRANSPOSED, optional=architecture in NO_POOLER)
    if architecture in ("AlbertForPreTraining", "AlbertForMaskedLM"):
        table += _pair("predictions.dense", "mlm_head/transform", TRANSPOSED, MODEL)
        table += _pair("predictions.LayerNorm", "mlm_head/layer_norm", SAME, MODEL)
        table += [TensorMapping("predictions.bias", "mlm_head/output_bias", MODEL)]
        table += _pair(
            "sop_classifier.classifier", "sop_head", TRANSPOSED, MODEL, optional=architecture == "AlbertForMaskedLM"
        )
    elif architecture in HEAD_LAYER:
        peer, ours = HEAD_LAYER[architecture]
        table += _pair(peer, ours, TRANSPOSED, MODEL)
    return table


# ---- config ---------------------------------------------------------------------------------
def hf_config(
    config: AlbertConfig,
    architecture: str,
    num_labels: Optional[int] = None,
    classifier_dropout: float = 0.1,
    labels: Optional[List[str]] = None,
) -> Dict:
    """config.json as transformers writes it for ALBERT (v5)."""
    if config.hidden_act not in OUR_TO_HF_ACTIVATION:
        raise ConfigError(f"hidden_act {config.hidden_act!r} has no HF equivalent")
    values = {name: getattr(config, name) for name in REQUIRED_FIELDS}
    values.update(
        {
            "architectures": [architecture],
            "model_type": "albert",
            "dtype": "float32",
            "hidden_act": OUR_TO_HF_ACTIVATION[config.hidden_act],
            "layer_norm_eps": LAYER_NORM_EPS,
            "classifier_dropout_prob": classifier_dropout,
            "pad_token_id": 0,
            "bos_token_id": 2,
            "eos_token_id": 3,
            "tie_word_embeddings": True,
            "transformers_version": TRANSFORMERS_VERSION,
        }
    )
    if num_labels is not None:
        names = list(labels) if labels else [f"LABEL_{i}" for i in range(num_labels)]  # transformers' default
        values["id2label"] = {str(i): name for i, name in enumerate(names)}
        values["label2id"] = {name: i for i, name in enumerate(names)}
    return values


def read_hf_config(path: str):
    """(AlbertConfig, architecture, classifier dropout) of an HF `config.json`."""
    try:
        values = read_json(path)
    except OSError as e:
        raise ConfigError(f"{path}: not a readable JSON config ({e.strerror})") from None
    except UnreadableJsonError as e:
        raise ConfigError(str(e)) from None
    if not isinstance(values, dict) or values.get("model_type") != "albert":
        raise ConfigError(f"{path}: field 'model_type' is {values.get('model_type')!r}, not 'albert'")
    merged = {**HF_DEFAULTS, **values}
    architectures = merged.get("architectures") or ["AlbertModel"]
    architecture = architectures[0]
    config = albert_config_from_hf(values, path)
    if architecture not in ARCHITECTURES:
        raise ConfigError(
            f"{path}: field 'architectures': {architecture!r} has no albert_tf model; "
            f"supported: {', '.join(ARCHITECTURES)}"
        )
    dropout = merged["classifier_dropout_prob"]
    return config, architecture, merged["hidden_dropout_prob"] if dropout is None else dropout


def albert_config_from_hf(values: Dict, source: str) -> AlbertConfig:
    """Our AlbertConfig of HF `AlbertConfig` keyword arguments (`values`; what it leaves out: HF's defaults).

    Keys HF's `AlbertConfig` does not know are ignored, as HF stores them and never reads them.
    """
    merged = {**HF_DEFAULTS, **values}

    def fail(field, message):
        raise ConfigError(f"{source}: field '{field}': {message}")

    act = merged["hidden_act"]
    if act not in HF_TO_OUR_ACTIVATION:
        fail("hidden_act", f"{act!r} is not supported (supported: {', '.join(HF_TO_OUR_ACTIVATION)})")
    if merged["layer_norm_eps"] != LAYER_NORM_EPS:
        fail("layer_norm_eps", f"{merged['layer_norm_eps']} is not supported; ALBERT uses 1e-12")
    if merged.get("position_embedding_type", "absolute") != "absolute":
        fail("position_embedding_type", f"{merged['position_embedding_type']!r}: only 'absolute'")
    ours = {name: merged[name] for name in REQUIRED_FIELDS}
    ours["hidden_act"] = HF_TO_OUR_ACTIVATION[act]
    return AlbertConfig.from_dict(ours, source=source)


# ---- files ------------------------------------------------------------------------------------
def is_hf_dir(path: str) -> bool:
    """A directory whose config.json has `model_type` (transformers' mark)."""
    config = os.path.join(path, CONFIG_FILE)
    if not os.path.isdir(path) or not os.path.isfile(config):
        return False
    try:
        values = read_json(config)
    except (OSError, ValueError):
        return False
    return isinstance(values, dict) and "model_type" in values


def read_safetensors(directory: str) -> Dict[str, np.ndarray]:
    """{name: float32 array} of `model.safetensors` (or its shards); refuses pickles."""
    single = os.path.join(directory, WEIGHTS_FILE)
    index = os.path.join(directory, WEIGHTS_INDEX_FILE)
    if os.path.isfile(single):
        files = [single]
    elif os.path.isfile(index):
        files = [path_inside(directory, name, f"{index}: field 'weight_map'") for name in _shard_names(index)]
    else:
        pickles = [name for name in PICKLE_FILES if os.path.isfile(os.path.join(directory, name))]
        if pickles:
            raise CheckpointError(
                f"{os.path.join(directory, pickles[0])}: a PyTorch pickle; it is not read because "
                "unpickling can run arbitrary code. Convert it to safetensors first: "
                'python -c "from transformers import AutoModel as M; '
                f"M.from_pretrained('{directory}').save_pretrained('{directory}_safetensors')\" "
                "(transformers writes model.safetensors by default)"
            )
        raise CheckpointError(f"{directory}: no {WEIGHTS_FILE} (or {WEIGHTS_INDEX_FILE})")
    values = {}
    for name in files:
        try:
            loaded = load_file(name)
        except (SafetensorError, OSError, ValueError) as e:
            raise CheckpointError(f"{name}: not a readable safetensors file ({e})") from None
        for key, value in loaded.items():
            values[key] = value.astype(np.float32) if value.dtype.kind == "f" else value
    return values


def _shard_names(index: str) -> List[str]:
    """The shard file names an HF `model.safetensors.index.json` lists."""
    try:
        weight_map = read_json(index).get("weight_map")
    except UnreadableJsonError as e:
        raise CheckpointError(str(e)) from None
    except (OSError, AttributeError) as e:
        raise CheckpointError(f"{index}: not a readable shard index ({e})") from None
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(f"{index}: field 'weight_map' is not a non-empty object of tensor name -> file name")
    return sorted(set(weight_map.values()), key=str)


def _untie(values: Dict[str, np.ndarray], source: str):
    """Drops the tied decoder tensors, after checking they are the tied ones."""
    for decoder, tied_to in TIED.items():
        if decoder in values:
            tied = values.get(tied_to)
            if tied is not None and not np.array_equal(values[decoder], tied):
                raise CheckpointError(
                    f"{source}: {decoder} differs from {tied_to}; an untied MLM decoder has no equivalent in ALBERT"
                )
            del values[decoder]


def label_names_in(path: str) -> Optional[List[str]]:
    """The class names of an HF `config.json`'s `id2label`, or None when absent or transformers' `LABEL_i`."""
    id2label = read_json(path).get("id2label") or {}
    try:
        names = [str(id2label[str(i)]) for i in range(len(id2label))]
    except KeyError:
        return None  # not the ids 0..n-1
    return None if names == [f"LABEL_{i}" for i in range(len(names))] else names


def build_model(
    config: AlbertConfig,
    architecture: str,
    values: Dict[str, np.ndarray],
    dropout: float,
    num_choices: int = 4,
    labels: Optional[List[str]] = None,
):
    """Our model for `architecture`, its head sized from the tensors (named `labels` when they fit)."""
    backbone = AlbertBackbone.from_albert_config(config)
    cls = CLASS_OF_ARCHITECTURE[architecture]
    if cls is AlbertBackbone:
        return backbone
    if cls in (AlbertPretrainer, AlbertSpanQA):
        return cls(backbone)
    if cls is AlbertMultipleChoice:
        return cls(backbone, num_choices=num_choices, dropout=dropout)
    weight = values.get("classifier.weight")
    num_labels = weight.shape[0] if weight is not None and weight.ndim == 2 else 2
    if cls is AlbertClassifier and labels and len(labels) == num_labels and len(set(labels)) == num_labels:
        return cls(backbone, num_classes=num_labels, dropout=dropout, labels=labels)
    return cls(backbone, num_classes=num_labels, dropout=dropout)


def load_hf_dir(directory: str):
    """(our model, ImportReport) from an HF directory; one error lists every problem."""
    config, architecture, dropout = read_hf_config(os.path.join(directory, CONFIG_FILE))
    values = read_safetensors(directory)
    if architecture == "AlbertModel" and any(k.startswith("albert.") for k in values):
        values = {k[len("albert.") :]: v for k, v in values.items()}  # an encoder saved from a task model
    _untie(values, directory)
    model = build_model(
        config, architecture, values, dropout, labels=label_names_in(os.path.join(directory, CONFIG_FILE))
    )
    report = load_table(model, name_table(config, architecture), values, directory, IGNORED)
    return model, report


def find_spm(directory: str) -> Optional[str]:
    path = os.path.join(directory, SPM_FILE)
    return path if os.path.isfile(path) else None


# ---- export ---------------------------------------------------------------------------------
def architecture_of(model) -> str:
    """The HF architecture our model maps to, or a CheckpointError saying why none does."""
    architectures = getattr(type(model), "hf_architectures", ())
    if not architectures:
        convertible = ", ".join(sorted(cls.__name__ for cls in MODEL_CLASSES))
        raise CheckpointError(
            f"{type(model).__name__} has no HF transformers equivalent (its heads differ); convertible: {convertible}"
        )
    return architectures[0]


def tokenizer_files(do_lower_case: bool = True) -> Dict[str, Dict]:
    """tokenizer_config.json and special_tokens_map.json for transformers (with `tokenizer.json`)."""
    special = {
        "bos_token": "[CLS]",
        "eos_token": "[SEP]",
        "unk_token": "<unk>",
        "sep_token": "[SEP]",
        "pad_token": "<pad>",
        "cls_token": "[CLS]",
        "mask_token": "[MASK]",
    }
    config = {
        **special,
        "do_lower_case": do_lower_case,
        "keep_accents": False,
        "remove_space": True,
        "model_max_length": 512,
        # The generic fast class reads tokenizer.json as written; AlbertTokenizer rebuilds its own pipeline.
        "tokenizer_class": hf_tokenizer.TOKENIZER_CLASS,
    }
    return {TOKENIZER_CONFIG_FILE: config, SPECIAL_TOKENS_FILE: special}


def _write_json(path, values):
    write_json(path, values, sort_keys=True)


def save_hf_dir(model, directory: str, spm_model_file: Optional[str] = None) -> List[str]:
    """Writes `model` into `directory` (must exist) as transformers would; returns the file names."""
    architecture = architecture_of(model)
    backbone = backbone_of(model)
    config = backbone.albert_config
    table = [m for m in name_table(config, architecture) if not m.optional]
    task = model.get_config() if model is not backbone else {}
    num_labels = (
        task.get("num_classes")
        if architecture in ("AlbertForSequenceClassification", "AlbertForTokenClassification")
        else None
    )
    _write_json(
        os.path.join(directory, CONFIG_FILE),
        hf_config(config, architecture, num_labels, task.get("dropout", 0.1), task.get("labels")),
    )
    save_file(export_table(model, table), os.path.join(directory, WEIGHTS_FILE), metadata={"format": "pt"})
    if spm_model_file:
        write_tokenizer(directory, SentencePieceTokenizer(spm_model_file))
    return sorted(os.listdir(directory))


def write_tokenizer(directory: str, tokenizer) -> None:
    """`spiece.model` and transformers' tokenizer files for our SentencePiece `tokenizer`."""
    with open(os.path.join(directory, SPM_FILE), "wb") as f:
        f.write(tokenizer.model_proto)
    for name, values in tokenizer_files(tokenizer.do_lower_case).items():
        _write_json(os.path.join(directory, name), values)
    tokenizer_json = hf_tokenizer.tokenizer_json(tokenizer)
    write_json(os.path.join(directory, HF_TOKENIZER_FILE), tokenizer_json, indent=None, ensure_ascii=False)


# ---- the format (albert_tf.formats) -----------------------------------------------------------
NAME = "hf"


class HfFormat(PeerDirectoryFormat):
    """An HF transformers directory (`config.json` with `model_type` + `model.safetensors`)."""

    name = NAME

    def claims(self, path: str) -> bool:
        return is_hf_dir(path)

    def read(self, path):
        return load_hf_dir(path)

    def spm_file(self, path):
        return find_spm(path)

    def lower_case(self, path: str) -> bool:
        """HF's `tokenizer_config.json` `do_lower_case`; True otherwise (the released ALBERTs are uncased)."""
        config = os.path.join(path, TOKENIZER_CONFIG_FILE)
        if os.path.isfile(config):
            try:
                return bool(read_json(config).get("do_lower_case", True))
            except (OSError, ValueError, AttributeError):
                return True
        return True

    def save(self, model, directory, tokenizer=None) -> None:
        """The model, and the tokenizer when it is a SentencePiece one (the only kind an HF directory holds)."""
        save_hf_dir(model, directory)
        if isinstance(tokenizer, SentencePieceTokenizer):
            write_tokenizer(directory, tokenizer)

    def near_miss(self, path: str) -> Optional[str]:
        if os.path.isdir(path) and not os.path.isfile(os.path.join(path, CONFIG_FILE)):
            candidates = (WEIGHTS_FILE, WEIGHTS_INDEX_FILE, *PICKLE_FILES)
            weights = [name for name in candidates if os.path.isfile(os.path.join(path, name))]
            if weights:
                return f"{path}: has {weights[0]} but no {CONFIG_FILE}; an HF transformers directory needs both"
        return None

    def unwritten(self, model) -> List[str]:
        """Tensors of `model` the HF architecture lacks."""
        architecture = architecture_of(model)
        table = name_table(backbone_of(model).albert_config, architecture)
        notes = unwritten_notes(f"HF's {architecture}", table)
        if model is not backbone_of(model) and not any(m.scope == MODEL for m in table):  # heads with no place
            notes.append(
                f"HF's {architecture} is the encoder alone: the {type(model).__name__}'s heads are not written"
            )
        return notes


FORMAT = HfFormat()
