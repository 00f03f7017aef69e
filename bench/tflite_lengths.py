"""TFLite batch 1 at a sentence's real length against the fixed-128 file (issue 39: ≤ 0.5× its latency).

    python bench/tflite_lengths.py --work /tmp/tflite_lengths --output bench/results/tflite_lengths.json

albert_base shapes (configs/albert_base_v2.json), random weights, a 2-class
classifier head; float32 and dynamic-range int8. The request is the
median-length SST-2 dev sentence, tokenised by a 30k SentencePiece model trained
here on the text the data directory holds (cached in --work; fewer pieces if the
text cannot hold 30k, recorded). Each variant is exported
twice: as `export_tflite` writes it (any length up to 128) and with a fixed
`[1, 128]` signature (the files before issue 39). Timed: the fixed file on the
sentence padded to 128, the any-length file at the sentence's own length and
padded to 128. LiteRT's default (XNNPACK) interpreter, --threads threads, the
median of --repeats calls after one warm-up, rounds interleaved. The JSON holds
the CPU kind and flags (/proc/cpuinfo) beside the timings.
"""

import argparse
import csv
import json
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "bench", "peers"))

from cpu_kind import cpu_kind  # noqa: E402  (bench/peers: stdlib only)

MAX_SEQ = 128


def sst2_sentences(data_dir, split):
    with open(os.path.join(data_dir, "glue", "SST-2", f"{split}.tsv"), encoding="utf-8") as f:
        return [row["sentence"] for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]


def spm_model(work, data_dir):
    """(path, vocabulary size) of a SentencePiece model on WikiText-2 (valid, test), SST-2 train, SQuAD dev
    contexts and RACE dev articles, trained once into `work`: 30k pieces, or the most this text supports."""
    import glob

    from albert_tf.tokenization import preprocess_text
    from data_prep.train_sentencepiece import corpus_sentences, train_sentencepiece

    for vocab_size in (30000, 24000, 20000, 16000):
        path = os.path.join(work, f"spm{vocab_size}.model")
        if os.path.exists(path):
            return path, vocab_size
    wiki = [os.path.join(data_dir, "wikitext2", name) for name in ("valid.txt", "test.txt")]
    sentences = list(corpus_sentences(wiki, "wikitext", lower=True))
    texts = sst2_sentences(data_dir, "train")
    with open(os.path.join(data_dir, "squad_v1.1", "dev-v1.1.json"), encoding="utf-8") as f:
        texts += [p["context"] for a in json.load(f)["data"] for p in a["paragraphs"]]
    for name in glob.glob(os.path.join(data_dir, "race", "dev", "*", "*.txt")):
        with open(name, encoding="utf-8") as f:
            texts.append(json.load(f)["article"])
    sentences += [preprocess_text(line, lower=True) for text in texts for line in text.split("\n") if line.strip()]
    for vocab_size in (30000, 24000, 20000, 16000):  # the text may not hold 30k pieces
        try:
            return train_sentencepiece(sentences, os.path.join(work, f"spm{vocab_size}"), vocab_size), vocab_size
        except ValueError:
            continue
    raise SystemExit("no SentencePiece model of 16k pieces or more trains on this text")


