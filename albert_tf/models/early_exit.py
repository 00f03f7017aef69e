"""Patience-based early exit (PABEE, Zhou et al., NeurIPS 2020): sentence (pair) classification, multiple choice.

`AlbertEarlyExitClassifier` puts a classifier after every layer application
(the shared tanh pooler on that layer's first token, then a dense layer of its
own), trained with the depth-weighted sum of their losses (`albert_tf.finetuning.losses`).
`PatientInference` runs the layers one at a time in a `keras.ops.while_loop`
and stops once every row of the batch has exited: a row exits when
`patience` consecutive classifiers agree (same argmax; for regression, each
score within `threshold` of the one before), keeping that layer's answer.

Our `patience` counts the agreeing classifiers: `patience=1` exits after the
first layer, `patience=L` always runs all L (the full-depth answer); it must
be in [1, L] (0 is no "all layers" as in HF: refused, as everywhere). The
paper's (and HF's) patience `t` counts the unchanged predictions after the
first, so it is our `t + 1`.
"""

import keras
from keras import ops

from albert_tf.models.backbone import AlbertBackbone, block_name, block_slot
from albert_tf.models.multiple_choice import ChoicesToBatch
from albert_tf.models.task_base import TaskModel, label_config


@keras.saving.register_keras_serializable(package="albert_tf")
class ExitClassifiers(keras.layers.Layer):
    """One dense classifier per layer application, stored stacked: `kernel [N, H, C]`, `bias [N, C]`.

    `call(pooled [B, N, H])` applies classifier j to row j's pooled vector;
    `one(pooled [B, H], index)` applies classifier `index` only (the while loop).
    """

    def __init__(self, num_exits, num_classes, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_exits = num_exits
        self.num_classes = num_classes
        self.initializer_range = initializer_range

    def build(self, pooled_shape):
        hidden = pooled_shape[-1]
        initializer = keras.initializers.TruncatedNormal(stddev=self.initializer_range)
        self.kernel = self.add_weight(
            name="kernel", shape=(self.num_exits, hidden, self.num_classes), initializer=initializer
        )
        self.bias = self.add_weight(name="bias", shape=(self.num_exits, self.num_classes), initializer="zeros")
        self.built = True

    def call(self, pooled):
        return ops.einsum("bnh,nhc->bnc", pooled, self.kernel) + self.bias

    def one(self, pooled, index):
        kernel = ops.cast(ops.take(self.kernel, index, axis=0), pooled.dtype)
        bias = ops.cast(ops.take(self.bias, index, axis=0), pooled.dtype)
        return ops.matmul(pooled, kernel) + bias

    def compute_output_shape(self, pooled_shape):
        return (pooled_shape[0], self.num_exits, self.num_classes)

    def get_config(self):
        return {
            **super().get_config(),
            "num_exits": self.num_exits,
            "num_classes": self.num_classes,
            "initializer_range": self.initializer_range,
        }


@keras.saving.register_keras_serializable(package="albert_tf")
class FirstTokens(keras.layers.Layer):
    """The first token of each layer's output, stacked: N × `[B, S, H]` → `[B, N, H]`."""

    def call(self, layer_outputs):
        return ops.stack([x[:, 0, :] for x in layer_outputs], axis=1)

    def compute_output_shape(self, layer_output_shapes):
        first = layer_output_shapes[0]
        return (first[0], len(layer_output_shapes), first[-1])


def _all_layers_backbone(backbone):
    """`backbone` itself if it returns every layer's output, else a twin that does, with its weights."""
    if backbone.output_all_layers:
        return backbone
    twin = AlbertBackbone.from_config({**backbone.get_config(), "output_all_layers": True})
    twin.set_weights(backbone.get_weights())
    twin.albert_config = backbone.albert_config  # keeps the config file's passthrough keys
    return twin


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEarlyExitClassifier(TaskModel):
    """ALBERT with a classifier after every layer application (PABEE).

    Classifier j reads the shared pooler on layer j's first token (through
    dropout) and has its own dense layer. Fine-tuning trains `exit_logits`
    with `albert_tf.finetuning.losses.depth_weighted_loss`; the last classifier is the full-depth answer.
    A backbone built without `output_all_layers` is replaced by a twin with it
    (same weights, same layer names).

    Inputs (dict): `input_ids`, `input_mask`, `segment_ids` int32 `[B, S]`.
    Outputs (dict): `logits` float32 `[B, num_classes]` (the last classifier's),
    `exit_logits` float32 `[B, N, num_classes]` (every classifier's; N = L·K
    layer applications).

    Args:
        backbone: an `AlbertBackbone`.
        num_classes: number of labels (1 for regression).
        dropout: dropout rate before the classifiers.

    Example:

    >>> from albert_tf import AlbertBackbone
    >>> backbone = AlbertBackbone.from_albert_config("configs/albert_tiny.json")
    >>> model = AlbertEarlyExitClassifier(backbone, num_classes=3)
    >>> ids = keras.ops.ones((2, 8), dtype="int32")
    >>> outputs = model({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids})
    >>> tuple(outputs["exit_logits"].shape) == (2, backbone.albert_config.num_hidden_layers, 3)
    True
    """

    def __init__(self, backbone, num_classes, dropout=0.1, labels=None, **kwargs):
        backbone = _all_layers_backbone(backbone)
        policy = backbone.dtype_policy
        config = backbone.albert_config
        num_exits = config.num_hidden_layers * config.inner_group_num

        # === Layers ===
        first_tokens = FirstTokens(name="exit_first_tokens", dtype=policy)
        dropout_layer = keras.layers.Dropout(dropout, name="exit_dropout", dtype=policy)
        classifiers = ExitClassifiers(
            num_exits, num_classes, initializer_range=config.initializer_range, name="exit_classifiers", dtype=policy
        )

        # === Functional model ===
        inputs = dict(backbone.input)
        encoder_outputs = backbone(inputs)["encoder_outputs"]
        pooled = backbone.pooler(first_tokens(encoder_outputs))  # the shared pooler, per layer
        exit_logits = ops.cast(classifiers(dropout_layer(pooled)), "float32")
        super().__init__(inputs=inputs, outputs={"logits": exit_logits[:, -1, :], "exit_logits": exit_logits}, **kwargs)

        # === Config ===
        self._set_task_config(backbone, num_classes=num_classes, dropout=dropout, **label_config(labels, num_classes))
        self.num_exits = num_exits
        self.exit_classifiers = classifiers
        self.is_regression = num_classes == 1

    def rows_of(self, inputs):
        """The backbone's input rows (`PatientInference`): the inputs themselves."""
        return inputs

    def answers_of(self, scores):
        """One classifier's `[rows, C]` outputs → the answer `[B, C]`: the same."""
        return scores


@keras.saving.register_keras_serializable(package="albert_tf")
class ExitsToChoices(keras.layers.Layer):
    """`[B·C, N, 1]` option scores of N classifiers → `[B, N, C]` (one answer per classifier)."""

    def __init__(self, num_choices, **kwargs):
        super().__init__(**kwargs)
        self.num_choices = num_choices

    def call(self, scores):
        num_exits = scores.shape[1]
        return ops.transpose(ops.reshape(scores, (-1, self.num_choices, num_exits)), (0, 2, 1))

    def compute_output_shape(self, scores_shape):
        return (None, scores_shape[1], self.num_choices)

    def get_config(self):
        return {**super().get_config(), "num_choices": self.num_choices}


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEarlyExitMultipleChoice(TaskModel):
    """`AlbertMultipleChoice` (RACE) with an option scorer after every layer application (PABEE).

    Each option is packed on its own, as `AlbertMultipleChoice`; classifier j
    scores every option from layer j, and its answer is the softmax over the
    options. Trained, exited and exported as `AlbertEarlyExitClassifier`.

    Inputs (dict): `input_ids`, `input_mask`, `segment_ids` int32 `[B, C, S]`.
    Outputs (dict): `logits` float32 `[B, C]` (the last classifier's),
    `exit_logits` float32 `[B, N, C]`.

    Args:
        backbone: an `AlbertBackbone`.
        num_choices: options per question (4 for RACE).
        dropout: dropout rate before the classifiers.

    Example:

    >>> from albert_tf import AlbertBackbone
    >>> model = AlbertEarlyExitMultipleChoice(AlbertBackbone.from_albert_config("configs/albert_tiny.json"))
    >>> ids = keras.ops.ones((2, 4, 8), dtype="int32")
    >>> tuple(model({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids})["exit_logits"].shape)
    (2, 4, 4)
    """

    def __init__(self, backbone, num_choices=4, dropout=0.1, **kwargs):
        backbone = _all_layers_backbone(backbone)
        policy = backbone.dtype_policy
        config = backbone.albert_config
        num_exits = config.num_hidden_layers * config.inner_group_num

        # === Layers ===
        to_batch = ChoicesToBatch(name="choices_to_batch", dtype=policy)
        first_tokens = FirstTokens(name="exit_first_tokens", dtype=policy)
        dropout_layer = keras.layers.Dropout(dropout, name="exit_dropout", dtype=policy)
        classifiers = ExitClassifiers(
            num_exits, 1, initializer_range=config.initializer_range, name="exit_classifiers", dtype=policy
        )
        to_choices = ExitsToChoices(num_choices, name="exits_to_choices", dtype=policy)

        # === Functional model ===
        inputs = {
            name: keras.Input(shape=(num_choices, None), dtype="int32", name=name)
            for name in ("input_ids", "input_mask", "segment_ids")
        }
        encoder_outputs = backbone({name: to_batch(tensor) for name, tensor in inputs.items()})["encoder_outputs"]
        pooled = backbone.pooler(first_tokens(encoder_outputs))
        exit_logits = ops.cast(to_choices(classifiers(dropout_layer(pooled))), "float32")
        super().__init__(inputs=inputs, outputs={"logits": exit_logits[:, -1, :], "exit_logits": exit_logits}, **kwargs)

        # === Config ===
        self._set_task_config(backbone, num_choices=num_choices, dropout=dropout)
        self.num_exits = num_exits
        self.exit_classifiers = classifiers
        self.num_choices = num_choices
        self.is_regression = False

    def rows_of(self, inputs):
        """One backbone row per option: `[B, C, S]` → `[B·C, S]`."""
        return {name: ops.reshape(value, (-1, ops.shape(value)[-1])) for name, value in inputs.items()}

    def answers_of(self, scores):
        """`[B·C, 1]` option scores → `[B, C]`."""
        return ops.reshape(scores, (-1, self.num_choices))


class PatientInference(keras.layers.Layer):
    """Early-exit inference of an early-exit model: the layers one at a time, in a while loop.

    `call(inputs, patience, threshold)` returns `logits [B, C]` (each row's
    answer, from the layer where it exited) and `layers_used [B]` int32. The
    loop stops when every row has exited (or after the last layer); a row
    that exited keeps its answer while the others go on. `threshold` is used
    for regression (`num_classes == 1`) only. For multiple choice a row is a
    question: its options run together and it exits on the chosen option.

    Layer applications with different weights (`num_hidden_groups`,
    `inner_group_num`, `sharing`) pick theirs with a switch; with
    `gather_weights=True` each component's weight sets are stacked instead and
    the application's set is gathered into the first block's layer (a
    `keras.StatelessScope`): one body, no switch, for the TFLite converter,
    which cannot read variables inside a switch in a loop.
    """

    def __init__(self, model, gather_weights=False, **kwargs):
        super().__init__(dtype=model.backbone.dtype_policy, **kwargs)
        backbone = model.backbone
        config = backbone.albert_config
        self.classifier = model
        self.is_regression = model.is_regression
        self.num_exits = model.num_exits
        # The (attention, ffn) pair of each layer application, in order, and the distinct pairs.
        applications = [
            tuple(
                backbone.get_layer(
                    block_name(
                        block_slot(
                            component, layer_index, config.num_hidden_layers, config.num_hidden_groups, config.sharing
                        ),
                        inner_index,
                        component,
                    )
                )
                for component in ("attention", "ffn")
            )
            for layer_index in range(config.num_hidden_layers)
            for inner_index in range(config.inner_group_num)
        ]
        self.distinct_blocks = list(dict.fromkeys(applications))
        self.block_of_application = [self.distinct_blocks.index(pair) for pair in applications]
        self.gather_weights = gather_weights
        # Per component (attention, ffn): its distinct layers and which one each application uses.
        self.component_layers, self.component_of_application = [], []
        for position in (0, 1):
            layers = list(dict.fromkeys(pair[position] for pair in applications))
            self.component_layers.append(layers)
            self.component_of_application.append([layers.index(pair[position]) for pair in applications])

    def _apply_layer(self, hidden, input_mask, index):
        def run(pair):
            attention, ffn = pair
            return lambda h, m: ffn(attention(h, m, training=False), training=False)

        if len(self.distinct_blocks) == 1:
            return run(self.distinct_blocks[0])(hidden, input_mask)
        if self.gather_weights:
            return self._apply_gathered(hidden, input_mask, index)
        branch = ops.take(ops.convert_to_tensor(self.block_of_application, "int32"), index)
        return ops.switch(branch, [run(pair) for pair in self.distinct_blocks], hidden, input_mask)

    def _apply_gathered(self, hidden, input_mask, index):
        """The first block's layers, their weights replaced by application `index`'s (stacked, gathered)."""
        replaced = []
        for layers, which in zip(self.component_layers, self.component_of_application):
            if len(layers) == 1:
                continue
            chosen = ops.take(ops.convert_to_tensor(which, "int32"), index)
            for same_weight in zip(*(layer.weights for layer in layers)):
                stacked = ops.stack([weight.value for weight in same_weight])
                replaced.append((same_weight[0], ops.take(stacked, chosen, axis=0)))
        attention, ffn = self.component_layers[0][0], self.component_layers[1][0]
        with keras.StatelessScope(state_mapping=replaced):
            return ffn(attention(hidden, input_mask, training=False), training=False)

    def _exit_logits(self, hidden, index):
        backbone = self.classifier.backbone
        pooled = backbone.pooler(hidden[:, 0, :])
        scores = self.classifier.exit_classifiers.one(pooled, index)
        return ops.cast(self.classifier.answers_of(scores), "float32")

    def _verdict(self, logits):
        """What consecutive classifiers must agree on: the label (for regression, the score)."""
        if self.is_regression:
            return logits[:, 0]
        # top_k, not argmax: Keras' TF argmax uses bitwise ops that TFLite has no builtin for.
        return ops.top_k(logits, 1)[1][:, 0]

    def _agrees(self, verdict, previous, threshold):
        if self.is_regression:
            return ops.abs(verdict - previous) < threshold
        return ops.equal(verdict, previous)

    def call(self, inputs, patience, threshold=0.0):
        if isinstance(patience, int) and not 1 <= patience <= self.num_exits:
            # The rule of every entry point (predict, the exported signatures): [1, L], L is full depth.
            raise ValueError(f"patience {patience}: must be in [1, {self.num_exits}]")
        backbone = self.classifier.backbone
        inputs = self.classifier.rows_of(inputs)
        input_mask = inputs["input_mask"]
        patience = ops.cast(patience, "int32")
        threshold = ops.cast(threshold, "float32")
        hidden = backbone.embeddings(inputs["input_ids"], inputs["segment_ids"], training=False)
        if backbone.embedding_projection is not None:
            hidden = backbone.embedding_projection(hidden)
        # Layer 1, outside the loop: every row has one agreeing classifier.
        hidden = self._apply_layer(hidden, input_mask, 0)
        logits = self._exit_logits(hidden, 0)
        run_length = ops.ones((ops.shape(logits)[0],), "int32")
        last = self.num_exits - 1
        # A row's layers_used is 0 while it runs; the loop ends when no row runs (at the last layer, all stop).
        layers_used = ops.where(ops.logical_or(run_length >= patience, ops.convert_to_tensor(last == 0)), 1, 0)

        def condition(index, hidden, previous, run_length, answer, layers_used):
            return ops.equal(ops.min(layers_used), 0)

        def body(index, hidden, previous, run_length, answer, layers_used):
            hidden = self._apply_layer(hidden, input_mask, index)
            logits = self._exit_logits(hidden, index)
            verdict = self._verdict(logits)
            run_length = ops.where(self._agrees(verdict, previous, threshold), run_length + 1, 1)
            exits = ops.logical_and(
                ops.equal(layers_used, 0), ops.logical_or(run_length >= patience, ops.equal(index, last))
            )
            answer = ops.where(ops.expand_dims(exits, 1), logits, answer)
            following = index + 1
            return following, hidden, verdict, run_length, answer, ops.where(exits, following, layers_used)

        loop_vars = (ops.convert_to_tensor(1, "int32"), hidden, self._verdict(logits), run_length, logits, layers_used)
        _, _, _, _, answer, layers_used = ops.while_loop(condition, body, loop_vars)
        return {"logits": answer, "layers_used": ops.cast(layers_used, "int32")}
