"""Try any model we can load from the command line, before writing code.

    python -m albert_tf.predict --model_dir M --text "The capital of France is [MASK]."
    python -m albert_tf.predict --model_dir runs/mrpc/best --text "A man plays." --text_b "Someone plays."
    python -m albert_tf.predict --model_dir M --input_file lines.txt --output_file emb.npy   # or .jsonl

`--model_dir` is anything `albert_tf.formats.load` reads (ours, TF1,
an HF transformers directory, a keras-hub preset). With `--text`: a
pretraining (MLM) model prints the top-k fillers of each `[MASK]`; a
classifier prints its class probabilities (`--text_b` for pairs; a
one-output regression model prints its score); a bare encoder prints the
pooled embedding. With `--input_file`: the pooled embedding of every line
(batched, with a progress bar) into `--output_file`, `.npy` (float32
`[lines, hidden]`) or JSON lines (`{"text": ..., "embedding": [...]}`).

A classifier fine-tuned with `--early_exit` answers at full depth unless
`--patience` is given: then each row stops once `patience` consecutive
internal classifiers agree (for regression, each score within `--threshold`
of the one before), as the export's `serve_early_exit`
(`albert_tf.models.early_exit.PatientInference`), and the output says how
many layers it used. With `--input_file`, `--patience` classifies every line
into JSON lines (`{"text", "probabilities", "label" | "score", "layers_used"}`).
Tokenization and packing are those of training and serving
(`albert_tf.tokenization`, `albert_tf.inputs.packing`).

Example:

>>> rows = [([2, 7, 3], [0, 0, 0]), ([2, 3], [0, 0])]
>>> batch = pad_batch(rows)
>>> batch["input_ids"].tolist(), batch["input_mask"].tolist()
([[2, 7, 3], [2, 3, 0]], [[1, 1, 1], [1, 1, 0]])
"""

import json
import os
from typing import Dict, List, Optional, Sequence, Tuple

import keras
import numpy as np
from absl import flags

from albert_tf import formats
from albert_tf.cli.app import run_cli
from albert_tf.errors import AlbertError
from albert_tf.file_safety import same_file
from albert_tf.inputs.packing import encode_with_masks, pack_segments
from albert_tf.models.early_exit import AlbertEarlyExitClassifier, PatientInference
from albert_tf.tokenization import TokenizerError

MASK_TEXT = "[MASK]"


class PredictError(AlbertError, ValueError):
    """A request predict cannot serve; the message says why."""


def pad_batch(rows: Sequence[Tuple[List[int], List[int]]]) -> Dict[str, np.ndarray]:
    """(input_ids, segment_ids) rows → int32 arrays padded with 0 to the longest row."""
    length = max(len(ids) for ids, _ in rows)
    batch = {name: np.zeros((len(rows), length), np.int32) for name in ("input_ids", "input_mask", "segment_ids")}
    for row, (ids, segments) in enumerate(rows):
        batch["input_ids"][row, : len(ids)] = ids
        batch["input_mask"][row, : len(ids)] = 1
        batch["segment_ids"][row, : len(ids)] = segments
    return batch


def pack(tokenizer, text: str, text_b: Optional[str], max_seq_length: int, with_masks: bool = False):
    """`[CLS] a [SEP] (b [SEP])` as training packs it; `[MASK]` in the text is the mask id if asked."""
    # Each segment's first max_seq_length ids: all packing keeps, from bounded work.
    if with_masks:
        encode = lambda t: encode_with_masks(tokenizer, t, MASK_TEXT, max_seq_length)  # noqa: E731
    else:
        encode = lambda t: tokenizer.encode(t, max_ids=max_seq_length)  # noqa: E731
    ids_b = encode(text_b) if text_b is not None else None
    return pack_segments(encode(text), ids_b, max_seq_length, tokenizer.cls_id, tokenizer.sep_id)


def fill_mask(
    model, tokenizer, text: str, text_b: Optional[str] = None, top_k: int = 5, max_seq_length: int = 128
) -> List[List[Tuple[str, float]]]:
    """For each `[MASK]`, the `top_k` (piece, probability) of an `AlbertPretrainer`."""
    ids, segments = pack(tokenizer, text, text_b, max_seq_length, with_masks=True)
    positions = [i for i, token in enumerate(ids) if token == tokenizer.mask_id]
    if not positions:
        raise PredictError(f"no {MASK_TEXT} in the text (within the first {max_seq_length} pieces)")
    batch = pad_batch([(ids, segments)])
    batch["masked_lm_positions"] = np.array([positions], np.int32)
    logits = np.asarray(model(batch)["mlm_logits"])[0]
    probabilities = _softmax(logits)
    results = []
    for row in probabilities:
        best = np.argsort(-row, kind="stable")[:top_k]
        pieces = tokenizer.convert_ids_to_tokens(best)
        results.append([(piece, float(row[i])) for piece, i in zip(pieces, best)])
    return results


