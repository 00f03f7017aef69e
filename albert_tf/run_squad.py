"""Fine-tunes ALBERT on SQuAD v1.1 or v2.0 and writes official-format predictions.

    python -m albert_tf.run_squad --version 1.1 --train_file train-v1.1.json --predict_file dev-v1.1.json \
        --albert_config_file albert_base/albert_config.json --spm_model_file albert_base/30k-clean.model \
        --init_checkpoint albert_base/model.ckpt-best --output_dir runs/squad1 --do_train --do_predict \
        --max_seq_length 384 --doc_stride 128 --train_step 5000 --warmup_step 500 --learning_rate 5e-5

Writes `predictions.json` ({id: answer}), `nbest_predictions.json`, for v2
`null_odds.json` and the tuned `null_score_diff_threshold`, and
`eval_results.txt` / `best/` (best dev F1) when `--do_train`. The dev score is
the official evaluation's (EM and F1, same normalisation).

v2.0 trains the original's answerability head (`AlbertSpanQAv2`): the end
conditioned on the start, beam search over `start_n_top` × `end_n_top`
spans, and an answerability logit trained on `is_impossible` (loss
(start + end)/2 + 0.5·answerability). A question gets "" when its null odds
(lowest answerability logit over its windows) is above the threshold tuned on
dev. Predicting with a v1-head model on v2 data uses BERT's null-score rule.
"""

import json
import logging
import os
import sys
from typing import Optional

import numpy as np

from albert_tf import finetuning
from albert_tf.finetuning import FineTuneSettings
from albert_tf.tasks import squad


def _prepare(path, tokenizer, settings, doc_stride, max_query_length, is_training, log):
    examples, report = squad.read_examples(path, is_training)
    if report["skipped"]:
        log(f"{path}: skipped {report['skipped']} questions; first: " + "; ".join(report["first_problems"]))
    features = squad.convert_examples(examples, tokenizer, settings.max_seq_length, doc_stride, max_query_length,
                                      is_training)
    return examples, features, squad.feature_arrays(features, settings.max_seq_length), report