def median_request(spm_path, data_dir):
    """(sentence, packed ids) of the median-length SST-2 dev sentence."""
    from albert_tf.tokenization import SentencePieceTokenizer
    from albert_tf.tokenization.packing import pack_segments

    tokenizer = SentencePieceTokenizer(spm_path)
    rows = []
    for sentence in sst2_sentences(data_dir, "dev"):
        ids, _ = pack_segments(tokenizer.encode(sentence), None, MAX_SEQ, tokenizer.cls_id, tokenizer.sep_id)
        rows.append((len(ids), sentence, ids))
    rows.sort(key=lambda row: row[0])
    length, sentence, ids = rows[len(rows) // 2]
    return sentence, ids, statistics.median(row[0] for row in rows)


def export(work, config):
    """{(quantize, 'any' | 'fixed'): path} of the classifier's files."""
    import keras
    import tensorflow as tf

    from albert_tf import AlbertBackbone
    from albert_tf.export import export_tflite
    from albert_tf.export.tflite import convert_to_tflite
    from albert_tf.models.classifier import AlbertClassifier

    keras.utils.set_random_seed(0)
    model = AlbertClassifier(AlbertBackbone.from_albert_config(config), num_classes=2)
    files = {}
    for quantize in ("none", "dynamic_int8"):
        directory = os.path.join(work, quantize)
        files[(quantize, "any")] = export_tflite(model, directory, quantize, max_seq_length=MAX_SEQ)
        fixed = [{name: tf.TensorSpec([1, MAX_SEQ], tf.int32, name=name) for name in model.input}]
        path = os.path.join(directory, "fixed128.tflite")
        with open(path, "wb") as f:
            f.write(convert_to_tflite(model, fixed, quantize, MAX_SEQ))
        files[(quantize, "fixed")] = path
    return files


def inputs_of(ids, width):
    import numpy as np

    result = {name: np.zeros((1, width), "int32") for name in ("input_ids", "input_mask", "segment_ids")}
    result["input_ids"][0, : len(ids)] = ids
    result["input_mask"][0, : len(ids)] = 1
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="/tmp/albert_tflite_lengths")
    parser.add_argument("--output", default=None, help="JSON file (default: print only)")
    parser.add_argument(
        "--data_dir", default=os.environ.get("ALBERT_TF_DATA", os.path.join(REPO, "..", "shared", "data"))
    )
    parser.add_argument("--config", default=os.path.join(REPO, "configs", "albert_base_v2.json"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    os.makedirs(args.work, exist_ok=True)

    from ai_edge_litert.interpreter import Interpreter

    spm_path, vocab_size = spm_model(args.work, args.data_dir)
    sentence, ids, median_length = median_request(spm_path, args.data_dir)
    files = export(args.work, args.config)
    cases = {
        "fixed_128": lambda quantize: (files[(quantize, "fixed")], MAX_SEQ),
        "any_length_at_128": lambda quantize: (files[(quantize, "any")], MAX_SEQ),
        "any_length_at_real_length": lambda quantize: (files[(quantize, "any")], len(ids)),
    }
    runners = {}
    for quantize in ("none", "dynamic_int8"):
        for case, pick in cases.items():
            path, width = pick(quantize)
            runner = Interpreter(model_path=path, num_threads=args.threads).get_signature_runner("serving_default")
            request = inputs_of(ids, width)
            runner(**request)  # warm-up: allocation, XNNPACK weight packing
            runners[(quantize, case)] = (runner, request)
    times = {key: [] for key in runners}
    for _ in range(args.rounds):  # interleaved, so that a busy spell hits every case alike
        for key, (runner, request) in runners.items():
            for _ in range(args.repeats):
                start = time.perf_counter()
                runner(**request)
                times[key].append(time.perf_counter() - start)
    results = {}
    for quantize in ("none", "dynamic_int8"):
        medians = {case: round(1000 * statistics.median(times[(quantize, case)]), 2) for case in cases}
        medians["ratio_real_length_to_fixed_128"] = round(
            medians["any_length_at_real_length"] / medians["fixed_128"], 3
        )
        results["float32" if quantize == "none" else "dynamic_int8"] = medians
    report = {
        "what": "TFLite batch 1, median-length SST-2 dev sentence, ms (median)",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        **cpu_kind(),
        "config": os.path.basename(args.config),
        "threads": args.threads,
        "repeats_per_round": args.repeats,
        "rounds": args.rounds,
        "spm_vocab_size": vocab_size,
        "sentence": sentence,
        "sentence_pieces_with_cls_sep": len(ids),
        "median_dev_length": median_length,
        "max_seq_length": MAX_SEQ,
        "load_average": os.getloadavg(),
        "results_ms": results,
    }
    text = json.dumps(report, indent=1, ensure_ascii=False)
    print(text)
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