def classify(model, tokenizer, text: str, text_b: Optional[str] = None, max_seq_length: int = 128):
    """Class probabilities of an `AlbertClassifier` (the raw score for a 1-output regression)."""
    batch = pad_batch([pack(tokenizer, text, text_b, max_seq_length)])
    logits = np.asarray(model(batch)["logits"])[0]
    return logits if logits.shape[-1] == 1 else _softmax(logits)


def check_early_exit_request(model, patience: Optional[int], threshold: Optional[float]) -> None:
    """`--patience`/`--threshold` fit `model` (the export's `serve_early_exit` semantics), or a `PredictError`."""
    if patience is None:
        if threshold is not None:
            raise PredictError("--threshold needs --patience (it is the regression rule of early exit)")
        return
    if not isinstance(model, AlbertEarlyExitClassifier):
        raise PredictError(
            f"--patience: the model ({type(model).__name__}) has no internal classifiers; "
            "fine-tune it with run_classifier --early_exit to exit early"
        )
    if not 1 <= patience <= model.num_exits:
        raise PredictError(
            f"--patience {patience}: must be in [1, {model.num_exits}] "
            f"(the model's {model.num_exits} layer applications; {model.num_exits} is full depth)"
        )
    if not model.is_regression and threshold is not None:
        raise PredictError(
            "--threshold: the model classifies (agreement is the same label); the threshold is for regression"
        )
    if model.is_regression:
        if threshold is None:
            raise PredictError(
                "--patience on a regression model needs --threshold (the largest change between "
                "consecutive scores that still counts as agreeing)"
            )
        if not threshold >= 0 or threshold == float("inf"):
            raise PredictError(f"--threshold {threshold}: must be a finite number ≥ 0")


def classify_early_exit(inference: PatientInference, rows, patience: int, threshold: Optional[float]):
    """Packed rows (`pack`) → (probabilities, or scores for regression, `[rows, C]`; layers used `[rows]`)."""
    outputs = inference(pad_batch(rows), patience=patience, threshold=threshold or 0.0)
    logits = np.asarray(outputs["logits"])
    values = logits if inference.is_regression else _softmax(logits)
    return values, np.asarray(outputs["layers_used"])


def _answer_lines(values: np.ndarray) -> List[str]:
    if values.shape[-1] == 1:
        return [f"score {float(values[0]):.4f}"]
    return [f"class {i}: {p:.4f}" for i, p in enumerate(values)]


def packed_chunks(tokenizer, texts: Sequence[str], batch_size: int, max_seq_length: int, source: str):
    """Yields `(start, texts, packed rows)` per batch; a text the tokenizer refuses names `source:line`."""
    for start in range(0, len(texts), batch_size):
        chunk = texts[start : start + batch_size]
        rows = []
        for number, text in enumerate(chunk, start=start + 1):
            try:
                rows.append(pack(tokenizer, text, None, max_seq_length))
            except TokenizerError as error:
                raise PredictError(f"{source}:{number}: {error}") from None
        yield start, chunk, rows


def write_early_exit_predictions(
    model, tokenizer, texts, path, patience, threshold, batch_size, max_seq_length, progress, source
) -> List[str]:
    """Every line classified with early exit, one JSON line each (written aside, then renamed)."""
    inference = PatientInference(model)
    bar = keras.utils.Progbar(len(texts), unit_name="line") if progress else None
    records = []
    for _, chunk, rows in packed_chunks(tokenizer, texts, batch_size, max_seq_length, source):
        values, layers = classify_early_exit(inference, rows, patience, threshold)
        for text, row, used in zip(chunk, values, layers):
            record = {"text": text}
            if model.is_regression:
                record["score"] = float(row[0])
            else:
                record["probabilities"] = [round(float(p), 6) for p in row]
                record["label"] = int(row.argmax())
            record["layers_used"] = int(used)
            records.append(record)
        if bar is not None:
            bar.add(len(chunk))
    _write_json_lines(path, records)
    average = sum(r["layers_used"] for r in records) / max(len(records), 1)
    return [f"wrote {path} ({len(records)} lines, {average:.2f} of {model.num_exits} layers on average)"]


