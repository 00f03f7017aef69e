"""What a fine-tuning run starts from, resolved once: the model, its config and the tokenizer.

Training starts from `--init_checkpoint` (any format we load; its config
unless `--albert_config_file` is given) or from a config alone; evaluating
without training loads the fine-tuned `best/` (this run's, or the one
`--init_checkpoint` names: a fine-tuning output directory or its `best/`),
or runs the `.tflite` file `--init_checkpoint` names (`finetuning.tflite_model`).
The tokenizer is the flags' vocabulary, else the one saved with the model.
Every check reads this one value: `--max_seq_length` against the config's
`max_position_embeddings`, the vocabulary's size against its `vocab_size`.
"""

import dataclasses
import os
from typing import Optional

import keras

from albert_tf import formats
from albert_tf.config import AlbertConfig
from albert_tf.finetuning import best_model
from albert_tf.finetuning.settings import FineTuneError, FineTuneSettings
from albert_tf.formats import CheckpointError
from albert_tf.formats.table import backbone_of
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.tflite_file import is_tflite_path
from albert_tf.tokenization import Tokenizer, check_vocab_size, resolve_tokenizer, vocabulary_flags


@dataclasses.dataclass
class Start:
    """The model a run trains or evaluates, resolved once.

    Attributes:
        config: the architecture (`--albert_config_file`, else the loaded model's).
        where: what `config` came from, for messages.
        model: the loaded model (None: a fresh backbone from `config`).
        tokenizer: the run's tokenizer, its size checked against `config`.
        origin: what the weights start from, said when training starts.
    """

    config: AlbertConfig
    where: str
    model: Optional[keras.Model]
    tokenizer: Tokenizer
    origin: str = "initialized from scratch (random weights)"  # the line a training run starts with

    def backbone(self, remat: bool = False, dtype: str = "float32") -> AlbertBackbone:
        """A backbone of `config` holding the loaded model's weights (a fresh one without a model).

        `dtype`: its Keras dtype policy (`mixed_bfloat16`: bf16 compute, float32 weights).
        """
        backbone = AlbertBackbone.from_albert_config(self.config, remat=remat, dtype=dtype)
        if self.model is not None:
            try:
                backbone.set_weights(backbone_of(self.model).get_weights())
            except ValueError as error:
                raise CheckpointError(f"the loaded weights do not fit {self.where}: {error}") from None
        return backbone


def check_max_seq_length(max_seq_length: int, config: AlbertConfig, where: str) -> None:
    """Fails before any work when `--max_seq_length` exceeds the model's `max_position_embeddings`."""
    limit = config.max_position_embeddings
    if max_seq_length is not None and max_seq_length > limit:
        raise FineTuneError(
            f"--max_seq_length {max_seq_length} exceeds max_position_embeddings = {limit} of {where}: "
            f"the model has no position embedding beyond {limit}; use --max_seq_length {limit} or less"
        )


def for_training(settings: FineTuneSettings) -> Start:
    """`--init_checkpoint` (with `--albert_config_file` when given), or a fresh model of the config.

    `--max_seq_length` is checked against the config as soon as it is read.
    """
    if is_tflite_path(settings.init_checkpoint):
        raise FineTuneError(
            f"--init_checkpoint {settings.init_checkpoint}: a .tflite file is scored, not trained "
            "(--do_eval/--do_predict without --do_train); train from the model it was exported from"
        )
    if settings.init_checkpoint is None:
        if settings.albert_config_file is None:
            raise FineTuneError("give --albert_config_file, --init_checkpoint, or both")
        config = AlbertConfig.from_json_file(settings.albert_config_file)
        check_max_seq_length(settings.max_seq_length, config, settings.albert_config_file)
        if settings.tokenizer is None:
            raise FineTuneError(f"no vocabulary: give {vocabulary_flags()} (a fresh model has none of its own)")
        tokenizer = settings.tokenizer
        check_vocab_size(config.vocab_size, tokenizer, settings.albert_config_file)
        return Start(config, settings.albert_config_file, None, tokenizer)
    loaded = _load(settings.init_checkpoint, settings, settings.albert_config_file)
    if settings.albert_config_file is None:
        config, where = backbone_of(loaded.model).albert_config, settings.init_checkpoint
    else:  # the weights were read through this config (formats.load checked the vocabulary against it)
        config, where = AlbertConfig.from_json_file(settings.albert_config_file), settings.albert_config_file
    check_max_seq_length(settings.max_seq_length, config, where)
    origin = f"initialized from {loaded.source} ({loaded.format or 'unknown format'})"
    return Start(config, where, loaded.model, loaded.tokenizer, origin)


def fine_tuned(settings: FineTuneSettings) -> Start:
    """The fine-tuned model to evaluate: `output_dir`'s `best/`, else the one `--init_checkpoint` names.

    A `.tflite` `--init_checkpoint` is always the model (named explicitly; `output_dir` may hold
    the `best/` it was exported from). `--max_seq_length` is checked against its config.
    """
    if is_tflite_path(settings.init_checkpoint):
        return _tflite_start(settings)
    found = best_model.fine_tuned_dir(settings.output_dir)
    if found is None and settings.init_checkpoint is not None:
        found = best_model.fine_tuned_dir(settings.init_checkpoint)
        if found is None:
            raise FineTuneError(
                f"{best_model.model_file(settings.init_checkpoint)}: no fine-tuned model "
                "(--init_checkpoint without --do_train names a fine-tuning output directory or its best/)"
            )
    if found is None:
        raise FineTuneError(
            f"{settings.output_dir}: no fine-tuned model yet; run with --do_train, or give --init_checkpoint "
            "a fine-tuning output directory"
        )
    loaded = _load(best_model.model_file(found), settings)  # a .keras file holds its own config
    config = backbone_of(loaded.model).albert_config
    check_max_seq_length(settings.max_seq_length, config, found)
    return Start(config, found, loaded.model, loaded.tokenizer)


def _tflite_start(settings: FineTuneSettings) -> Start:
    """The .tflite file `--init_checkpoint` names, with its config and tokenizer (the flags', else those beside it)."""
    from albert_tf.finetuning.tflite_model import TFLiteTaskModel
    from albert_tf.tflite_file import TFLiteRunner

    path = settings.init_checkpoint
    config = AlbertConfig.from_json_file(settings.albert_config_file) if settings.albert_config_file else None
    runner = TFLiteRunner(path, config)
    limit = runner.max_seq_length or runner.config.max_position_embeddings
    if settings.max_seq_length is not None and settings.max_seq_length > limit:
        raise FineTuneError(
            f"--max_seq_length {settings.max_seq_length}: {path} takes rows of up to {limit} pieces "
            f"(the length it was exported for); use --max_seq_length {limit} or less"
        )
    tokenizer = settings.tokenizer or resolve_tokenizer(
        do_lower_case=settings.do_lower_case, model_dir=os.path.dirname(os.path.abspath(path))
    )
    check_vocab_size(runner.config.vocab_size, tokenizer, path)
    return Start(runner.config, path, TFLiteTaskModel(runner), tokenizer)


def _load(path: str, settings: FineTuneSettings, albert_config_file: Optional[str] = None):
    loaded = formats.load(path, albert_config_file, settings.tokenizer, settings.do_lower_case)
    if loaded.tokenizer is None:
        if loaded.no_tokenizer_hint:
            raise FineTuneError(f"{path}: holds no text tokenizer ({loaded.no_tokenizer_hint})")
        raise FineTuneError(f"no vocabulary: give {vocabulary_flags()} and {formats.model_directory(path)} holds none")
    return loaded
