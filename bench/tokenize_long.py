"""Tokenization time on long texts without spaces (emoji, CJK): it must grow linearly.

Trains a 4,000-piece SentencePiece model on WikiText-2 valid (no emoji, no CJK:
both are out of vocabulary), then times, for texts of 0.1, 1 and 10 MB (UTF-8):

- `python`: `SentencePieceTokenizer.encode` (data_prep, runners);
- `serve_text`: the in-graph path of serving's text signatures, the
  `TFSentencePieceTokenizer` + `ServingEndpoints` packing (max_seq_length 128)
  traced as a `tf.function`, as in an exported SavedModel.

Also records `ids_same` (0.1 MB texts, where the unshortened run is still
affordable): the Python ids with and without the foreign-run shortening, and
serve_text's packed ids against the Python ids truncated. Prints JSON;
`ratio_<large>_<small>` is time(large) / time(small) (linear growth: ~10).

    ALBERT_TF_DATA=../shared/data python bench/tokenize_long.py [--sizes 100000,1000000]
"""

import argparse
import json
import os
import pathlib
import tempfile
import time

from _common import REPO

TEXTS = {
    "emoji": "\U0001f600\U0001f680\U0001f44d",
    "cjk": "\u4e2d\u6587\u5b57\u7b26\u6d4b\u8bd5",
    "emoji_between_words": "word \U0001f600\U0001f600\U0001f600\U0001f600 ",
}


def make_text(kind, size_bytes):
    unit = TEXTS[kind]
    return unit * max(1, size_bytes // len(unit.encode("utf-8")))


def best_of(call, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100000,1000000,10000000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max_seq_length", type=int, default=128)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    import tensorflow as tf
    import tensorflow_text as tf_text

    from albert_tf.serving import ServingEndpoints
    from albert_tf.tokenization import SentencePieceTokenizer, encode_pieces
    from albert_tf.tokenization.tf_sentencepiece import TFSentencePieceTokenizer
    from data_prep.train_sentencepiece import corpus_sentences, train_sentencepiece

    data = pathlib.Path(os.environ.get("ALBERT_TF_DATA", REPO.parent / "shared" / "data"))
    prefix = os.path.join(tempfile.mkdtemp(), "wikitext4k")
    model_file = train_sentencepiece(
        corpus_sentences([str(data / "wikitext2" / "valid.txt")], "wikitext", lower=True), prefix, vocab_size=4000
    )
    python_tok = SentencePieceTokenizer(model_file)
    tf_tok = TFSentencePieceTokenizer(python_tok.model_proto)

    # ServingEndpoints' text path (its `_ids`, then the packing of `_serve_segments`) without a model.
    endpoints = ServingEndpoints.__new__(ServingEndpoints)
    endpoints.tokenizer, endpoints.max_seq_length = tf_tok, args.max_seq_length
    endpoints.special_ids = {"cls": python_tok.cls_id, "sep": python_tok.sep_id, "mask": python_tok.mask_id}
    endpoints.input_specs = {"input_ids": None}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve_text_ids(texts):
        ids = [endpoints._ids(texts)]
        ids = tf_text.RoundRobinTrimmer(args.max_seq_length - 2).trim(ids)
        packed, _ = tf_text.combine_segments(
            ids, start_of_sequence_id=python_tok.cls_id, end_of_segment_id=python_tok.sep_id
        )
        return packed.to_tensor(0)

    serve_text_ids(tf.constant(["warm up"]))
    results = {
        "vocab": "wikitext2 valid, 4000 pieces (emoji and CJK out of vocabulary)",
        "max_seq_length": args.max_seq_length,
        "python": {},
        "serve_text": {},
    }
    for kind in TEXTS:
        for path in ("python", "serve_text"):
            row = {}
            for size in sizes:
                text = make_text(kind, size)
                if path == "python":
                    seconds = best_of(lambda: python_tok.encode(text), args.repeats)
                else:
                    batch = tf.constant([text])
                    seconds = best_of(lambda: serve_text_ids(batch), args.repeats)
                row[f"{size}_bytes_s"] = round(seconds, 4)
            for small, large in zip(sizes, sizes[1:]):
                row[f"ratio_{large}_{small}"] = round(row[f"{large}_bytes_s"] / max(row[f"{small}_bytes_s"], 1e-6), 2)
            results[path][kind] = row
        # The surviving ids, with and without the shortening, at the smallest size.
        text = make_text(kind, sizes[0])
        unshortened = python_tok.convert_tokens_to_ids(encode_pieces(python_tok.sp_model, python_tok.preprocess(text)))
        shortened = python_tok.encode(text)
        served = serve_text_ids(tf.constant([text])).numpy()[0].tolist()
        served = [i for i in served if i != 0][1:-1]  # without [CLS], [SEP] and padding
        results.setdefault("ids_same", {})[kind] = {
            "python_with_vs_without_shortening": unshortened == shortened,
            "serve_text_vs_python_truncated": served == unshortened[: args.max_seq_length - 2],
        }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