def embed(
    model,
    tokenizer,
    texts: Sequence[str],
    batch_size: int = 32,
    max_seq_length: int = 128,
    progress: bool = False,
    source: str = "line",
) -> np.ndarray:
    """Pooled outputs `[len(texts), hidden]` (float32) of any model's encoder, in batches.

    A text the tokenizer refuses is a `PredictError` naming `source:line`.
    """
    backbone = getattr(model, "backbone", model)
    out = np.zeros((len(texts), backbone.albert_config.hidden_size), np.float32)
    bar = keras.utils.Progbar(len(texts), unit_name="line") if progress else None
    for start, chunk, rows in packed_chunks(tokenizer, texts, batch_size, max_seq_length, source):
        batch = pad_batch(rows)
        out[start : start + len(chunk)] = np.asarray(backbone(batch)["pooled_output"], np.float32)
        if bar is not None:
            bar.add(len(chunk))
    return out


def write_embeddings(path: str, texts: Sequence[str], vectors: np.ndarray) -> str:
    """`.npy` or JSON lines (any other suffix), written aside then renamed into place."""
    if path.endswith(".npy"):
        _write_aside(path, "wb", lambda f: np.save(f, vectors))
    else:
        records = ({"text": text, "embedding": [float(v) for v in vector]} for text, vector in zip(texts, vectors))
        _write_json_lines(path, records)
    return path


def _write_json_lines(path: str, records) -> None:
    _write_aside(path, "w", lambda f: f.writelines(json.dumps(record) + "\n" for record in records))


def _write_aside(path: str, mode: str, write) -> None:
    """`write(file)` into a hidden partial file beside `path`, renamed into place once complete."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    partial = os.path.join(directory, f".{os.path.basename(path)}.partial")
    try:
        with open(partial, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            write(f)
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    return shifted / shifted.sum(-1, keepdims=True)


def read_lines(path: str) -> List[str]:
    """Lines of a text file (invalid UTF-8 replaced), line breaks dropped, empty lines kept."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return [line.rstrip("\r\n") for line in f]
    except OSError as error:
        raise PredictError(f"--input_file {path}: cannot be read ({error.strerror or error})") from None


def run(
    model_dir,
    text=None,
    text_b=None,
    input_file=None,
    output_file=None,
    top_k=5,
    batch_size=32,
    max_seq_length=128,
    spm_model_file=None,
    vocab_file=None,
    albert_config_file=None,
    do_lower_case=None,
    progress=True,
    patience=None,
    threshold=None,
) -> List[str]:
    """Does what the flags ask; returns the lines to print."""
    if (text is None) == (input_file is None):
        raise PredictError("give exactly one of --text and --input_file")
    if input_file is not None and not output_file:
        raise PredictError("--input_file needs --output_file (.npy, or .jsonl for JSON lines)")
    if input_file is not None and os.path.isdir(output_file):
        raise PredictError(f"--output_file {output_file} is a directory; name a .npy or .jsonl file")
    if input_file is not None and same_file(output_file, input_file):
        raise PredictError(f"--output_file {output_file} is --input_file {input_file}: it would be overwritten")
    if top_k < 1 or batch_size < 1 or max_seq_length < 3:
        raise PredictError("--top_k and --batch_size must be ≥ 1, --max_seq_length ≥ 3")
    if patience is not None and input_file is not None and output_file.endswith(".npy"):
        raise PredictError(f"--output_file {output_file}: --patience writes JSON lines; name a .jsonl file")
    loaded = formats.load(model_dir, albert_config_file, spm_model_file, vocab_file, do_lower_case)
    if loaded.tokenizer is None:
        raise TokenizerError(
            f"{model_dir}: no vocabulary beside the model (spm.model, spiece.model, "
            "assets/tokenizer/vocabulary.spm or vocab.txt); pass --spm_model_file or --vocab_file"
        )
    tokenizer = loaded.tokenizer
    model = loaded.model
    limit = getattr(model, "backbone", model).albert_config.max_position_embeddings
    if max_seq_length > limit:
        raise PredictError(f"--max_seq_length {max_seq_length} exceeds the model's max_position_embeddings={limit}")
    check_early_exit_request(model, patience, threshold)
    if input_file is None:
        try:
            if patience is not None:
                row = pack(tokenizer, text, text_b, max_seq_length)
                values, layers = classify_early_exit(PatientInference(model), [row], patience, threshold)
                return _answer_lines(values[0]) + [f"layers used: {int(layers[0])} of {model.num_exits}"]
            return _predict_text(model, tokenizer, text, text_b, top_k, max_seq_length)
        except TokenizerError as error:
            raise PredictError(f"--text/--text_b: {error}") from None
    texts = read_lines(input_file)
    if patience is not None:
        return write_early_exit_predictions(
            model, tokenizer, texts, output_file, patience, threshold, batch_size, max_seq_length, progress, input_file
        )
    vectors = embed(model, tokenizer, texts, batch_size, max_seq_length, progress, source=input_file)
    return [f"wrote {write_embeddings(output_file, texts, vectors)} ({len(texts)} × {vectors.shape[1]})"]


