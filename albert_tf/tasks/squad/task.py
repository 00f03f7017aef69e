"""SQuAD v1.1 / v2.0 as a fine-tuning task: the pieces of this package, in the runner's order.

Alignment: the context is split on whitespace into words (character offsets
kept) and each word is encoded on its own. SentencePiece never lets a piece
cross whitespace, so these pieces are exactly those of the whole context, and
each piece knows its word: answers map to pieces exactly, and predicted
pieces map back to the original characters. Inside a word (e.g. "$5" in
"($5)") the answer span is tightened to the pieces whose text matches the
answer, as BERT's `_improve_answer_span`.
The same holds for WordPiece vocabularies: BERT's basic tokenizer splits
on whitespace before anything else.
"""

import dataclasses
import os
from typing import Dict, List, Optional, Tuple

import numpy as np

from albert_tf.finetuning.base import Baseline, Encoded, ReadReport, Task
from albert_tf.finetuning.losses import binary_loss, classification_loss
from albert_tf.finetuning.settings import FineTuneError
from albert_tf.json_records import write_json
from albert_tf.options import option
from albert_tf.range_checks import check_ranges
from albert_tf.tasks.squad.decoding import apply_threshold, decode, decode_v2
from albert_tf.tasks.squad.evaluation import best_threshold, evaluate
from albert_tf.tasks.squad.reading import SquadDataError, SquadExample, read_examples
from albert_tf.tasks.squad.windows import convert_examples, feature_arrays

VERSIONS = ("1.1", "2.0")


@dataclasses.dataclass
class SquadPredictions:
    """What postprocessing gives: answers (after the v2 threshold), n-best lists, null scores."""

    answers: Dict[str, str]
    nbest: Dict[str, List[Dict]]
    null_scores: Dict[str, float]
    threshold: Optional[float] = None  # v2: tuned on the gold answers, as the original
    spans_only: Optional[Dict[str, str]] = None  # v2: every question answered


