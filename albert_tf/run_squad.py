"""Fine-tunes ALBERT on SQuAD v1.1 or v2.0 and writes official-format predictions.

    python -m albert_tf.run_squad --version 1.1 --train_file train-v1.1.json --predict_file dev-v1.1.json \
        --albert_config_file albert_base/albert_config.json --spm_model_file albert_base/30k-clean.model \
        --init_checkpoint albert_base/model.ckpt-best --output_dir runs/squad1 --do_train --do_predict \
        --max_seq_length 384 --doc_stride 128 --num_train_epochs 3 --warmup_proportion 0.1 --learning_rate 5e-5

As the original, training runs `int(questions / train_batch_size * num_train_epochs)`
steps with `int(steps * warmup_proportion)` warmup; `--train_step` (and
`--warmup_step`) set the steps directly instead.

Writes `predictions.json` ({id: answer}), `nbest_predictions.json`, for v2
`null_odds.json` and the tuned `null_score_diff_threshold`, and
`eval_results.txt` / `best/` (best dev F1) when `--do_train`. The dev score is
the official evaluation's (EM and F1, same normalisation).

v2.0 trains the original's answerability head (`AlbertSpanQAv2`): the end
conditioned on the start, beam search over `start_n_top` × `end_n_top`
spans, and an answerability logit trained on `is_impossible` (loss
(start + end)/2 + 0.5·answerability). A question gets "" when its null odds
(lowest answerability logit over its windows) is at or above the threshold tuned on
dev, as the original. Predicting with a v1-head model on v2 data uses BERT's null-score rule.
"""

import dataclasses
import json
import logging
import os
from typing import Optional

import keras
import numpy as np
from absl import flags

from albert_tf import finetuning
from albert_tf.cli.app import run_cli
from albert_tf.cli.flags import define_finetune_flags, settings_from_flags
from albert_tf.finetuning import FineTuneSettings
from albert_tf.locking import OutputDirLock
from albert_tf.models.span_qa import AlbertSpanQA
from albert_tf.models.span_qa_answerability import START_POSITIONS, AlbertSpanQAv2
from albert_tf.tasks import squad

FLAGS = flags.FLAGS


@dataclasses.dataclass
class SquadSettings(FineTuneSettings):
    """run_squad's flags."""

    version: str = "1.1"
    train_file: Optional[str] = None
    predict_file: Optional[str] = None
    do_predict: bool = True
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    start_n_top: int = 5
    end_n_top: int = 5


def _prepare(path, tokenizer, settings, is_training, log):
    examples, report = squad.read_examples(path, is_training)
    if report["skipped"]:
        log(f"{path}: skipped {report['skipped']} questions; first: " + "; ".join(report["first_problems"]))
    features = squad.convert_examples(
        examples, tokenizer, settings.max_seq_length, settings.doc_stride, settings.max_query_length, is_training
    )
    return examples, features, squad.feature_arrays(features, settings.max_seq_length), report


def run(settings: SquadSettings) -> dict:
    """The whole job, holding the output directory's lock; returns a summary (also `output_dir/summary.json`)."""
    finetuning.check_max_seq_length(settings.max_seq_length, settings.albert_config_file, settings.init_checkpoint)
    with OutputDirLock(settings.output_dir):
        return _run(settings)


