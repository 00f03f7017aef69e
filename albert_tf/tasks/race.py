"""RACE reading and packing, as the original `race_utils.py`.

Reads `data_dir/<split>/<level>/`: the original's `all.txt` (one JSON object
per line) when present, else every `*.txt` file holding one JSON object (the
RACE release's layout). Each of the 4 options becomes `[CLS] article [SEP]
question⊕option [SEP]`: a `_` in the question is replaced by the option (else
the option is appended), the question side keeps its last `max_qa_length`
tokens, the article is cut from the end to fit.

Example:

>>> question_with_option("He was born in _ .", "1990")
'He was born in 1990 .'
>>> question_with_option("Which is right?", "None")
'Which is right? None'
"""

import dataclasses
import glob
import json
import os
from typing import Dict, List, Sequence, Tuple

import numpy as np

from albert_tf.errors import AlbertError
from albert_tf.finetuning.base import Encoded, ReadReport, Task
from albert_tf.finetuning.losses import classification_loss
from albert_tf.json_records import write_json
from albert_tf.options import option
from albert_tf.range_checks import check_ranges
from albert_tf.tasks.early_exit import EarlyExitTask
from albert_tf.tasks.text_files import ReplacedLines, decode_replacing

LEVELS = ("middle", "high")
ANSWERS = "ABCD"


class RaceDataError(AlbertError, ValueError):
    """RACE files that cannot be used; the message names the files."""


@dataclasses.dataclass
class RaceExample:
    example_id: str
    level: str
    article: str
    question: str
    options: List[str]
    label: int


def question_with_option(question: str, option: str) -> str:
    return question.replace("_", option) if "_" in question else " ".join([question, option])


def _records(directory: str, replaced: Dict[str, int]) -> List[Tuple[str, str]]:
    """(location, JSON text) of every record under one level directory.

    Invalid UTF-8 becomes U+FFFD; `replaced[file]` counts it for each file that had any.
    """
    all_file = os.path.join(directory, "all.txt")
    if os.path.isfile(all_file):
        with open(all_file, encoding="utf-8", errors="surrogateescape") as f:
            lines = ReplacedLines(f, all_file)
            records = [(f"{all_file}:{n}", line) for n, line in enumerate(lines, start=1) if line.strip()]
        if lines.replaced:
            replaced[all_file] = lines.replaced
        return records
    records = []
    for path in sorted(glob.glob(os.path.join(directory, "*.txt"))):
        with open(path, "rb") as f:
            text, count = decode_replacing(f.read(), path)
        if count:
            replaced[path] = count
        records.append((path, text))
    return records


def read_examples(data_dir: str, split: str, levels: Sequence[str] = LEVELS) -> Tuple[List[RaceExample], Dict]:
    """Examples of `split`; bad records are skipped and reported (`{"skipped", "first_problems"}`).

    Invalid UTF-8 is replaced by U+FFFD and counted (`replaced_bytes`, `replaced_by_file`).
    """
    examples, problems, skipped, replaced = [], [], 0, {}
    for level in levels:
        directory = os.path.join(data_dir, split, level)
        for location, text in _records(directory, replaced):
            try:
                record = json.loads(text.removeprefix("\ufeff"))
                article, questions = record["article"], record["questions"]
                options, answers = record["options"], record["answers"]
                if not isinstance(article, str) or not isinstance(questions, list):
                    raise TypeError('"article" must be a string and "questions" a list')
                if not (len(questions) == len(options) == len(answers)):
                    raise ValueError("questions, options and answers differ in number")
            except (ValueError, KeyError, TypeError, RecursionError) as error:
                skipped += 1
                if len(problems) < 5:
                    problems.append(f"{location}: {type(error).__name__}: {error}")
                continue
            # One bad question drops that question only: the article's others stay.
            for i, (question, choices, answer) in enumerate(zip(questions, options, answers)):
                if (
                    not isinstance(question, str)
                    or not isinstance(choices, list)
                    or len(choices) != len(ANSWERS)
                    or not all(isinstance(c, str) for c in choices)
                    or not isinstance(answer, str)
                    or answer not in ANSWERS
                ):
                    skipped += 1
                    if len(problems) < 5:
                        problems.append(
                            f"{location}: question {i}: needs a question, 4 option strings and an answer in A-D"
                        )
                    continue
                examples.append(
                    RaceExample(
                        f"{record.get('id', location)}-{i}",
                        level,
                        article,
                        question,
                        list(choices),
                        ANSWERS.index(answer),
                    )
                )
    if not examples:
        raise RaceDataError(
            f"{data_dir}/{split}/{{{','.join(levels)}}}: no usable RACE example "
            f"({skipped} records or questions skipped{': ' + '; '.join(problems) if problems else ''})"
        )
    return examples, {
        "skipped": skipped,
        "first_problems": problems,
        "replaced_bytes": sum(replaced.values()),
        "replaced_by_file": replaced,
    }