@dataclasses.dataclass(frozen=True)
class SquadTask(Task):
    """SQuAD v1.1 / v2.0 as the original `run_squad_v{1,2}.py`.

    Splits: "train" is `train_file`, "dev" is `predict_file`. v1.1 trains
    `AlbertSpanQA`; v2.0 the answerability head `AlbertSpanQAv2` (the end
    conditioned on the gold start; loss (start + end)/2 + 0.5·answerability), and a
    question gets "" when its null score is at or above the threshold tuned on
    the gold answers (the original's `find_best_thresh`). A v1-head model
    predicting v2 data uses BERT's null-score rule.
    """

    version: str = option("1.1", "SQuAD version.", choices=VERSIONS)
    train_file: Optional[str] = option(None, "SQuAD JSON for training.")
    predict_file: Optional[str] = option(None, "SQuAD JSON to predict (and evaluate: dev).")
    doc_stride: int = option(128, "Pieces between window starts.")
    max_query_length: int = option(64, "Question pieces kept.")
    n_best_size: int = option(20, "Candidates per question.")
    max_answer_length: int = option(30, "Longest answer in pieces.")
    start_n_top: int = option(5, "v2: starts kept by the answerability head's beam search.")
    end_n_top: int = option(5, "v2: ends kept per start.")
    metric: str = "f1"

    def __post_init__(self):
        if self.version not in VERSIONS:
            raise SquadDataError(f"--version {self.version}: expected 1.1 or 2.0")
        check_ranges(
            self,
            SquadDataError,
            positive=("doc_stride", "max_query_length", "n_best_size", "max_answer_length", "start_n_top", "end_n_top"),
        )

    def min_seq_length(self):
        if self.min_batch_width() > self.max_query_length + 4:
            return self.start_n_top, f"the answerability head keeps --start_n_top {self.start_n_top} start positions"
        # As BERT's run_squad: else no window holds any of the paragraph.
        return (
            self.max_query_length + 4,
            f"[CLS] question (--max_query_length {self.max_query_length}) [SEP] text [SEP]",
        )

    def min_batch_width(self):
        # v2's answerability head takes the top `start_n_top` start positions of each row.
        return self.start_n_top if self.version == "2.0" else 1

    @property
    def name(self) -> str:
        return f"squad{self.version}"

    def inputs(self, split: str) -> List[str]:
        path, flag = (self.train_file, "train_file") if split == "train" else (self.predict_file, "predict_file")
        if not path:
            raise FineTuneError(f"--{flag} is needed for {'training' if split == 'train' else 'evaluation'}")
        return [path]

    def has_data(self, split: str) -> bool:
        return bool(self.train_file if split == "train" else self.predict_file)

    def read(self, split: str) -> Tuple[List[SquadExample], ReadReport]:
        (path,) = self.inputs(split)
        examples, found = read_examples(path, is_training=split == "train")
        report = ReadReport(path, rows=len(examples) + found["skipped"], skipped=found["skipped"])
        report.first_problems, report.replaced_bytes = found["first_problems"], found["replaced_bytes"]
        return examples, report

    def encode(self, split, examples, tokenizer, max_seq_length, training) -> Encoded:
        windows = convert_examples(
            examples, tokenizer, max_seq_length, self.doc_stride, self.max_query_length, is_training=training
        )
        features, labels = feature_arrays(windows, max_seq_length), None
        if training:
            starts = np.array([w.start_position for w in windows], "int32")
            ends = np.array([w.end_position for w in windows], "int32")
            labels = {"start_logits": starts, "end_logits": ends}
            if self.version == "2.0":
                # As the original: the end head sees the gold start; windows without the answer are impossible.
                features["start_positions"] = starts[:, None]  # AlbertSpanQAv2's START_POSITIONS input
                labels["end_logits"] = ends[:, None]
                labels["cls_logits"] = (starts == 0).astype("float32")
        return Encoded(split, examples, features, labels, rows=windows)

    def build_model(self, backbone, dropout):
        from albert_tf.models.span_qa import AlbertSpanQA
        from albert_tf.models.span_qa_answerability import AlbertSpanQAv2

        if self.version == "2.0":
            return AlbertSpanQAv2(backbone, start_n_top=self.start_n_top)
        return AlbertSpanQA(backbone)

    def training_model(self, model):
        from albert_tf.models.span_qa_answerability import AlbertSpanQAv2

        return model.training_model() if isinstance(model, AlbertSpanQAv2) else model

    def losses(self):
        losses = {"start_logits": classification_loss, "end_logits": classification_loss}
        if self.version == "2.0":
            losses["cls_logits"] = binary_loss
        return losses

    def loss_weights(self):
        weights = {"start_logits": 0.5, "end_logits": 0.5}
        if self.version == "2.0":
            weights["cls_logits"] = 0.5
        return weights

    def postprocess(self, data, outputs, tokenizer) -> SquadPredictions:
        if "cls_logits" in outputs:
            answers, nbest, null = decode_v2(
                data.examples, data.rows, outputs, tokenizer, self.n_best_size, self.max_answer_length, self.end_n_top
            )
        else:
            answers, nbest, null = decode(
                data.examples,
                data.rows,
                outputs["start_logits"],
                outputs["end_logits"],
                tokenizer,
                self.n_best_size,
                self.max_answer_length,
            )
        if self.version != "2.0":
            return SquadPredictions(answers, nbest, null)
        threshold, _ = best_threshold(data.examples, answers, null)
        return SquadPredictions(apply_threshold(answers, null, threshold), nbest, null, threshold, answers)

    def score(self, data, predictions: SquadPredictions) -> Dict[str, float]:
        result = evaluate(data.examples, predictions.answers)
        if predictions.threshold is not None:
            # Spans alone (every question answered) tell span learning apart from answerability.
            spans_only = evaluate(data.examples, predictions.spans_only)
            result["null_score_diff_threshold"] = predictions.threshold
            result["HasAns_f1_answering_all"] = spans_only.get("HasAns_f1", spans_only["f1"])
        return result

    def baseline(self, data) -> Optional[Baseline]:
        """v2.0: answering no question scores the unanswerable questions' share (v1.1 has none to abstain on)."""
        if self.version != "2.0":
            return None
        f1 = evaluate(data.examples, {})["f1"]
        return Baseline("always abstain", "f1", f1, "no question answered", "always_abstain_f1_baseline")

    def write(self, output_dir, data, predictions: SquadPredictions) -> List[str]:
        files = {"predictions.json": predictions.answers, "nbest_predictions.json": predictions.nbest}
        if self.version == "2.0":
            files["null_odds.json"] = predictions.null_scores
        paths = []
        for name, value in files.items():
            paths.append(os.path.join(output_dir, name))
            write_json(paths[-1], value, indent=1, ensure_ascii=False)
        return paths