def _run(settings: SquadSettings) -> dict:
    s = settings
    version, predict_file, train_file = s.version, s.predict_file, s.train_file
    if version not in ("1.1", "2.0"):
        raise squad.SquadDataError(f"--version {version}: expected 1.1 or 2.0")
    log = print if settings.verbose else logging.info
    tokenizer = finetuning.tokenizer_for(s)
    os.makedirs(settings.output_dir, exist_ok=True)
    summary = {"task": f"squad{version}"}
    if predict_file:
        examples, features, arrays, report = _prepare(predict_file, tokenizer, s, False, log)
        summary["predict_questions"], summary["predict_windows"] = len(examples), len(features)

    def predict(model):
        outputs = finetuning.predict_logits(model, arrays, settings.eval_batch_size, output=None)
        if "cls_logits" in outputs:
            return squad.decode_v2(
                examples, features, outputs, tokenizer, s.n_best_size, s.max_answer_length, s.end_n_top
            )
        return squad.decode(
            examples,
            features,
            outputs["start_logits"],
            outputs["end_logits"],
            tokenizer,
            s.n_best_size,
            s.max_answer_length,
        )

    def evaluate(model):
        predictions, _, null_diff = predict(model)
        if version == "2.0":
            # Spans alone (every question answered) tell span learning apart from answerability.
            answering_all = squad.evaluate(examples, predictions)
            threshold, _ = squad.best_threshold(examples, predictions, null_diff)
            predictions = squad.apply_threshold(predictions, null_diff, threshold)
            return {
                **squad.evaluate(examples, predictions),
                "null_score_diff_threshold": threshold,
                "HasAns_f1_answering_all": answering_all.get("HasAns_f1", answering_all["f1"]),
            }
        return squad.evaluate(examples, predictions)

    if s.do_train:
        if not train_file or not predict_file:
            raise finetuning.FineTuneError("--do_train needs --train_file and --predict_file (dev picks the best)")
        keras.utils.set_random_seed(settings.seed)
        train_examples, train_features, train_arrays, report = _prepare(train_file, tokenizer, s, True, log)
        summary["train_questions"], summary["train_skipped"] = len(train_examples), report["skipped"]
        settings = finetuning.with_epoch_schedule(settings, len(train_examples))
        summary["train_step"], summary["warmup_step"] = settings.train_step, settings.warmup_step
        starts = np.array([f.start_position for f in train_features], "int32")
        labels = {"start_logits": starts, "end_logits": np.array([f.end_position for f in train_features], "int32")}
        loss = {"start_logits": finetuning.classification_loss, "end_logits": finetuning.classification_loss}
        loss_weights = {"start_logits": 0.5, "end_logits": 0.5}
        backbone = finetuning.build_backbone(s.albert_config_file, s.init_checkpoint, tokenizer, remat=s.remat)
        if version == "2.0":
            # As the original: the end head sees the gold start; windows without the answer are impossible.
            model = AlbertSpanQAv2(backbone, start_n_top=s.start_n_top)
            trained = model.training_model()
            train_arrays[START_POSITIONS] = starts[:, None]
            labels["end_logits"] = labels["end_logits"][:, None]
            labels["cls_logits"] = (starts == 0).astype("float32")
            loss["cls_logits"] = finetuning.binary_loss
            loss_weights["cls_logits"] = 0.5
        else:
            model = trained = AlbertSpanQA(backbone)
        dataset = finetuning.train_dataset(train_arrays, labels, settings.micro_batch_size, settings.seed)
        summary["history"] = finetuning.train(
            trained,
            dataset,
            settings,
            loss,
            evaluate,
            "f1",
            loss_weights=loss_weights,
            inference_model=model,
            tokenizer=tokenizer,
        )["history"]
    if s.do_predict:
        if not predict_file:
            raise finetuning.FineTuneError("--do_predict needs --predict_file")
        source = s.output_dir if s.do_train else s.init_checkpoint
        if source is None:
            raise finetuning.FineTuneError(
                "--do_predict without --do_train needs --init_checkpoint: a run_squad output directory"
            )
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
    define_finetune_flags(SquadSettings(output_dir="", max_seq_length=384), head_dropout=False, schedule="epochs")
    flags.DEFINE_enum("version", "1.1", ["1.1", "2.0"], "SQuAD version.")
    flags.DEFINE_string("train_file", None, "SQuAD JSON for training.")
    flags.DEFINE_string("predict_file", None, "SQuAD JSON to predict (and evaluate: dev).")
    flags.DEFINE_bool("do_predict", False, "Predict --predict_file with the best model.")
    flags.DEFINE_integer("doc_stride", 128, "Pieces between window starts.")
    flags.DEFINE_integer("max_query_length", 64, "Question pieces kept.")
    flags.DEFINE_integer("n_best_size", 20, "Candidates per question.")
    flags.DEFINE_integer("max_answer_length", 30, "Longest answer in pieces.")
    flags.DEFINE_integer("start_n_top", 5, "v2: starts kept by the answerability head's beam search.")
    flags.DEFINE_integer("end_n_top", 5, "v2: ends kept per start.")
    flags.mark_flags_as_required(["output_dir"])


def schedule_settings(
    num_train_epochs: float, warmup_proportion: float, train_step: Optional[int], warmup_step: Optional[int]
) -> dict:
    """FineTuneSettings fields for the schedule flags: epochs as the original, or explicit steps."""
    if train_step is None:
        if warmup_step is not None:
            raise finetuning.FineTuneError("--warmup_step needs --train_step (else use --warmup_proportion)")
        return {"num_train_epochs": num_train_epochs, "warmup_proportion": warmup_proportion}
    if warmup_step is None:
        warmup_step = int(train_step * warmup_proportion)
    return {"train_step": train_step, "warmup_step": warmup_step}


def main(argv):
    del argv
    schedule = schedule_settings(FLAGS.num_train_epochs, FLAGS.warmup_proportion, FLAGS.train_step, FLAGS.warmup_step)
    for name in ("train_step", "warmup_step"):  # replaced from the epochs once the training set is read
        schedule.setdefault(name, getattr(SquadSettings, name))
    summary = run(settings_from_flags(SquadSettings, **schedule))
    print(json.dumps({k: v for k, v in summary.items() if k != "history"}, indent=2))


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    run_cli(main, define_flags)


if __name__ == "__main__":
    cli()
