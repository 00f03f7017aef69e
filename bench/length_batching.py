"""Evaluation texts/s on SST-2 dev: fixed 128 padding against length-grouped batches.

albert_base_v2 shapes with random weights (the cost does not depend on the
values), one classifier, SST-2 dev's sentences tokenized with `--spm_model`
(e.g. the one bench/padding.py trains; the vocabulary is taken from it) and
encoded as `glue.encode_examples` does, in batches of `--batch_size`:

- `fixed`: `model.predict(features)` on rows padded to `--max_seq_length`
  (today's evaluation and prediction);
- `grouped`: `length_batching.predict_in_order` (sorted, cut to buckets of 16,
  put back in input order).

Tokenization is timed once and added to both (it is the same work). Rounds
alternate the two ways after one warm-up call each (the trace); each round's
texts/s is reported, and `ratio` = best grouped / best fixed. The logits of
both ways are compared too. Prints one JSON object with the CPU's kind and flags.

    ALBERT_TF_DATA=../shared/data python bench/length_batching.py --spm_model /tmp/glue_wiki27k.model
"""

import argparse
import json
import os
import pathlib
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench" / "peers"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
from cpu_kind import cpu_kind  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spm_model", required=True)
    parser.add_argument("--config", default=str(REPO / "configs" / "albert_base_v2.json"))
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="first N dev sentences only (0: all)")
    args = parser.parse_args()

    import keras
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)

    from albert_tf.config import AlbertConfig
    from albert_tf.inputs import length_batching
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.tasks import glue
    from albert_tf.tokenization import SentencePieceTokenizer

    root = pathlib.Path(os.environ.get("ALBERT_TF_DATA", REPO.parent / "shared" / "data"))
    examples, _ = glue.task("sst-2", str(root / "glue")).read("dev")
    examples = examples[: args.limit] if args.limit else examples
    tokenizer = SentencePieceTokenizer(args.spm_model)
    started = time.perf_counter()
    features = glue.encode_examples(examples, tokenizer, args.max_seq_length)
    tokenize_seconds = time.perf_counter() - started

    config = AlbertConfig.from_json_file(args.config)
    fields = {**config.backbone_kwargs(), "vocab_size": tokenizer.vocab_size}
    keras.utils.set_random_seed(0)
    model = AlbertClassifier(AlbertBackbone(**fields), num_classes=2)
    warm = {k: v[: args.batch_size] for k, v in features.items()}
    ways = {
        "fixed": lambda f: model.predict(f, batch_size=args.batch_size, verbose=0)["logits"],
        "grouped": lambda f: length_batching.predict_in_order(model, f, args.batch_size)["logits"],
    }
    for run in ways.values():
        run(warm)  # traces
    texts_per_second = {way: [] for way in ways}
    logits = {}
    for _ in range(args.rounds):
        for way, run in ways.items():
            started = time.perf_counter()
            logits[way] = run(features)
            seconds = time.perf_counter() - started + tokenize_seconds
            texts_per_second[way].append(round(len(examples) / seconds, 2))
    lengths = length_batching.true_lengths(features)
    print(
        json.dumps(
            {
                "texts": len(examples),
                "mean_pieces": round(float(lengths.mean()), 1),
                "batch_size": args.batch_size,
                "threads": args.threads,
                "tokenize_seconds": round(tokenize_seconds, 2),
                "texts_per_second": texts_per_second,
                "ratio": round(max(texts_per_second["grouped"]) / max(texts_per_second["fixed"]), 2),
                "max_abs_logit_difference": float(np.abs(logits["grouped"] - logits["fixed"]).max()),
                "same_argmax": bool((logits["grouped"].argmax(-1) == logits["fixed"].argmax(-1)).all()),
                "tf_version": tf.__version__,
                **cpu_kind(),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
