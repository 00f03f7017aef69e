"""Try any model we can load from the command line, before writing code.

    python -m albert_tf.predict --model_dir M --text "The capital of France is [MASK]."
    python -m albert_tf.predict --model_dir runs/mrpc/best --text "A man plays." --text_b "Someone plays."
    python -m albert_tf.predict --model_dir M --input_file lines.txt --output_file emb.npy   # or .jsonl
    python -m albert_tf.predict --model_dir runs/sst2/best --input_file lines.txt --output_file answers.jsonl

`--model_dir` is anything `albert_tf.formats.load` reads (ours, TF1,
an HF transformers directory, a keras-hub preset). With `--text`: a
pretraining (MLM) model prints the top-k fillers of each `[MASK]`; a
classifier prints its class probabilities (`--text_b` for pairs; a
one-output regression model prints its score); a bare encoder prints the
pooled embedding. With `--input_file` (batched, with a progress bar), into
`--output_file`: a classifier's answer for every line as JSON lines (`{"text",
"probabilities", "label", "label_name"}` or `{"text", "score"}`; `.jsonl`); any
other model's pooled embedding of every line, `.npy` (float32 `[lines, hidden]`)
or `.jsonl` (`{"text": ..., "embedding": [...]}`). Other extensions are refused,
and so is a path among the model's own files.

`--model_dir` may also be a `.tflite` file (`python -m albert_tf.export
--format tflite` or `early_exit_tflite`): it runs as on a phone, one text at a time at its own
length, with the tokenizer and config exported beside it. A classifier prints its
class probabilities (`--input_file`: JSON lines of answers); an encoder its
pooled embedding. The early-exit file takes `--patience` (and `--threshold`) as the model does.

A classifier fine-tuned with `--early_exit` answers at full depth unless
`--patience` is given (`albert_tf.inference` has the rule); the output says
how many layers it used. With `--input_file`, `--patience` classifies every
line into JSON lines (`{"text", "probabilities", "label" | "score", "layers_used"}`).
The prediction itself is `albert_tf.inference.Predictor`'s; this module reads
the flags and writes the answers.
"""

import dataclasses
import json
import os
import sys
from typing import List, Optional

import numpy as np
from absl import flags

from albert_tf.cli.app import run_cli
from albert_tf.cli.flags import define_option_flags, define_vocabulary_flags, given_tokenizer, settings_from_flags
from albert_tf.file_safety import is_inside, same_file
from albert_tf.options import option
from albert_tf.publish import staged_file
from albert_tf.request_checks import PredictError
from albert_tf.run_layout import CONFIG_FILE
from albert_tf.tflite_file import is_tflite_path
from albert_tf.tokenization import TOKENIZER_FILE, Tokenizer, TokenizerError, WordPieceTokenizer

EMBEDDINGS_SUFFIX = ".npy"
DEFAULT_MAX_SEQ_LENGTH = 128
JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")
FILES_READ_BESIDE = (CONFIG_FILE, TOKENIZER_FILE, WordPieceTokenizer.asset_name)  # and any *.model (SentencePiece)


def _answer_lines(values: np.ndarray, names=None) -> List[str]:
    """`score x`, or a line per class: its name (`class i` when the model has none) and probability."""
    if values.shape[-1] == 1:
        return [f"score {float(values[0]):.4f}"]
    names = names or [f"class {i}" for i in range(len(values))]
    return [f"{name}: {p:.4f}" for name, p in zip(names, values)]


def write_embeddings(path: str, texts, vectors: np.ndarray) -> str:
    """`.npy` or JSON lines, written aside then renamed into place."""
    if path.endswith(EMBEDDINGS_SUFFIX):
        _write_aside(path, "wb", lambda f: np.save(f, vectors))
    else:
        records = ({"text": text, "embedding": [float(v) for v in vector]} for text, vector in zip(texts, vectors))
        _write_json_lines(path, records)
    return path


