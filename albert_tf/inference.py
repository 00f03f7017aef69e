"""Predicting with any model we can load, from Python: the library behind `python -m albert_tf.predict`.

    from albert_tf.inference import Predictor
    predictor = Predictor.load("runs/sst2/best")           # any path albert_tf.formats reads
    predictor.predict(["a fine film", "a dull one"])       # {"logits", "probabilities", "labels", "label_names"}
    predictor.predict(["A man plays."], ["Someone plays."])  # pairs

A classifier answers with its logits, probabilities and labels (class
indices; `label_names` too when it was fine-tuned with names, see
`Predictor.labels`; a one-output regression model: logits and `scores`); any other model with the pooled
embeddings of its encoder (`embeddings`). `fill_mask` gives an MLM model's
top-k fillers of each `[MASK]`. A classifier fine-tuned with `--early_exit`
answers at full depth unless `patience` is given: then each row stops once
`patience` consecutive internal classifiers agree (for regression, each score
within `threshold` of the one before), as the export's `serve_early_exit`
(`albert_tf.models.early_exit.PatientInference`). Tokenization and packing are
those of training and serving (`albert_tf.tokenization`, `albert_tf.tokenization.packing`).

Example:

>>> rows = [([2, 7, 3], [0, 0, 0]), ([2, 3], [0, 0])]
>>> batch = pad_batch(rows)
>>> batch["input_ids"].tolist(), batch["input_mask"].tolist()
([[2, 7, 3], [2, 3, 0]], [[1, 1, 1], [1, 1, 0]])
"""

import os
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import keras
import numpy as np

from albert_tf import formats
from albert_tf.inputs import length_batching
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.early_exit import AlbertEarlyExitClassifier, PatientInference
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.models.task_base import label_names
from albert_tf.request_checks import PredictError  # noqa: F401  (raised here; its home is light)
from albert_tf.tokenization import TokenizerError, resolve_tokenizer
from albert_tf.tokenization.packing import encode_with_masks, pack_segments

MASK_TEXT = "[MASK]"


def pad_batch(rows: Sequence[Tuple[List[int], List[int]]]) -> Dict[str, np.ndarray]:
    """(input_ids, segment_ids) rows → int32 arrays padded with 0 to the longest row."""
    length = max(len(ids) for ids, _ in rows)
    batch = {name: np.zeros((len(rows), length), np.int32) for name in ("input_ids", "input_mask", "segment_ids")}
    for row, (ids, segments) in enumerate(rows):
        batch["input_ids"][row, : len(ids)] = ids
        batch["input_mask"][row, : len(ids)] = 1
        batch["segment_ids"][row, : len(ids)] = segments
    return batch


def pack(tokenizer, text: str, text_b: Optional[str], max_seq_length: int, with_masks: bool = False):
    """`[CLS] a [SEP] (b [SEP])` as training packs it; `[MASK]` in the text is the mask id if asked."""
    # Each segment's first max_seq_length ids: all packing keeps, from bounded work.
    if with_masks:
        encode = lambda t: encode_with_masks(tokenizer, t, MASK_TEXT, max_seq_length)  # noqa: E731
    else:
        encode = lambda t: tokenizer.encode(t, max_ids=max_seq_length)  # noqa: E731
    ids_b = encode(text_b) if text_b is not None else None
    return pack_segments(encode(text), ids_b, max_seq_length, tokenizer.cls_id, tokenizer.sep_id)


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    return shifted / shifted.sum(-1, keepdims=True)


def answers(logits: np.ndarray, labels=None) -> Dict:
    """A classifier's answers from its logits `[n, C]`: `probabilities`, `labels` (and `label_names`
    from the class names `labels`); a one-output regression model's `scores`."""
    result = {"logits": logits}
    if logits.shape[-1] == 1:
        result["scores"] = logits[:, 0]
        return result
    result["probabilities"] = softmax(logits)
    result["labels"] = logits.argmax(-1)
    if labels:
        result["label_names"] = [labels[i] for i in result["labels"]]
    return result


