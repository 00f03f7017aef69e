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

import json
import logging
import os
import sys
from typing import Dict, List, Optional

import numpy as np

from albert_tf import finetuning
from albert_tf.finetuning import FineTuneSettings
from albert_tf.tasks import glue


def encode_examples(examples: List[glue.Example], tokenizer, max_seq_length: int) -> Dict[str, np.ndarray]:
    """Padded int32 `input_ids`, `input_mask`, `segment_ids` of `[CLS] a [SEP] (b [SEP])`."""
    from albert_tf.inputs.packing import pack_segments

    features = {name: np.zeros((len(examples), max_seq_length), "int32")
                for name in ("input_ids", "input_mask", "segment_ids")}
    for i, example in enumerate(examples):
        # No segment keeps more than max_seq_length ids: the tokenizer stops there (exactly, and
        # truncation "longer segment first" gives the same lengths from the capped ones).
        ids_b = tokenizer.encode(example.text_b, max_ids=max_seq_length) if example.text_b is not None else None
        ids, segments = pack_segments(tokenizer.encode(example.text_a, max_ids=max_seq_length), ids_b, max_seq_length,
                                      tokenizer.cls_id, tokenizer.sep_id)
        features["input_ids"][i, :len(ids)] = ids
        features["input_mask"][i, :len(ids)] = 1
        features["segment_ids"][i, :len(ids)] = segments
    return features


def _read(task, data_dir, split, log):
    path = glue.split_file(task, data_dir, split)
    examples, report = glue.read_examples(task, path, split)
    if report.skipped:
        log(f"{path}: skipped {report.skipped} of {report.rows} rows; first: " + "; ".join(report.first_problems))
    return examples, report


