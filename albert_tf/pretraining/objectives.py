"""The pretraining objectives a run can train, one `Objective` object each: ALBERT's and PL-BERT's.

The data say which (`metadata.json` `objective`, `PretrainingData.objective`); `for_data`
looks it up in `OBJECTIVES`. An objective owns what differs between them: the training
model on the backbone, the rows' transform into (inputs, labels), the loss and its
metrics (`batch_stats`, `loss`, `STAT_KEYS`, `summarize`, which the steps call), the
progress bar's metrics, and what `final/` holds beside the model.

Example:

>>> OBJECTIVES["plbert"].bar_metrics
('loss', 'phoneme_accuracy', 'word_accuracy')
>>> ALBERT.stat_keys == objective.STAT_KEYS
True
"""

import os
from typing import Callable, Dict, List, Tuple

import tensorflow as tf

from albert_tf import flops
from albert_tf.inputs.shard_reader import albert_batches, data_feature_description
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.pretraining import health, objective, plbert_masking, plbert_objective
from albert_tf.shard_set import PretrainingData

PLBERT_EXPORT_DIR = "plbert"  # final/plbert/: StyleTTS 2's checkpoint layout (albert_tf.formats.plbert)


class Objective:
    """One pretraining objective; subclasses fill in the parts that differ.

    Attributes:
        name: the data's `metadata.json` `objective`, recorded with the run.
        bar_metrics: the progress bar's metrics (from `summarize`): the loss, then the masked task's
            accuracy (`best/` keeps its best eval), then the other task's.
        losses: `summarize`'s loss metrics, in the order they are logged.
    """

    name: str
    losses: Tuple[str, ...]
    bar_metrics: Tuple[str, ...]
    stats_module = None  # `batch_stats`, `loss`, `STAT_KEYS`, `summarize`

    @property
    def stat_keys(self) -> Tuple[str, ...]:
        return self.stats_module.STAT_KEYS

    def batch_stats(self, outputs, labels):
        return self.stats_module.batch_stats(outputs, labels)

    def loss(self, stats):
        return self.stats_module.loss(stats)

    def summarize(self, stats: Dict[str, float], steps: int) -> Dict[str, float]:
        return self.stats_module.summarize(stats, steps)

    def build_model(self, backbone, data: PretrainingData, packed_rows: bool = False):
        """The training model on `backbone` for rows of `data`."""
        raise NotImplementedError

    def batches(self, data: PretrainingData, seed: int) -> Callable:
        """`make_batches(records, batch_size, skip_batches)`: shuffled serialized rows → batches of
        (inputs, labels) (`inputs.shard_reader.pretraining_dataset`)."""
        raise NotImplementedError

    def step_flops(self, config, data: PretrainingData, batch: int, seq: int) -> int:
        """The model FLOPs of one optimizer step (`albert_tf.flops`: MFU on the progress line)."""
        raise NotImplementedError

    def write_beside_final(self, model, final_dir: str, step: int) -> List[str]:
        """Exports written into `final_dir` beside the model; their paths."""
        del model, final_dir, step
        return []

    def data_lines(self, facts: health.DataFacts, sentence_task: str) -> List[str]:
        """The health lines about the data at the start of training."""
        del facts, sentence_task
        return []

    def health_window(self, monitor: health.HealthMonitor, step, window_steps, metrics, window):
        """(lines, collapse) of the health monitor's window checks on `metrics` (the window's sums: `window`)."""
        raise NotImplementedError


class AlbertObjective(Objective):
    """ALBERT's masked LM + sentence order (`pretraining.objective`); the data hold the masks."""

    name = "albert"
    losses = ("masked_lm_loss", "sentence_order_loss")
    bar_metrics = ("loss", "masked_lm_accuracy", "sentence_order_accuracy")
    stats_module = objective

    def build_model(self, backbone, data, packed_rows=False):
        return AlbertPretrainer(backbone, packed_rows=packed_rows)

    def data_lines(self, facts, sentence_task):
        return health.data_lines(facts, sentence_task)

    def health_window(self, monitor, step, window_steps, metrics, window):
        counts = {health.MLM_ACCURACY: window["mlm_weight"], health.SENTENCE_ACCURACY: window["sop_count"]}
        return monitor.window(step, window_steps, metrics, counts)

    def step_flops(self, config, data, batch, seq):
        return flops.train_step_flops(config, batch, seq, data.predictions_per_row)

    def batches(self, data, seed):
        del seed  # the masks are in the data
        return lambda records, batch_size, skip_batches: albert_batches(records, data, batch_size, skip_batches)


class PlbertObjective(Objective):
    """PL-BERT's masked phonemes + words (`pretraining.plbert_objective`), masked in the pipeline."""

    name = "plbert"
    losses = ("phoneme_loss", "word_loss")
    bar_metrics = ("loss", "phoneme_accuracy", "word_accuracy")
    stats_module = plbert_objective

    def build_model(self, backbone, data, packed_rows=False):
        from albert_tf.models.plbert import PlbertPretrainer

        return PlbertPretrainer(backbone, word_vocab_size=data.word_vocab_size, packed_rows=packed_rows)

    def step_flops(self, config, data, batch, seq):
        # Both heads read every position: hidden → the phoneme symbols and hidden → the word vocabulary.
        heads = 2 * seq * config.hidden_size * (config.vocab_size + data.word_vocab_size)
        return 3 * (flops.encoder_forward_flops(config, seq) + heads) * batch

    def batches(self, data, seed):
        spec = data_feature_description(data)

        def make_batches(records, batch_size, skip_batches):
            # Each row is masked by (seed, its index in the stream): a resumed run that skips the
            # batches used masks the rows after them as the uninterrupted run did.
            dataset = records.enumerate().batch(batch_size, drop_remainder=True)
            if skip_batches:
                dataset = dataset.skip(skip_batches)
            dataset = dataset.unbatch().map(
                lambda index, record: plbert_masking.mask_words(tf.io.parse_single_example(record, spec), seed, index),
                num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=True,
            )
            return dataset.batch(batch_size, drop_remainder=True)

        return make_batches

    def health_window(self, monitor, step, window_steps, metrics, window):
        # No sentence task: the phoneme loss must fall and its accuracy must not collapse.
        return monitor.token_window(
            step, window_steps, metrics, "phoneme_loss", "phoneme_accuracy", window["phoneme_weight"]
        )

    def write_beside_final(self, model, final_dir, step):
        from albert_tf.formats.plbert import save_plbert_dir

        directory = os.path.join(final_dir, PLBERT_EXPORT_DIR)
        os.makedirs(directory, exist_ok=True)
        save_plbert_dir(model, directory, step=step)
        return [directory]


ALBERT = AlbertObjective()
PLBERT = PlbertObjective()
OBJECTIVES: Dict[str, Objective] = {o.name: o for o in (ALBERT, PLBERT)}


def for_data(data: PretrainingData) -> Objective:
    """The objective `data` was made for (`metadata.json`)."""
    return OBJECTIVES[data.objective]  # shard_set refuses any other when it loads the data