def prediction_records(texts, answers) -> List[dict]:
    """One record a line: the text, its probabilities and label (or score), the layers it used (early exit)."""
    records = []
    for number, text in enumerate(texts):
        record = {"text": text}
        if "scores" in answers:
            record["score"] = float(answers["scores"][number])
        else:
            record["probabilities"] = [round(float(p), 6) for p in answers["probabilities"][number]]
            record["label"] = int(answers["labels"][number])
            if "label_names" in answers:
                record["label_name"] = answers["label_names"][number]
        if "layers_used" in answers:
            record["layers_used"] = int(answers["layers_used"][number])
        records.append(record)
    return records


def _write_json_lines(path: str, records) -> None:
    _write_aside(path, "w", lambda f: f.writelines(json.dumps(record) + "\n" for record in records))


def _write_aside(path: str, mode: str, write) -> None:
    """`write(file)` into a staging file beside `path`, moved into place once complete."""
    encoding = {} if "b" in mode else {"encoding": "utf-8"}
    with staged_file(path) as staging, open(staging, mode, **encoding) as f:
        write(f)


def read_lines(path: str) -> List[str]:
    """Lines of a text file (invalid UTF-8 replaced), line breaks dropped, empty lines kept; none is an error."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line.rstrip("\r\n") for line in f]
    except OSError as error:
        raise PredictError(f"--input_file {path}: cannot be read ({error.strerror or error})") from None
    if not lines:  # nothing to predict; a .tflite model once failed deep inside NumPy on it
        raise PredictError(f"--input_file {path}: is empty (one input per line)")
    return lines


def refuse_writing_into_the_model(output_file: str, model_dir: str) -> None:
    """The output may not replace or sit among the files of the model read (its directory, or its file)."""
    if not os.path.exists(model_dir) and not os.path.exists(model_dir + ".index"):
        return  # loading says what is missing
    from albert_tf import formats  # Keras and TensorFlow load here, after the flags

    resolved = formats.model_directory(model_dir)
    if os.path.isdir(model_dir):
        if is_inside(output_file, resolved):
            raise PredictError(
                f"--output_file {output_file} is inside the model directory {resolved} that --model_dir reads; "
                "write it elsewhere"
            )
        return
    # A model file (.keras, .weights.h5, a TF1 prefix): its shards and the files read beside it.
    model_file, target = os.path.realpath(model_dir), os.path.realpath(output_file)
    beside = os.path.dirname(target) == os.path.dirname(model_file) and (
        os.path.basename(target) in FILES_READ_BESIDE or target.endswith(".model")
    )
    if target == model_file or target.startswith(model_file + ".") or beside:
        raise PredictError(
            f"--output_file {output_file} is a file of the model --model_dir {model_dir} reads: it would be replaced"
        )


def check_output_file(output_file: str, input_file: str, model_dir: str, patience) -> None:
    """Every problem with `--output_file` before the model is loaded."""
    if os.path.isdir(output_file):
        raise PredictError(f"--output_file {output_file} is a directory; name a .npy or .jsonl file")
    if same_file(output_file, input_file):
        raise PredictError(f"--output_file {output_file} is --input_file {input_file}: it would be overwritten")
    refuse_writing_into_the_model(output_file, model_dir)
    suffix = os.path.splitext(output_file)[1].lower()
    if suffix not in (EMBEDDINGS_SUFFIX, *JSON_LINES_SUFFIXES):
        raise PredictError(
            f"--output_file {output_file}: {suffix or 'a file without extension'} is not written; name a .npy "
            "(embeddings) or .jsonl (JSON lines) file"
        )
    if patience is not None and suffix == EMBEDDINGS_SUFFIX:
        raise PredictError(f"--output_file {output_file}: --patience writes JSON lines; name a .jsonl file")


@dataclasses.dataclass(frozen=True)
class PredictSettings:
    """What `python -m albert_tf.predict` is asked (its flags of the same names)."""

    model_dir: str = option(
        help="Any model albert_tf.formats reads (ours, TF1, HF dir, keras-hub preset), or a .tflite file."
    )
    text: Optional[str] = option(None, "Text to predict on ([MASK] marks what an MLM model fills in).")
    text_b: Optional[str] = option(None, "Second segment (sentence pairs).")
    input_file: Optional[str] = option(
        None, "Text file, one input per line: a classifier's answers, else pooled embeddings."
    )
    output_file: Optional[str] = option(
        None, "Where --input_file's results go: .jsonl (JSON lines), or .npy for embeddings."
    )
    top_k: int = option(5, "Fillers printed per [MASK].")
    batch_size: int = option(32, "Lines per batch for --input_file.")
    max_seq_length: Optional[int] = option(
        None,
        f"Pieces per input, [CLS]/[SEP] included (longer is truncated). Default: {DEFAULT_MAX_SEQ_LENGTH}; "
        "a .tflite file's own.",
    )
    tokenizer: Optional[Tokenizer] = None  # a vocabulary given by flag; None: the one beside the weights
    albert_config_file: Optional[str] = option(None, "Config of a TF1 checkpoint (default: beside it).")
    do_lower_case: Optional[bool] = option(None, "Lowercase the text (default: the model's saved setting, else True).")
    progress: bool = True  # a progress bar for --input_file
    patience: Optional[int] = option(
        None,
        "Early exit (a classifier fine-tuned with --early_exit): stop a row once this many consecutive "
        "internal classifiers agree (1..layers; layers = full depth). Default: full depth.",
    )
    threshold: Optional[float] = option(
        None,
        "With --patience on a regression model: the largest change between consecutive scores that "
        "still counts as agreeing.",
    )


def run(model_dir, *args, **options) -> List[str]:
    """`predict` of `model_dir` with `PredictSettings`' other fields, in their order or by name (`text=...`)."""
    return predict(PredictSettings(model_dir, *args, **options))


