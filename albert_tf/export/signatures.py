"""The TF Serving signatures of an exported model: ids in, and text in.

- `serving_default`: the model's own inputs (int32 `input_ids`, `input_mask`,
  `segment_ids` [batch, seq], plus e.g. `masked_lm_positions`).
- `serve_text` (string `text_a` [batch]) and `serve_text_pair` (`text_a`,
  `text_b`): tokenised in-graph with tf-text exactly as in training (see
  `albert_tf.tokenization.tf_sentencepiece`), packed `[CLS] a [SEP] (b [SEP])`, truncated
  as the original (longer segment first) to `max_seq_length`, padded to the
  longest row of the batch. Invalid UTF-8 is replaced by U+FFFD first, as
  Python's `bytes.decode(errors="replace")`. For the MLM model, each literal
  `[MASK]` in the text becomes a mask token and the masked positions are
  predicted.

`serving_default` refuses ids the model would misread (negative, past the
vocabulary, mismatched shapes) with an `InvalidArgument` naming the input
(`albert_tf.export.input_checks`).

Outputs are the model's, plus ready-to-use ones: `probabilities` and `label`
for a `logits` output (and `sop_`), `label_name` (string) for a classifier
fine-tuned with class names, `mlm_top_k_ids`/`mlm_top_k_probabilities`
for `mlm_logits`; the text signatures also return the packed ids.

Example:

>>> from albert_tf import AlbertBackbone
>>> endpoints = ServingEndpoints(AlbertBackbone.from_albert_config("configs/albert_tiny.json"))
>>> sorted(endpoints.signatures())
['serving_default']
"""

from typing import Callable, Dict, Optional, Tuple

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.export.input_checks import MLM_POSITIONS, serving_tensors
from albert_tf.models.task_base import label_names
from albert_tf.tokenization import MAX_SEGMENTED_CHARS

TOKEN_INPUTS = ("input_ids", "input_mask", "segment_ids")
MASK_TEXT = "[MASK]"
# Outputs that are class logits: name → prefix of the derived outputs.
CLASS_LOGITS = {"logits": "", "sop_logits": "sop_"}
MLM_LOGITS = "mlm_logits"