def _predict_text(model, tokenizer, text, text_b, top_k, max_seq_length) -> List[str]:
    kind = type(model).__name__
    if kind == "AlbertPretrainer":
        lines = []
        for index, candidates in enumerate(fill_mask(model, tokenizer, text, text_b, top_k, max_seq_length)):
            lines.append(f"{MASK_TEXT} {index + 1}:")
            lines += [f"  {piece:<20} {probability:.4f}" for piece, probability in candidates]
        return lines
    if kind == "AlbertClassifier" or isinstance(model, AlbertEarlyExitClassifier):  # early exit: full depth
        return _answer_lines(classify(model, tokenizer, text, text_b, max_seq_length))
    if kind == "AlbertBackbone":
        vector = embed(model, tokenizer, [text], 1, max_seq_length, source="--text")[0]
        return [json.dumps([round(float(v), 6) for v in vector])]
    raise PredictError(
        f"{kind}: --text works with pretraining (MLM) models, classifiers and encoders; "
        "for this model use --input_file for embeddings"
    )


def define_flags():
    flags.DEFINE_string("model_dir", None, "Any model albert_tf.formats reads (ours, TF1, HF dir, keras-hub preset).")
    flags.DEFINE_string("text", None, "Text to predict on ([MASK] marks what an MLM model fills in).")
    flags.DEFINE_string("text_b", None, "Second segment (sentence pairs).")
    flags.DEFINE_string("input_file", None, "Text file, one input per line: writes pooled embeddings.")
    flags.DEFINE_string("output_file", None, "Where --input_file's embeddings go: .npy, or .jsonl for JSON lines.")
    flags.DEFINE_integer("top_k", 5, "Fillers printed per [MASK].")
    flags.DEFINE_integer("batch_size", 32, "Lines per batch for --input_file.")
    flags.DEFINE_integer("max_seq_length", 128, "Pieces per input, [CLS]/[SEP] included (longer is truncated).")
    flags.DEFINE_string("spm_model_file", None, "SentencePiece model (default: the one beside the weights).")
    flags.DEFINE_string("vocab_file", None, "WordPiece vocab.txt instead of a SentencePiece model.")
    flags.DEFINE_string("albert_config_file", None, "Config of a TF1 checkpoint (default: beside it).")
    flags.DEFINE_bool("do_lower_case", None, "Lowercase the text (default: the model's saved setting, else True).")
    flags.DEFINE_integer(
        "patience",
        None,
        "Early exit (a classifier fine-tuned with --early_exit): stop a row once this many consecutive "
        "internal classifiers agree (1..layers; layers = full depth). Default: full depth.",
    )
    flags.DEFINE_float(
        "threshold",
        None,
        "With --patience on a regression model: the largest change between consecutive scores that "
        "still counts as agreeing.",
    )
    flags.mark_flag_as_required("model_dir")


def main(argv):
    del argv
    FLAGS = flags.FLAGS
    lines = run(
        FLAGS.model_dir,
        FLAGS.text,
        FLAGS.text_b,
        FLAGS.input_file,
        FLAGS.output_file,
        FLAGS.top_k,
        FLAGS.batch_size,
        FLAGS.max_seq_length,
        FLAGS.spm_model_file,
        FLAGS.vocab_file,
        FLAGS.albert_config_file,
        FLAGS.do_lower_case,
        patience=FLAGS.patience,
        threshold=FLAGS.threshold,
    )
    print("\n".join(lines))


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    run_cli(main, define_flags)


if __name__ == "__main__":
    cli()