def run(task_name: str, data_dir: str, settings: FineTuneSettings, spm_model_file: Optional[str],
        albert_config_file: Optional[str] = None, init_checkpoint: Optional[str] = None, do_train: bool = True,
        do_eval: bool = True, do_predict: bool = False, do_lower_case: bool = True,
        vocab_file: Optional[str] = None) -> dict:
    """The whole job; returns a summary (also `output_dir/summary.json`)."""
    import keras

    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.tokenization import load_tokenizer

    finetuning.check_max_seq_length(settings.max_seq_length, albert_config_file, init_checkpoint)
    task = glue.get_task(task_name)
    log = print if settings.verbose else logging.info
    tokenizer = load_tokenizer(spm_model_file, vocab_file, do_lower_case)
    os.makedirs(settings.output_dir, exist_ok=True)
    summary = {"task": task_name, "metric": task.metric}
    dev_examples = dev_features = None
    if do_train or do_eval:
        dev_examples, report = _read(task, data_dir, "dev", log)
        summary["dev_skipped"] = report.skipped
        dev_features = encode_examples(dev_examples, tokenizer, settings.max_seq_length)
        dev_labels = np.array([e.label for e in dev_examples])

    def evaluate(model):
        return glue.compute_metrics(task, dev_labels,
                                    finetuning.predict_logits(model, dev_features, settings.eval_batch_size))

    if do_train:
        keras.utils.set_random_seed(settings.seed)
        train_examples, report = _read(task, data_dir, "train", log)
        summary["train_examples"], summary["train_skipped"] = len(train_examples), report.skipped
        features = encode_examples(train_examples, tokenizer, settings.max_seq_length)
        labels = np.array([e.label for e in train_examples], "float32" if task.is_regression else "int32")
        backbone = finetuning.build_backbone(albert_config_file, init_checkpoint)
        model = AlbertClassifier(backbone, task.num_classes, dropout=settings.dropout)
        loss = finetuning.regression_loss if task.is_regression else finetuning.classification_loss
        result = finetuning.train(model, finetuning.train_dataset(features, labels, settings.train_batch_size,
                                                                  settings.seed),
                                  settings, loss, evaluate, task.metric, tokenizer=tokenizer)
        summary["history"] = result["history"]
    if do_eval or do_predict:
        model = finetuning.load_best(settings.output_dir)
    if do_eval:
        outputs = finetuning.predict_logits(model, dev_features, settings.eval_batch_size)
        summary["eval"] = glue.compute_metrics(task, dev_labels, outputs)
        write_predictions(os.path.join(settings.output_dir, "dev_predictions.tsv"),
                          [e.guid for e in dev_examples], glue.prediction_strings(task, outputs))
    if do_predict:
        test_examples, _ = _read(task, data_dir, "test", log)
        outputs = finetuning.predict_logits(model, encode_examples(test_examples, tokenizer,
                                                                   settings.max_seq_length),
                                            settings.eval_batch_size)
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
    from absl import flags

    d = FineTuneSettings(output_dir="")
    flags.DEFINE_string("task_name", None, f"One of {', '.join(sorted(glue.TASKS))} (case-insensitive).")
    flags.DEFINE_string("data_dir", None, "GLUE directory (with <TASK>/train.tsv ...) or the task's own.")
    flags.DEFINE_string("albert_config_file", None, "ALBERT config (default: the one beside --init_checkpoint).")
    flags.DEFINE_string("spm_model_file", None, "SentencePiece model (or --vocab_file).")
    flags.DEFINE_string("vocab_file", None, "WordPiece vocab.txt (Chinese models), instead of --spm_model_file.")
    flags.DEFINE_string("init_checkpoint", None, "Google's TF1 checkpoint, our model dir, run dir or .keras.")
    flags.DEFINE_string("output_dir", None, "Where results and the best model go.")
    flags.DEFINE_bool("do_train", False, "Fine-tune.")
    flags.DEFINE_bool("do_eval", False, "Evaluate the best model on dev.")
    flags.DEFINE_bool("do_predict", False, "Write the GLUE submission file for test.tsv.")
    flags.DEFINE_bool("do_lower_case", True, "Lowercase (the released English models are uncased).")
    flags.DEFINE_integer("max_seq_length", d.max_seq_length, "Tokens per example.")
    flags.DEFINE_integer("train_batch_size", d.train_batch_size, "Training batch.")
    flags.DEFINE_integer("eval_batch_size", d.eval_batch_size, "Eval/predict batch.")
    flags.DEFINE_float("learning_rate", d.learning_rate, "Peak learning rate.")
    flags.DEFINE_integer("train_step", d.train_step, "Optimizer steps.")
    flags.DEFINE_integer("warmup_step", d.warmup_step, "Linear warmup steps.")
    flags.DEFINE_integer("save_checkpoints_steps", d.save_checkpoints_steps, "Evaluate (and keep the best) every N.")
    flags.DEFINE_enum("optimizer", d.optimizer, ["adamw", "lamb"], "As the original.")
    flags.DEFINE_float("dropout", d.dropout, "Classifier dropout (0.1 in the original).")
    flags.DEFINE_integer("seed", d.seed, "Seed of head init and data order.")
    flags.mark_flags_as_required(["task_name", "data_dir", "output_dir"])


def main(argv):
    from absl import flags

    from albert_tf.checkpoints import CheckpointError
    from albert_tf.config import ConfigError
    from albert_tf.model_files import ModelFileError
    from albert_tf.tokenization import TokenizerError

    del argv
    FLAGS = flags.FLAGS
    settings = FineTuneSettings(
        output_dir=FLAGS.output_dir, max_seq_length=FLAGS.max_seq_length, train_batch_size=FLAGS.train_batch_size,
        eval_batch_size=FLAGS.eval_batch_size, learning_rate=FLAGS.learning_rate, train_step=FLAGS.train_step,
        warmup_step=FLAGS.warmup_step, save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        optimizer=FLAGS.optimizer, dropout=FLAGS.dropout, seed=FLAGS.seed)
    try:
        summary = run(FLAGS.task_name, FLAGS.data_dir, settings, FLAGS.spm_model_file, FLAGS.albert_config_file,
                      FLAGS.init_checkpoint, FLAGS.do_train, FLAGS.do_eval, FLAGS.do_predict, FLAGS.do_lower_case,
                      FLAGS.vocab_file)
    except (glue.GlueDataError, finetuning.FineTuneError, CheckpointError, ConfigError, ModelFileError,
            TokenizerError) as error:
        sys.exit(f"error: {error}")
    print(json.dumps({k: v for k, v in summary.items() if k != "history"}, indent=2))


if __name__ == "__main__":
    from absl import app

    define_flags()
    app.run(main)