def encode_examples(
    examples: List[RaceExample], tokenizer, max_seq_length: int, max_qa_length: int
) -> Dict[str, np.ndarray]:
    """int32 `[N, 4, max_seq_length]` inputs, packed and truncated as the original."""
    shape = (len(examples), len(ANSWERS), max_seq_length)
    features = {name: np.zeros(shape, "int32") for name in ("input_ids", "input_mask", "segment_ids")}
    for i, example in enumerate(examples):
        article = tokenizer.encode(example.article)
        for j, choice in enumerate(example.options):
            # Keep the end of the option side (at most max_qa_length, and never more than fits).
            qa = tokenizer.encode(question_with_option(example.question, choice))[
                -min(max_qa_length, max_seq_length - 3) :
            ]
            context = article[: max(0, max_seq_length - 3 - len(qa))]
            ids = [tokenizer.cls_id] + context + [tokenizer.sep_id] + qa + [tokenizer.sep_id]
            features["input_ids"][i, j, : len(ids)] = ids
            features["input_mask"][i, j, : len(ids)] = 1
            features["segment_ids"][i, j, len(context) + 2 : len(ids)] = 1
    return features


def accuracy_by_level(examples: List[RaceExample], logits) -> Dict[str, float]:
    predictions = np.asarray(logits).argmax(-1)
    correct = predictions == np.array([e.label for e in examples])
    result = {"accuracy": float(correct.mean()), "num_examples": len(examples)}
    for level in LEVELS:
        chosen = np.array([e.level == level for e in examples])
        if chosen.any():
            result[f"accuracy_{level}"] = float(correct[chosen].mean())
    return result


@dataclasses.dataclass(frozen=True)
class RaceTask(Task):
    """RACE as the original `run_race.py`: 4 options scored by `AlbertMultipleChoice`.

    Predictions are written as `<split>_predictions.json` (`{id: "A".."D"}`).
    """

    data_dir: str = option("", "RACE directory with train/dev/test × middle/high.")
    levels: Tuple[str, ...] = LEVELS  # the CLI's --high_only / --middle_only
    max_qa_length: int = option(128, "Question+option tokens kept (the last ones).")
    name: str = "race"
    metric: str = "accuracy"

    def __post_init__(self):
        check_ranges(self, RaceDataError, positive=("max_qa_length",))

    def min_seq_length(self):
        return 5, "[CLS] article [SEP] question and option [SEP]"

    def inputs(self, split: str) -> List[str]:
        return [os.path.join(self.data_dir, split, level) for level in self.levels]

    def read(self, split: str) -> Tuple[List[RaceExample], ReadReport]:
        examples, found = read_examples(self.data_dir, split, self.levels)
        report = ReadReport(os.path.join(self.data_dir, split), rows=len(examples) + found["skipped"])
        report.skipped, report.first_problems = found["skipped"], found["first_problems"]
        report.replaced_bytes = found["replaced_bytes"]
        return examples, report

    def encode(self, split, examples, tokenizer, max_seq_length, training) -> Encoded:
        features = encode_examples(examples, tokenizer, max_seq_length, self.max_qa_length)
        labels = {"logits": np.array([e.label for e in examples], "int32")} if training else None
        return Encoded(split, examples, features, labels)

    def build_model(self, backbone, dropout):
        from albert_tf.models.multiple_choice import AlbertMultipleChoice

        return AlbertMultipleChoice(backbone, num_choices=len(ANSWERS), dropout=dropout)

    def with_early_exit(self) -> EarlyExitTask:
        """RACE with `AlbertEarlyExitMultipleChoice`."""

        def build(backbone, dropout):
            from albert_tf.models.early_exit import AlbertEarlyExitMultipleChoice

            return AlbertEarlyExitMultipleChoice(backbone, num_choices=len(ANSWERS), dropout=dropout)

        return EarlyExitTask(self, build)

    def losses(self):
        return {"logits": classification_loss}

    def train_accuracy(self) -> bool:
        return True

    def postprocess(self, data, outputs, tokenizer) -> np.ndarray:
        return np.asarray(outputs["logits"])

    def score(self, data, predictions) -> Dict[str, float]:
        return accuracy_by_level(data.examples, predictions)

    def metric_names(self) -> List[str]:
        return ["accuracy"] + [f"accuracy_{level}" for level in self.levels]

    def write(self, output_dir, data, predictions) -> List[str]:
        path = os.path.join(output_dir, f"{data.split}_predictions.json")
        answers = {e.example_id: ANSWERS[p] for e, p in zip(data.examples, predictions.argmax(-1))}
        write_json(path, answers, indent=1)
        return [path]
