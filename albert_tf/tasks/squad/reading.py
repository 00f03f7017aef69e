"""Reading SQuAD v1.1 / v2.0 JSON into examples: whitespace words with their character offsets.

Bad questions are skipped and reported (`file: question id: why`); duplicate ids and
answers outside their context are refused, as the official evaluation would miscount them.
"""

import dataclasses
import json
import re
from typing import Dict, List, Optional, Tuple

import numpy as np

from albert_tf.errors import AlbertError
from albert_tf.tasks.text_files import decode_replacing


class SquadDataError(AlbertError, ValueError):
    """A SQuAD file that cannot be used; the message names the file and question ids."""


@dataclasses.dataclass
class SquadExample:
    qas_id: str
    question: str
    context: str
    words: List[str]
    word_starts: List[int]  # character offset of each word in `context`
    answers: List[str]  # gold texts (all of them, for evaluation)
    start_word: Optional[int] = None  # the first answer's words (training)
    end_word: Optional[int] = None
    answer_text: str = ""
    is_impossible: bool = False


def _split_words(context: str) -> Tuple[List[str], List[int]]:
    words, starts = [], []
    for match in re.finditer(r"\S+", context):
        words.append(match.group())
        starts.append(match.start())
    return words, starts


def read_examples(path: str, is_training: bool) -> Tuple[List[SquadExample], Dict]:
    """Examples of a SQuAD JSON file; malformed questions are skipped and reported.

    Skipped (counted, the first few reported with their id): a question without
    an id or text, a paragraph without a context string, an id seen before
    (its predictions would overwrite the first's), malformed `answers`, and in
    training an answer not found at `answer_start`. Invalid UTF-8 is replaced
    by U+FFFD; the report's `replaced_bytes` counts it.
    """
    try:
        with open(path, "rb") as f:
            text, replaced = decode_replacing(f.read(), path)
        data = json.loads(text.removeprefix("\ufeff"))  # a BOM, as editors on Windows write
    except (OSError, ValueError, RecursionError) as error:  # RecursionError: arrays nested 1000s deep
        raise SquadDataError(f"{path}: not a SQuAD JSON file ({type(error).__name__}: {error})") from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise SquadDataError(f'{path}: not a SQuAD JSON file (expected an object with a "data" list)')
    examples, problems, skipped, seen = [], [], 0, set()
    for article_index, article in enumerate(data["data"]):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        for paragraph_index, paragraph in enumerate(paragraphs if isinstance(paragraphs, list) else [None]):
            where = f"data[{article_index}].paragraphs[{paragraph_index}]"
            questions = paragraph.get("qas") if isinstance(paragraph, dict) else None
            context = paragraph.get("context") if isinstance(paragraph, dict) else None
            if not isinstance(questions, list) or not isinstance(context, str):
                skipped += max(1, len(questions) if isinstance(questions, list) else 1)
                if len(problems) < 5:
                    problems.append(f'{path}: {where}: needs a "context" string and a "qas" list')
                continue
            words, starts = _split_words(context)
            for qa in questions:
                try:
                    example = _example(qa, context, words, starts, is_training, seen)
                except _BadQuestion as error:
                    skipped += 1
                    if len(problems) < 5:
                        problems.append(f"{path}: {where}: {error}")
                    continue
                seen.add(example.qas_id)
                examples.append(example)
    if not examples:
        raise SquadDataError(f"{path}: no usable question ({skipped} skipped: {'; '.join(problems)})")
    return examples, {"skipped": skipped, "first_problems": problems, "replaced_bytes": replaced}


class _BadQuestion(ValueError):
    """One question read_examples skips; the message says why."""


def _example(qa, context, words, starts, is_training: bool, seen) -> SquadExample:
    if not isinstance(qa, dict) or not isinstance(qa.get("id"), (str, int)) or not isinstance(qa.get("question"), str):
        raise _BadQuestion('a question needs an "id" and a "question" string')
    qas_id = str(qa["id"])
    if qas_id in seen:
        raise _BadQuestion(f"question {qas_id}: duplicate id (its prediction would replace the first's)")
    answers = qa.get("answers", [])
    if not isinstance(answers, list) or not all(
        isinstance(a, dict) and isinstance(a.get("text"), str) and type(a.get("answer_start", 0)) is int
        for a in answers
    ):
        raise _BadQuestion(f'question {qas_id}: "answers" must be a list of {{"text": str, "answer_start": int}}')
    impossible = bool(qa.get("is_impossible", False))
    example = SquadExample(
        qas_id, qa["question"], context, words, starts, [a["text"] for a in answers], is_impossible=impossible
    )
    if is_training and not impossible:
        if not answers or "answer_start" not in answers[0]:
            raise _BadQuestion(f"question {qas_id}: no answer with an answer_start to train on")
        begin, text = answers[0]["answer_start"], answers[0]["text"]
        if begin < 0 or context[begin : begin + len(text)] != text or not text.strip():
            raise _BadQuestion(f"question {qas_id}: answer {text!r} is not at answer_start {begin}")
        example.start_word = int(np.searchsorted(starts, begin, side="right") - 1)
        example.end_word = int(np.searchsorted(starts, begin + len(text) - 1, side="right") - 1)
        example.answer_text = text
    return example