def predict(settings: PredictSettings) -> List[str]:
    """Does what the settings ask; returns the lines to print (loading's notes go to stderr)."""
    if (settings.text is None) == (settings.input_file is None):
        raise PredictError("give exactly one of --text and --input_file")
    if settings.input_file is not None and not settings.output_file:
        raise PredictError("--input_file needs --output_file (.npy, or .jsonl for JSON lines)")
    if settings.input_file is not None:
        check_output_file(settings.output_file, settings.input_file, settings.model_dir, settings.patience)
    if (
        settings.top_k < 1
        or settings.batch_size < 1
        or (settings.max_seq_length is not None and settings.max_seq_length < 3)
    ):
        raise PredictError("--top_k and --batch_size must be ≥ 1, --max_seq_length ≥ 3")
    from albert_tf.inference import Predictor, TFLitePredictor, check_early_exit_request, is_classifier

    if is_tflite_path(settings.model_dir):
        predictor = TFLitePredictor.load(
            settings.model_dir, settings.max_seq_length, settings.tokenizer, settings.do_lower_case
        )
        return _predict_tflite(predictor, settings)
    max_seq_length = DEFAULT_MAX_SEQ_LENGTH if settings.max_seq_length is None else settings.max_seq_length
    predictor = Predictor.load(
        settings.model_dir, max_seq_length, settings.tokenizer, settings.albert_config_file, settings.do_lower_case
    )
    for note in predictor.notes:
        print(f"note: {note}", file=sys.stderr)
    check_early_exit_request(predictor.model, settings.patience, settings.threshold)
    if settings.input_file is None:
        try:
            return _predict_text(
                predictor, settings.text, settings.text_b, settings.top_k, settings.patience, settings.threshold
            )
        except TokenizerError as error:
            raise PredictError(f"--text/--text_b: {error}") from None
    texts = read_lines(settings.input_file)
    if is_classifier(predictor.model):  # its answers, as for --text; an encoder's are embeddings
        if settings.output_file.endswith(EMBEDDINGS_SUFFIX):
            raise PredictError(
                f"--output_file {settings.output_file}: a classifier answers in JSON lines; name a .jsonl file"
            )
        answers = predictor.predict(
            texts,
            batch_size=settings.batch_size,
            patience=settings.patience,
            threshold=settings.threshold,
            progress=settings.progress,
            source=settings.input_file,
        )
        records = prediction_records(texts, answers)
        _write_json_lines(settings.output_file, records)
        if settings.patience is None:
            return [f"wrote {settings.output_file} ({len(records)} lines)"]
        average = sum(r["layers_used"] for r in records) / max(len(records), 1)
        exits = predictor.model.num_exits
        return [f"wrote {settings.output_file} ({len(records)} lines, {average:.2f} of {exits} layers on average)"]
    vectors = predictor.embed(
        texts, batch_size=settings.batch_size, progress=settings.progress, source=settings.input_file
    )
    return [f"wrote {write_embeddings(settings.output_file, texts, vectors)} ({len(texts)} × {vectors.shape[1]})"]