def fill_mask(
    model, tokenizer, text: str, text_b: Optional[str] = None, top_k: int = 5, max_seq_length: int = 128
) -> List[List[Tuple[str, float]]]:
    """For each `[MASK]`, the `top_k` (piece, probability) of an `AlbertPretrainer`."""
    ids, segments = pack(tokenizer, text, text_b, max_seq_length, with_masks=True)
    positions = [i for i, token in enumerate(ids) if token == tokenizer.mask_id]
    if not positions:
        raise PredictError(f"no {MASK_TEXT} in the text (within the first {max_seq_length} pieces)")
    batch = pad_batch([(ids, segments)])
    batch["masked_lm_positions"] = np.array([positions], np.int32)
    probabilities = softmax(np.asarray(model(batch)["mlm_logits"])[0])
    results = []
    for row in probabilities:
        best = np.argsort(-row, kind="stable")[:top_k]
        pieces = tokenizer.convert_ids_to_tokens(best)
        results.append([(piece, float(row[i])) for piece, i in zip(pieces, best)])
    return results


def is_classifier(model) -> bool:
    """A model that answers with class logits (an early-exit one at full depth too)."""
    return isinstance(model, (AlbertClassifier, AlbertEarlyExitClassifier))


def check_early_exit_request(model, patience: Optional[int], threshold: Optional[float]) -> None:
    """`patience`/`threshold` fit `model` (the export's `serve_early_exit` semantics), or a `PredictError`."""
    early_exit = isinstance(model, AlbertEarlyExitClassifier)
    check_patience_request(
        patience,
        threshold,
        model.num_exits if early_exit else None,
        early_exit and model.is_regression,
        f"the model ({type(model).__name__}) has no internal classifiers; "
        "fine-tune it with run_classifier --early_exit to exit early",
    )


def check_patience_request(
    patience: Optional[int], threshold: Optional[float], num_exits: Optional[int], is_regression: bool, cannot: str
) -> None:
    """`patience`/`threshold` fit a model (or file) of `num_exits` exits (None: it cannot exit early, `cannot`
    says why), a regression model's when `is_regression`; else a `PredictError`."""
    if patience is None:
        if threshold is not None:
            raise PredictError("--threshold needs --patience (it is the regression rule of early exit)")
        return
    if num_exits is None:
        raise PredictError(f"--patience: {cannot}")
    if not 1 <= patience <= num_exits:
        raise PredictError(
            f"--patience {patience}: must be in [1, {num_exits}] "
            f"(the model's {num_exits} layer applications; {num_exits} is full depth)"
        )
    if not is_regression and threshold is not None:
        raise PredictError(
            "--threshold: the model classifies (agreement is the same label); the threshold is for regression"
        )
    if is_regression:
        if threshold is None:
            raise PredictError(
                "--patience on a regression model needs --threshold (the largest change between "
                "consecutive scores that still counts as agreeing)"
            )
        if not threshold >= 0 or threshold == float("inf"):
            raise PredictError(f"--threshold {threshold}: must be a finite number ≥ 0")


def packed_chunks(
    tokenizer, texts: Sequence[str], texts_b, batch_size: int, max_seq_length: int, source: str
) -> Iterator[Tuple[int, Sequence[str], list]]:
    """Yields `(start, texts, packed rows)` per batch; a text the tokenizer refuses names `source:line`."""
    for start in range(0, len(texts), batch_size):
        chunk = texts[start : start + batch_size]
        rows = []
        for number, text in enumerate(chunk, start=start + 1):
            try:
                rows.append(pack(tokenizer, text, None if texts_b is None else texts_b[number - 1], max_seq_length))
            except TokenizerError as error:
                raise PredictError(f"{source}:{number}: {error}") from None
        yield start, chunk, rows


