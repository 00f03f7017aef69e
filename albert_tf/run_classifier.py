"""Fine-tunes ALBERT on a GLUE task, as the original `run_classifier.py`.

    python -m albert_tf.run_classifier --task_name sst-2 --data_dir glue_data \
        --albert_config_file albert_base/albert_config.json --spm_model_file albert_base/30k-clean.model \
        --init_checkpoint albert_base/model.ckpt-best --output_dir runs/sst2 \
        --do_train --do_eval --do_predict --max_seq_length 128 --train_step 20935 \
        --warmup_step 1256 --learning_rate 1e-5 --train_batch_size 32 --save_checkpoints_steps 100

Reads `data_dir/<TASK>/{train,dev,test}.tsv` (or the files directly in
`data_dir`). Writes `eval_results.txt` (one JSON line per evaluation),
`best/model.keras` (best dev metric: accuracy, Matthews corr for CoLA,
Pearson for STS-B), `dev_predictions.tsv`, and with `--do_predict` the GLUE
submission file (`SST-2.tsv`, ...: `index<TAB>prediction`).
"""

import dataclasses
import json
import logging
import os
from typing import Dict, List

import keras
import numpy as np
from absl import flags

from albert_tf import finetuning
from albert_tf.cli.app import run_cli
from albert_tf.cli.flags import define_finetune_flags, settings_from_flags
from albert_tf.finetuning import FineTuneSettings
from albert_tf.inputs.packing import pack_segments
from albert_tf.locking import OutputDirLock
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.tasks import glue

FLAGS = flags.FLAGS


@dataclasses.dataclass
class ClassifierSettings(FineTuneSettings):
    """run_classifier's flags."""

    task_name: str = ""
    data_dir: str = ""
    do_eval: bool = True
    do_predict: bool = False


def encode_examples(examples: List[glue.Example], tokenizer, max_seq_length: int) -> Dict[str, np.ndarray]:
    """Padded int32 `input_ids`, `input_mask`, `segment_ids` of `[CLS] a [SEP] (b [SEP])`."""
    features = {
        name: np.zeros((len(examples), max_seq_length), "int32") for name in ("input_ids", "input_mask", "segment_ids")
    }
    for i, example in enumerate(examples):
        # No segment keeps more than max_seq_length ids: the tokenizer stops there (exactly, and
        # truncation "longer segment first" gives the same lengths from the capped ones).
        ids_b = tokenizer.encode(example.text_b, max_ids=max_seq_length) if example.text_b is not None else None
        ids, segments = pack_segments(
            tokenizer.encode(example.text_a, max_ids=max_seq_length),
            ids_b,
            max_seq_length,
            tokenizer.cls_id,
            tokenizer.sep_id,
        )
        features["input_ids"][i, : len(ids)] = ids
        features["input_mask"][i, : len(ids)] = 1
        features["segment_ids"][i, : len(ids)] = segments
    return features


def _read(task, data_dir, split, log):
    path = glue.split_file(task, data_dir, split)
    examples, report = glue.read_examples(task, path, split)
    if report.skipped:
        log(f"{path}: skipped {report.skipped} of {report.rows} rows; first: " + "; ".join(report.first_problems))
    return examples, report


def run(settings: ClassifierSettings) -> dict:
    """The whole job, holding the output directory's lock; returns a summary (also `output_dir/summary.json`)."""
    finetuning.check_max_seq_length(settings.max_seq_length, settings.albert_config_file, settings.init_checkpoint)
    with OutputDirLock(settings.output_dir):
        return _run(settings)


def _run(settings: ClassifierSettings) -> dict:
    task_name, data_dir = settings.task_name, settings.data_dir
    task = glue.get_task(task_name)
    log = print if settings.verbose else logging.info
    tokenizer = finetuning.tokenizer_for(settings)
    os.makedirs(settings.output_dir, exist_ok=True)
    summary = {"task": task_name, "metric": task.metric}
    dev_examples = dev_features = None
    if settings.do_train or settings.do_eval:
        dev_examples, report = _read(task, data_dir, "dev", log)
        summary["dev_skipped"] = report.skipped
        dev_features = encode_examples(dev_examples, tokenizer, settings.max_seq_length)
        dev_labels = np.array([e.label for e in dev_examples])

    def evaluate(model):
        return glue.compute_metrics(
            task, dev_labels, finetuning.predict_logits(model, dev_features, settings.eval_batch_size)
        )

    if settings.do_train:
        keras.utils.set_random_seed(settings.seed)
        train_examples, report = _read(task, data_dir, "train", log)
        summary["train_examples"], summary["train_skipped"] = len(train_examples), report.skipped
        features = encode_examples(train_examples, tokenizer, settings.max_seq_length)
        labels = np.array([e.label for e in train_examples], "float32" if task.is_regression else "int32")
        backbone = finetuning.build_backbone(
            settings.albert_config_file, settings.init_checkpoint, tokenizer, remat=settings.remat
        )
        model = AlbertClassifier(backbone, task.num_classes, dropout=settings.dropout)
        loss = finetuning.regression_loss if task.is_regression else finetuning.classification_loss
        result = finetuning.train(
            model,
            finetuning.train_dataset(features, labels, settings.micro_batch_size, settings.seed),
            settings,
            loss,
            evaluate,
            task.metric,
            tokenizer=tokenizer,
        )
        summary["history"] = result["history"]
    if settings.do_eval or settings.do_predict:
        model = finetuning.load_best(settings.output_dir)
    if settings.do_eval:
        outputs = finetuning.predict_logits(model, dev_features, settings.eval_batch_size)
        summary["eval"] = glue.compute_metrics(task, dev_labels, outputs)
        write_predictions(
            os.path.join(settings.output_dir, "dev_predictions.tsv"),
            [e.guid for e in dev_examples],
            glue.prediction_strings(task, outputs),
        )
    if settings.do_predict:
        test_examples, _ = _read(task, data_dir, "test", log)
        outputs = finetuning.predict_logits(
            model, encode_examples(test_examples, tokenizer, settings.max_seq_length), settings.eval_batch_size
        )
        path = os.path.join(settings.output_dir, task.submission)
        write_predictions(path, [e.guid for e in test_examples], glue.prediction_strings(task, outputs))
        summary["submission"] = path
    with open(os.path.join(settings.output_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary


def write_predictions(path: str, ids: List[str], predictions: List[str]):
    """GLUE's submission format: a header, then `index<TAB>prediction` per row."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("index\tprediction\n")
        for index, prediction in zip(ids, predictions):
            f.write(f"{index}\t{prediction}\n")


def define_flags():
    define_finetune_flags(ClassifierSettings(output_dir=""))
    flags.DEFINE_string("task_name", None, f"One of {', '.join(sorted(glue.TASKS))} (case-insensitive).")
    flags.DEFINE_string("data_dir", None, "GLUE directory (with <TASK>/train.tsv ...) or the task's own.")
    flags.DEFINE_bool("do_eval", False, "Evaluate the best model on dev.")
    flags.DEFINE_bool("do_predict", False, "Write the GLUE submission file for test.tsv.")
    flags.mark_flags_as_required(["task_name", "data_dir", "output_dir"])


def main(argv):
    del argv
    summary = run(settings_from_flags(ClassifierSettings))
    print(json.dumps({k: v for k, v in summary.items() if k != "history"}, indent=2))


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    run_cli(main, define_flags)


if __name__ == "__main__":
    cli()