class ServingEndpoints:
    """The serving functions of a model, and the Keras `ExportArchive` that saves them.

    Keras' archive saves the variables so that TF1-style loaders (TF Serving,
    `saved_model_cli run`, the TFLite converter) restore them too.

    Args:
        model: any albert_tf Keras model with dict inputs and outputs.
        tokenizer: a `TFSentencePieceTokenizer` for the text signatures (None: ids only).
        special_ids: `{"cls": .., "sep": .., "mask": ..}` of the tokenizer's vocabulary.
        max_seq_length: the text signatures' truncation length.
        top_k: how many MLM candidates to return.
        jit_compile: XLA-compile the model in `serving_default` (the text signatures stay
            graph-mode: XLA compiles once per input shape, and they pad to each batch's
            longest text). Same outputs to float rounding.
    """

    def __init__(
        self,
        model,
        tokenizer=None,
        special_ids: Optional[Dict[str, int]] = None,
        max_seq_length: int = 128,
        top_k: int = 5,
        jit_compile: bool = False,
    ):
        self.model = model
        self.jit_compile = jit_compile
        # A nested XLA function: it is saved with the signature and compiled where it is loaded.
        self._compiled_outputs = tf.function(self._outputs, jit_compile=True) if jit_compile else None
        self.tokenizer = tokenizer
        self.special_ids = dict(special_ids or {})
        self.max_seq_length = max_seq_length
        self.top_k = top_k
        self.label_names = label_names(model)
        self.input_specs = {
            name: tf.TensorSpec([None] + list(tensor.shape[1:]), tf.int32, name=name)
            for name, tensor in model.input.items()
        }

    @property
    def takes_text(self) -> bool:
        """Text signatures need a tokenizer and rank-2 token inputs (not multiple choice)."""
        extra = set(self.input_specs) - set(TOKEN_INPUTS)
        return (
            self.tokenizer is not None
            and extra <= {MLM_POSITIONS}
            and all(len(self.input_specs[n].shape) == 2 for n in TOKEN_INPUTS)
        )

    def signatures(self) -> Dict[str, Tuple[Callable, list]]:
        """{signature name: (function, input signature)}."""
        result = {"serving_default": (self._serve_ids, [self.input_specs])}
        if self.takes_text:
            text = tf.TensorSpec([None], tf.string, name="text_a")
            pair = tf.TensorSpec([None], tf.string, name="text_b")
            result["serve_text"] = (self._serve_text, [text])
            result["serve_text_pair"] = (self._serve_text_pair, [text, pair])
        return result

    def archive(self) -> keras.export.ExportArchive:
        archive = keras.export.ExportArchive()
        # Not `archive.track(model)`: the endpoints collect the variables already, and
        # tracking the model too saves every weight a second time (Keras 3.15).
        if self.tokenizer is not None:
            archive.track(self.tokenizer)
        for name, (function, input_signature) in self.signatures().items():
            archive.add_endpoint(name, function, input_signature)
        return archive

    # ---- signatures -----------------------------------------------------------------
    def _serve_ids(self, inputs):
        # Checked outside XLA (it compiles no assertion); the text signatures make valid ids.
        rank = len(self.model.input["input_ids"].shape)
        inputs = serving_tensors(inputs, getattr(self.model, "backbone", self.model).albert_config, rank)
        if self._compiled_outputs is not None:
            return self._compiled_outputs(inputs)
        return self._outputs(inputs)

    def _serve_text(self, text_a):
        return self._serve_segments([text_a])

    def _serve_text_pair(self, text_a, text_b):
        return self._serve_segments(self._pair(text_a, text_b, "serve_text_pair"))

    # ---- pieces ---------------------------------------------------------------------
    def _outputs(self, inputs):
        outputs = self.model(inputs, training=False)
        # A bf16 model's bf16 outputs (pooled_output) are served as float32, as a float32 model's.
        result = tf.nest.map_structure(lambda v: tf.cast(v, tf.float32) if v.dtype.is_floating else v, dict(outputs))
        for name, prefix in CLASS_LOGITS.items():
            if name in outputs and outputs[name].shape[-1] > 1:
                result[prefix + "probabilities"] = tf.nn.softmax(outputs[name], axis=-1)
                result[prefix + "label"] = tf.argmax(outputs[name], axis=-1, output_type=tf.int32)
        if self.label_names and "label" in result:
            result["label_name"] = tf.gather(tf.constant(self.label_names), result["label"])
        if MLM_LOGITS in outputs:
            top = tf.math.top_k(tf.nn.softmax(outputs[MLM_LOGITS], axis=-1), k=self.top_k)
            result["mlm_top_k_ids"] = top.indices
            result["mlm_top_k_probabilities"] = top.values
        return result

    def _ids(self, texts):
        """Ragged ids of a batch of texts; literal `[MASK]`s become mask ids for the MLM model."""
        texts = tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)
        # No segment keeps more than max_seq_length ids: the tokenizer stops there (exactly).
        # The request's bound on work: what is segmented, all texts of a column together.
        if MLM_POSITIONS not in self.input_specs:
            return self.tokenizer(texts, max_ids=self.max_seq_length, max_total_chars=MAX_SEGMENTED_CHARS)
        parts = tf.strings.split(texts, MASK_TEXT)
        part_ids = self.tokenizer(parts.flat_values, max_ids=self.max_seq_length, max_total_chars=MAX_SEGMENTED_CHARS)
        masks = tf.fill([part_ids.nrows(), 1], tf.constant(self.special_ids["mask"], part_ids.dtype))
        with_masks = tf.concat([part_ids, tf.RaggedTensor.from_tensor(masks)], axis=1)
        # Every part is followed by a mask, the last one of each text excepted.
        return parts.with_flat_values(with_masks).merge_dims(1, 2)[:, :-1]

    def _serve_segments(self, texts):
        inputs = self._packed(texts)
        if MLM_POSITIONS in self.input_specs:
            is_mask = tf.equal(inputs["input_ids"], self.special_ids["mask"])
            positions = tf.broadcast_to(tf.range(tf.shape(is_mask)[1]), tf.shape(is_mask))
            inputs[MLM_POSITIONS] = tf.ragged.boolean_mask(positions, is_mask).to_tensor(0)
        outputs = self._outputs(inputs)
        outputs.update(inputs)
        return outputs

    @staticmethod
    def _pair(text_a, text_b, signature: str):
        """The two columns of a pair request, checked to have the same number of rows.

        TF Serving's columnar `inputs` lets them differ; tf-text's ops would then abort or crash the
        server. The request fails instead (InvalidArgument).
        """
        same_rows = tf.debugging.assert_equal(
            tf.size(text_a),
            tf.size(text_b),
            message=f"{signature}: text_a and text_b must have the same number of rows (one text_b per text_a)",
        )
        with tf.control_dependencies([same_rows]):
            return [tf.identity(text_a), tf.identity(text_b)]

    def _packed(self, texts):
        """The model's int32 inputs of a text request: [CLS] a [SEP] (b [SEP]), the longest segment trimmed first."""
        # An empty batch would pad to length 0, where the pooler has no [CLS] to read.
        some_rows = tf.debugging.assert_positive(tf.size(texts[0]), message="text_a: a request needs at least one text")
        with tf.control_dependencies([some_rows]):
            texts = [tf.identity(t) for t in texts]
        segments = [self._ids(t) for t in texts]
        budget = self.max_seq_length - 1 - len(segments)
        segments = tf_text.RoundRobinTrimmer(budget).trim(segments)
        ids, segment_ids = tf_text.combine_segments(
            segments, start_of_sequence_id=self.special_ids["cls"], end_of_segment_id=self.special_ids["sep"]
        )
        return {
            "input_ids": tf.cast(ids.to_tensor(0), tf.int32),
            "input_mask": tf.ones_like(ids, tf.int32).to_tensor(0),
            "segment_ids": tf.cast(segment_ids.to_tensor(0), tf.int32),
        }