class Predictor:
    """A model and its tokenizer, predicting on lists of texts (and pairs) in batches."""

    def __init__(self, model, tokenizer, max_seq_length: int = 128, notes: tuple = ()):
        limit = formats.backbone_of(model).albert_config.max_position_embeddings
        if max_seq_length < 3:
            raise PredictError("--max_seq_length must be ≥ 3 ([CLS], a piece, [SEP])")
        if max_seq_length > limit:
            raise PredictError(f"--max_seq_length {max_seq_length} exceeds the model's max_position_embeddings={limit}")
        self.model, self.tokenizer, self.max_seq_length = model, tokenizer, max_seq_length
        self.notes = notes  # what loading said (`albert_tf.formats.LoadedModel.notes`)
        # A model of another Keras backend runs its own predict step (a tf.function cannot run it).
        self.keras_predict = keras.backend.backend() != "tensorflow"
        # The class names the model was fine-tuned with (its config), or None.
        self.labels = label_names(model) if is_classifier(model) else None

    @classmethod
    def load(
        cls,
        path: str,
        max_seq_length: int = 128,
        tokenizer=None,
        albert_config_file: Optional[str] = None,
        do_lower_case: Optional[bool] = None,
    ) -> "Predictor":
        """The model at `path` (anything `albert_tf.formats.load` reads) with its own tokenizer or `tokenizer`."""
        loaded = formats.load(path, albert_config_file, tokenizer, do_lower_case)
        if loaded.tokenizer is None and loaded.no_tokenizer_hint:
            raise TokenizerError(f"{path}: holds no text tokenizer ({loaded.no_tokenizer_hint})")
        if loaded.tokenizer is None:
            raise TokenizerError(
                f"{path}: no vocabulary beside the model (spm.model, spiece.model, "
                "assets/tokenizer/vocabulary.spm or vocab.txt); pass --spm_model_file or --vocab_file"
            )
        return cls(loaded.model, loaded.tokenizer, max_seq_length, loaded.notes)

    def _batches(self, texts, texts_b, batch_size, progress, source):
        if texts_b is not None and len(texts_b) != len(texts):
            raise PredictError(f"{len(texts)} texts but {len(texts_b)} second segments")
        if batch_size < 1:
            raise PredictError("--batch_size must be ≥ 1")
        bar = keras.utils.Progbar(len(texts), unit_name="line") if progress else None
        for start, chunk, rows in packed_chunks(
            self.tokenizer, texts, texts_b, batch_size, self.max_seq_length, source
        ):
            yield start, chunk, rows
            if bar is not None:
                bar.add(len(chunk))

    def embed(self, texts, texts_b=None, batch_size=32, progress=False, source="line") -> np.ndarray:
        """Pooled outputs `[len(texts), hidden]` (float32) of the model's encoder."""
        backbone = formats.backbone_of(self.model)
        out = np.zeros((len(texts), backbone.albert_config.hidden_size), np.float32)
        for start, chunk, rows in self._batches(texts, texts_b, batch_size, progress, source):
            out[start : start + len(chunk)] = np.asarray(backbone(pad_batch(rows))["pooled_output"], np.float32)
        return out

    def predict(
        self,
        texts: Sequence[str],
        texts_b: Optional[Sequence[str]] = None,
        batch_size: int = 32,
        patience: Optional[int] = None,
        threshold: Optional[float] = None,
        progress: bool = False,
        source: str = "line",
    ) -> Dict[str, np.ndarray]:
        """A classifier's `logits` `[n, C]` with `probabilities` and `labels` (regression: `scores`);
        any other model's `embeddings` `[n, hidden]`. With `patience` (early exit) also `layers_used`.

        A text the tokenizer refuses is a `PredictError` naming `source:line`.
        """
        texts = list(texts)
        check_early_exit_request(self.model, patience, threshold)
        if not is_classifier(self.model):
            return {"embeddings": self.embed(texts, texts_b, batch_size, progress, source)}
        inference = PatientInference(self.model) if patience is not None else None
        logits, layers = [], []
        # Without early exit: chunks of many batches, each predicted on length-sorted batches cut to
        # their longest row (one traced graph, little padding) and returned in input order.
        chunk_size = batch_size * length_batching.POOL_BATCHES if inference is None else batch_size
        for _, _, rows in self._batches(texts, texts_b, chunk_size, progress, source):
            if inference is None:
                features = pad_batch(rows)
                buckets = length_batching.cut_lengths(features["input_ids"].shape[1], compiled=False)
                outputs = length_batching.predict_in_order(
                    self.model, features, batch_size, buckets=buckets, keras_predict=self.keras_predict
                )
                logits.append(np.asarray(outputs["logits"], np.float32))
            else:
                outputs = inference(pad_batch(rows), patience=patience, threshold=threshold or 0.0)
                logits.append(np.asarray(outputs["logits"], np.float32))
                layers.append(np.asarray(outputs["layers_used"]))
        num_outputs = self.model.get_config()["num_classes"]
        result = answers(np.concatenate(logits) if logits else np.zeros((0, num_outputs), np.float32), self.labels)
        if inference is not None:
            result["layers_used"] = np.concatenate(layers) if layers else np.zeros((0,), np.int32)
        return result

    def fill_mask(self, text: str, text_b: Optional[str] = None, top_k: int = 5) -> List[List[Tuple[str, float]]]:
        """For each `[MASK]` of an MLM model's input, its `top_k` (piece, probability)."""
        if not isinstance(self.model, AlbertPretrainer):
            raise PredictError(f"{type(self.model).__name__}: filling [MASK] needs a pretraining (MLM) model")
        return fill_mask(self.model, self.tokenizer, text, text_b, top_k, self.max_seq_length)