def run(version: str, settings: FineTuneSettings, spm_model_file: Optional[str], train_file: Optional[str] = None,
        predict_file: Optional[str] = None, albert_config_file: Optional[str] = None,
        init_checkpoint: Optional[str] = None, do_train: bool = True, do_predict: bool = True,
        doc_stride: int = 128, max_query_length: int = 64, n_best_size: int = 20, max_answer_length: int = 30,
        do_lower_case: bool = True, start_n_top: int = 5, end_n_top: int = 5,
        vocab_file: Optional[str] = None) -> dict:
    """The whole job; returns a summary (also `output_dir/summary.json`)."""
    import keras

    from albert_tf.models.span_qa import AlbertSpanQA
    from albert_tf.models.span_qa_v2 import START_POSITIONS, AlbertSpanQAv2
    from albert_tf.tokenization import load_tokenizer

    finetuning.check_max_seq_length(settings.max_seq_length, albert_config_file, init_checkpoint)
    if version not in ("1.1", "2.0"):
        raise squad.SquadDataError(f"--version {version}: expected 1.1 or 2.0")
    log = print if settings.verbose else logging.info
    tokenizer = load_tokenizer(spm_model_file, vocab_file, do_lower_case)
    os.makedirs(settings.output_dir, exist_ok=True)
    summary = {"task": f"squad{version}"}
    if predict_file:
        examples, features, arrays, report = _prepare(predict_file, tokenizer, settings, doc_stride,
                                                      max_query_length, False, log)
        summary["predict_questions"], summary["predict_windows"] = len(examples), len(features)

    def predict(model):
        outputs = finetuning.predict_logits(model, arrays, settings.eval_batch_size, output=None)
        if "cls_logits" in outputs:
            return squad.decode_v2(examples, features, outputs, tokenizer, n_best_size, max_answer_length, end_n_top)
        return squad.decode(examples, features, outputs["start_logits"], outputs["end_logits"], tokenizer,
                            n_best_size, max_answer_length)

    def evaluate(model):
        predictions, _, null_diff = predict(model)
        if version == "2.0":
            # Spans alone (every question answered) tell span learning apart from answerability.
            answering_all = squad.evaluate(examples, predictions)
            threshold, _ = squad.best_threshold(examples, predictions, null_diff)
            predictions = squad.apply_threshold(predictions, null_diff, threshold)
            return {**squad.evaluate(examples, predictions), "null_score_diff_threshold": threshold,
                    "HasAns_f1_answering_all": answering_all.get("HasAns_f1", answering_all["f1"])}
        return squad.evaluate(examples, predictions)

    if do_train:
        if not train_file or not predict_file:
            raise finetuning.FineTuneError("--do_train needs --train_file and --predict_file (dev picks the best)")
        keras.utils.set_random_seed(settings.seed)
        train_examples, train_features, train_arrays, report = _prepare(
            train_file, tokenizer, settings, doc_stride, max_query_length, True, log)
        summary["train_questions"], summary["train_skipped"] = len(train_examples), report["skipped"]
        starts = np.array([f.start_position for f in train_features], "int32")
        labels = {"start_logits": starts, "end_logits": np.array([f.end_position for f in train_features], "int32")}
        loss = {"start_logits": finetuning.classification_loss, "end_logits": finetuning.classification_loss}
        loss_weights = {"start_logits": 0.5, "end_logits": 0.5}
        backbone = finetuning.build_backbone(albert_config_file, init_checkpoint)
        if version == "2.0":
            # As the original: the end head sees the gold start; windows without the answer are impossible.
            model = AlbertSpanQAv2(backbone, start_n_top=start_n_top)
            trained = model.training_model()
            train_arrays[START_POSITIONS] = starts[:, None]
            labels["end_logits"] = labels["end_logits"][:, None]
            labels["cls_logits"] = (starts == 0).astype("float32")
            loss["cls_logits"] = finetuning.binary_loss
            loss_weights["cls_logits"] = 0.5
        else:
            model = trained = AlbertSpanQA(backbone)
        dataset = finetuning.train_dataset(train_arrays, labels, settings.train_batch_size, settings.seed)
        summary["history"] = finetuning.train(trained, dataset, settings, loss, evaluate, "f1",
                                              loss_weights=loss_weights, inference_model=model,
                                              tokenizer=tokenizer)["history"]
    if do_predict:
        if not predict_file:
            raise finetuning.FineTuneError("--do_predict needs --predict_file")
        source = settings.output_dir if do_train else init_checkpoint
        if source is None:
            raise finetuning.FineTuneError("--do_predict without --do_train needs --init_checkpoint: "
                                           "a run_squad output directory")
        model = finetuning.load_best(source)
        predictions, nbest, null_diff = predict(model)
        if version == "2.0":
            threshold, _ = squad.best_threshold(examples, predictions, null_diff)
            predictions = squad.apply_threshold(predictions, null_diff, threshold)
            summary["null_score_diff_threshold"] = threshold
            _write_json(os.path.join(settings.output_dir, "null_odds.json"), null_diff)
        _write_json(os.path.join(settings.output_dir, "predictions.json"), predictions)
        _write_json(os.path.join(settings.output_dir, "nbest_predictions.json"), nbest)
        summary["eval"] = squad.evaluate(examples, predictions)
    with open(os.path.join(settings.output_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return summary


def _write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=1, ensure_ascii=False)


def define_flags():
    from absl import flags

    d = FineTuneSettings(output_dir="", max_seq_length=384, train_batch_size=32, learning_rate=5e-5)
    flags.DEFINE_enum("version", "1.1", ["1.1", "2.0"], "SQuAD version.")
    flags.DEFINE_string("train_file", None, "SQuAD JSON for training.")
    flags.DEFINE_string("predict_file", None, "SQuAD JSON to predict (and evaluate: dev).")
    flags.DEFINE_string("albert_config_file", None, "ALBERT config (default: the one beside --init_checkpoint).")
    flags.DEFINE_string("spm_model_file", None, "SentencePiece model (or --vocab_file).")
    flags.DEFINE_string("vocab_file", None, "WordPiece vocab.txt (Chinese models), instead of --spm_model_file.")
    flags.DEFINE_string("init_checkpoint", None, "Pretrained weights (any format), or a run_squad output to predict.")
    flags.DEFINE_string("output_dir", None, "Where results and the best model go.")
    flags.DEFINE_bool("do_train", False, "Fine-tune.")
    flags.DEFINE_bool("do_predict", False, "Predict --predict_file with the best model.")
    flags.DEFINE_bool("do_lower_case", True, "Lowercase.")
    flags.DEFINE_integer("max_seq_length", d.max_seq_length, "Tokens per window.")
    flags.DEFINE_integer("doc_stride", 128, "Pieces between window starts.")
    flags.DEFINE_integer("max_query_length", 64, "Question pieces kept.")
    flags.DEFINE_integer("n_best_size", 20, "Candidates per question.")
    flags.DEFINE_integer("max_answer_length", 30, "Longest answer in pieces.")
    flags.DEFINE_integer("start_n_top", 5, "v2: starts kept by the answerability head's beam search.")
    flags.DEFINE_integer("end_n_top", 5, "v2: ends kept per start.")
    flags.DEFINE_integer("train_batch_size", d.train_batch_size, "Training batch (windows).")
    flags.DEFINE_integer("eval_batch_size", d.eval_batch_size, "Predict batch.")
    flags.DEFINE_float("learning_rate", d.learning_rate, "Peak learning rate.")
    flags.DEFINE_integer("train_step", d.train_step, "Optimizer steps.")
    flags.DEFINE_integer("warmup_step", d.warmup_step, "Linear warmup steps.")
    flags.DEFINE_integer("save_checkpoints_steps", d.save_checkpoints_steps, "Evaluate (and keep the best) every N.")
    flags.DEFINE_enum("optimizer", d.optimizer, ["adamw", "lamb"], "As the original.")
    flags.DEFINE_integer("seed", d.seed, "Seed of head init and data order.")
    flags.mark_flags_as_required(["output_dir"])


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
        optimizer=FLAGS.optimizer, seed=FLAGS.seed)
    try:
        summary = run(FLAGS.version, settings, FLAGS.spm_model_file, FLAGS.train_file, FLAGS.predict_file,
                      FLAGS.albert_config_file, FLAGS.init_checkpoint, FLAGS.do_train, FLAGS.do_predict,
                      FLAGS.doc_stride, FLAGS.max_query_length, FLAGS.n_best_size, FLAGS.max_answer_length,
                      FLAGS.do_lower_case, FLAGS.start_n_top, FLAGS.end_n_top, FLAGS.vocab_file)
    except (squad.SquadDataError, finetuning.FineTuneError, CheckpointError, ConfigError, ModelFileError,
            TokenizerError) as error:
        sys.exit(f"error: {error}")
    print(json.dumps({k: v for k, v in summary.items() if k != "history"}, indent=2))


if __name__ == "__main__":
    from absl import app

    define_flags()
    app.run(main)