def _predict_text(predictor, text, text_b, top_k, patience, threshold) -> List[str]:
    from albert_tf import formats
    from albert_tf.inference import MASK_TEXT, is_classifier
    from albert_tf.models.pretrainer import AlbertPretrainer

    model = predictor.model
    texts_b = None if text_b is None else [text_b]
    if patience is not None:
        answers = predictor.predict([text], texts_b, patience=patience, threshold=threshold, source="--text")
        values = answers["logits"][0] if "scores" in answers else answers["probabilities"][0]
        used = f"layers used: {int(answers['layers_used'][0])} of {model.num_exits}"
        return _answer_lines(values, predictor.labels) + [used]
    if isinstance(model, AlbertPretrainer):
        lines = []
        for index, candidates in enumerate(predictor.fill_mask(text, text_b, top_k)):
            lines.append(f"{MASK_TEXT} {index + 1}:")
            lines += [f"  {piece:<20} {probability:.4f}" for piece, probability in candidates]
        return lines
    if is_classifier(model):  # early exit: full depth
        answers = predictor.predict([text], texts_b, source="--text")
        return _answer_lines(
            answers["logits"][0] if "scores" in answers else answers["probabilities"][0], predictor.labels
        )
    if model is formats.backbone_of(model):
        vector = predictor.embed([text], batch_size=1, source="--text")[0]
        return [json.dumps([round(float(v), 6) for v in vector])]
    raise PredictError(
        f"{type(model).__name__}: --text works with pretraining (MLM) models, classifiers and encoders; "
        "for this model use --input_file for embeddings"
    )


def _predict_tflite(predictor, settings: PredictSettings) -> List[str]:
    """A classifier's answers (JSON lines for --input_file; an early-exit file's at --patience, with the layers
    used) or an encoder's pooled embeddings, one text at a time."""
    input_file, output_file, patience = settings.input_file, settings.output_file, settings.patience
    if input_file is None:
        texts, texts_b, source = [settings.text], None if settings.text_b is None else [settings.text_b], "--text"
    else:
        texts, texts_b, source = read_lines(input_file), None, input_file
    if predictor.is_classifier:
        answers = predictor.predict(texts, texts_b, source, patience, settings.threshold)
        if input_file is None:
            values = answers["logits"][0] if "scores" in answers else answers["probabilities"][0]
            used = [f"layers used: {int(answers['layers_used'][0])} of {predictor.num_exits}"] if patience else []
            return _answer_lines(values, predictor.labels) + used
        if output_file.endswith(EMBEDDINGS_SUFFIX):
            raise PredictError(f"--output_file {output_file}: a classifier answers in JSON lines; name a .jsonl file")
        records = prediction_records(texts, answers)
        _write_json_lines(output_file, records)
        if patience is None:
            return [f"wrote {output_file} ({len(texts)} lines)"]
        average = sum(r["layers_used"] for r in records) / max(len(records), 1)
        return [f"wrote {output_file} ({len(records)} lines, {average:.2f} of {predictor.num_exits} layers on average)"]
    if patience is not None:
        raise PredictError(f"--patience: {settings.model_dir} is not a classifier's file")
    vectors = predictor.embed(texts, texts_b, source)
    if input_file is None:
        return [json.dumps([round(float(v), 6) for v in vectors[0]])]
    return [f"wrote {write_embeddings(output_file, texts, vectors)} ({len(texts)} × {vectors.shape[1]})"]


def define_flags():
    define_option_flags(PredictSettings)
    define_vocabulary_flags(" Default: the one beside the weights.", lower_case_flag=False)
    flags.mark_flag_as_required("model_dir")


def main(argv):
    del argv
    print("\n".join(predict(settings_from_flags(PredictSettings, tokenizer=given_tokenizer()))))


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    run_cli(main, define_flags)


if __name__ == "__main__":
    cli()