class TFLitePredictor:
    """A .tflite file (`albert_tf.export.export_tflite`) and its tokenizer, one text at a time at its own length.

    What a phone runs: batch 1, no padding. A classifier answers as `Predictor.predict`
    (class names from the file's metadata; an early-exit file, `--format early_exit_tflite`,
    at full depth unless `patience` is given); an encoder's `embed` gives its pooled
    output. The config and the tokenizer are the ones exported beside the file.
    `num_threads`: LiteRT's threads (default: every CPU this process may use).
    """

    def __init__(
        self, model_file: str, tokenizer, max_seq_length: Optional[int] = None, num_threads: Optional[int] = None
    ):
        from albert_tf.tflite_file import TFLiteRunner  # TensorFlow Lite loads only for a .tflite file

        self.runner = TFLiteRunner(model_file, num_threads=num_threads)
        self.tokenizer = tokenizer
        limit = self.runner.max_seq_length or self.runner.config.max_position_embeddings
        self.max_seq_length = limit if max_seq_length is None else max_seq_length
        if not 3 <= self.max_seq_length <= limit:
            raise PredictError(f"--max_seq_length {self.max_seq_length}: {model_file} takes 3 to {limit} pieces")
        token_inputs_only = set(self.runner.input_shapes) == set(length_batching.SEQUENCE_FEATURES)
        self.is_classifier = "logits" in self.runner.output_names and token_inputs_only
        self.labels = self.runner.labels if self.is_classifier else None
        self.notes = ()

    @classmethod
    def load(
        cls,
        model_file: str,
        max_seq_length: Optional[int] = None,
        tokenizer=None,
        do_lower_case: Optional[bool] = None,
        num_threads: Optional[int] = None,
    ) -> "TFLitePredictor":
        """The file with the tokenizer exported beside it, or `tokenizer`."""
        if not os.path.isfile(model_file):  # before looking for a tokenizer beside it
            raise PredictError(f"{model_file}: no such file")
        if tokenizer is None:
            tokenizer = resolve_tokenizer(
                do_lower_case=do_lower_case, model_dir=os.path.dirname(os.path.abspath(model_file))
            )
        return cls(model_file, tokenizer, max_seq_length, num_threads)

    @property
    def num_exits(self) -> Optional[int]:
        """An early-exit file's layer applications (its full depth); None for a file that cannot exit early."""
        return self.runner.num_exits

    def _outputs(self, texts, texts_b, source, patience=None, threshold=None):
        if texts_b is not None and len(texts_b) != len(texts):
            raise PredictError(f"{len(texts)} texts but {len(texts_b)} second segments")
        for _, _, rows in packed_chunks(self.tokenizer, texts, texts_b, 1, self.max_seq_length, source):
            if self.runner.early_exit:
                yield self.runner(pad_batch(rows), patience, threshold or 0.0)
            else:
                yield self.runner(pad_batch(rows))

    def _check_patience(self, patience, threshold) -> None:
        from albert_tf.tflite_file import EARLY_EXIT_TFLITE_NAME

        model_file = self.runner.model_file
        beside = os.path.join(os.path.dirname(model_file), EARLY_EXIT_TFLITE_NAME)
        cannot = f"{model_file} answers at full depth; " + (
            f"its early-exit file {beside} takes --patience"
            if os.path.isfile(beside)
            else "export a model fine-tuned with --early_exit with --format early_exit_tflite for a file that does"
        )
        regression = self.runner.early_exit and file_output_size(self.runner, "logits") == 1
        check_patience_request(patience, threshold, self.num_exits, regression, cannot)

    def predict(
        self,
        texts: Sequence[str],
        texts_b: Optional[Sequence[str]] = None,
        source: str = "line",
        patience: Optional[int] = None,
        threshold: Optional[float] = None,
    ) -> Dict:
        """As `Predictor.predict`: `logits`, `probabilities`, `labels` (`label_names`); an early-exit
        file with `patience` also `layers_used`."""
        if not self.is_classifier:
            raise PredictError(
                f"{self.runner.model_file}: not a classifier (outputs {', '.join(self.runner.output_names)})"
            )
        self._check_patience(patience, threshold)
        outputs = list(self._outputs(list(texts), texts_b, source, patience, threshold))
        rows = [np.asarray(out["logits"], np.float32)[0] for out in outputs]
        result = answers(np.stack(rows) if rows else np.zeros((0, 0), np.float32), self.labels)
        if patience is not None:
            result["layers_used"] = np.array([int(np.asarray(out["layers_used"]).reshape(-1)[0]) for out in outputs])
        return result

    def embed(self, texts: Sequence[str], texts_b: Optional[Sequence[str]] = None, source: str = "line") -> np.ndarray:
        """The pooled outputs `[len(texts), hidden]` of an encoder's file."""
        if "pooled_output" not in self.runner.output_names:
            raise PredictError(
                f"{self.runner.model_file}: has no pooled_output (outputs {', '.join(self.runner.output_names)}); "
                "embeddings need an encoder's file"
            )
        hidden = self.runner.config.hidden_size
        rows = [np.asarray(out["pooled_output"], np.float32)[0] for out in self._outputs(list(texts), texts_b, source)]
        return np.stack(rows) if rows else np.zeros((0, hidden), np.float32)


def file_output_size(runner, name: str) -> int:
    """The last dimension of a file's output `name` (a classifier's classes; 1: regression)."""
    return int(runner.runner.get_output_details()[name]["shape_signature"][-1])


def predict(path: str, texts: Sequence[str], texts_b: Optional[Sequence[str]] = None, **options) -> Dict:
    """`Predictor.load(path).predict(texts, texts_b)`: one call from a model directory to answers.

    `options` go to `Predictor.load` (`max_seq_length`, `tokenizer`, ...) or
    `Predictor.predict` (`batch_size`, `patience`, `threshold`).
    """
    load_names = ("max_seq_length", "tokenizer", "albert_config_file", "do_lower_case")
    predictor = Predictor.load(path, **{k: v for k, v in options.items() if k in load_names})
    return predictor.predict(texts, texts_b, **{k: v for k, v in options.items() if k not in load_names})
