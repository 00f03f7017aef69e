"""How much of each GLUE batch is padding, under each way of batching (issue 39's table).

Trains one SentencePiece model (default 27k pieces, ALBERT's ids) on WikiText-2
(valid + test) and the GLUE texts, encodes each GLUE set's train and dev split
as the fine-tuning encoders do (`[CLS] a [SEP] (b [SEP])`, fixed-padded to
`--max_seq_length`), and counts the tokens a model computes:

- `fixed`: every row at `max_seq_length` (today's fine-tuning and evaluation);
- `random_longest`: random batches of `--batch_size`, each padded to its longest
  row (HF's dynamic padding, its default);
- `grouped_longest` / `grouped_buckets`: the batches that
  `albert_tf.inputs.length_batching.train_dataset` serves (pools of
  `--pool_batches` batches sorted by length, batches shuffled), padded to their
  longest row / cut to their bucket (multiples of `--bucket_step`: what it feeds);
- `eval_buckets`: `length_batching.eval_batches` (the whole split sorted, cut
  to buckets), what `predict_in_order` computes.

`mean_pieces` counts [CLS]/[SEP]; `padding_<way>` is the padding share of the
computed tokens; `fewer_<way>` is fixed's tokens / that way's; `per_real_<way>`
is computed tokens per real token. Prints one JSON object.

    ALBERT_TF_DATA=../shared/data python bench/padding.py [--spm_model spm.model]
"""

import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

SETS = ("sst-2", "cola", "sts-b", "mrpc", "rte")


def data_root() -> pathlib.Path:
    return pathlib.Path(os.environ.get("ALBERT_TF_DATA", REPO.parent / "shared" / "data"))


def glue_examples(root):
    from albert_tf.tasks import glue

    examples = {}
    for name in SETS:
        task = glue.task(name, str(root / "glue"))
        for split in ("train", "dev"):
            try:
                examples[(name, split)] = task.read(split)[0]
            except glue.GlueDataError:
                continue  # split not present
    return examples


def train_spm(root, examples, prefix, vocab_size):
    from albert_tf.tokenization import preprocess_text
    from data_prep.train_sentencepiece import corpus_sentences, train_sentencepiece

    def sentences():
        wikitext = [str(root / "wikitext2" / f) for f in ("valid.txt", "test.txt")]
        yield from corpus_sentences(wikitext, "wikitext", lower=True)
        for rows in examples.values():
            for example in rows:
                for text in (example.text_a, example.text_b):
                    if text:
                        yield preprocess_text(text, lower=True)

    return train_sentencepiece(sentences(), prefix, vocab_size=vocab_size, num_threads=1)


def computed_tokens(lengths, batches, buckets=None):
    """Tokens computed for `batches` (lists of row indices), padded to their longest or to its bucket."""
    from albert_tf.inputs.length_batching import bucket_of

    total = 0
    for rows in batches:
        longest = lengths[rows].max()
        width = longest if buckets is None else bucket_of(np.array([longest]), buckets)[0]
        total += int(width) * len(rows)
    return total


def measure(features, batch_size, pool_batches, bucket_step, seed):
    from albert_tf.inputs import length_batching

    max_seq_length = features["input_ids"].shape[1]
    buckets = length_batching.bucket_lengths(max_seq_length, bucket_step)
    lengths = length_batching.true_lengths(features)
    count = len(lengths)
    real = int(lengths.sum())
    order = np.random.default_rng(seed).permutation(count)
    random_batches = [order[b : b + batch_size] for b in range(0, count, batch_size)]
    # One epoch of the training pipeline's batches (its pools span the repeated stream).
    dataset = length_batching.train_dataset(
        features, np.arange(count), batch_size, seed, buckets=buckets, pool_batches=pool_batches
    )
    grouped = [labels["logits"].numpy() for _, labels in dataset.take(count // batch_size)]
    eval_widths = [
        (len(rows), batch["input_ids"].shape[1])
        for rows, batch in length_batching.eval_batches(features, batch_size, buckets=buckets)
    ]
    tokens = {
        "fixed": count * max_seq_length,
        "random_longest": computed_tokens(lengths, random_batches),
        "eval_buckets": sum(n * w for n, w in eval_widths),
    }
    grouped_real = int(sum(lengths[rows].sum() for rows in grouped))
    grouped_tokens = {
        "grouped_longest": computed_tokens(lengths, grouped),
        "grouped_buckets": computed_tokens(lengths, grouped, buckets),
    }
    result = {"examples": count, "mean_pieces": round(float(lengths.mean()), 1)}
    for way, computed in tokens.items():
        result[f"padding_{way}"] = round(1 - real / computed, 3)
        result[f"per_real_{way}"] = round(computed / real, 2)
    # The grouped batches cover count // batch_size · batch_size rows: compared per row.
    fixed_grouped = len(grouped) * batch_size * max_seq_length
    for way, computed in grouped_tokens.items():
        result[f"padding_{way}"] = round(1 - grouped_real / computed, 3)
        result[f"per_real_{way}"] = round(computed / grouped_real, 2)
        result[f"fewer_{way}"] = round(fixed_grouped / computed, 2)
    for way in ("random_longest", "eval_buckets"):
        result[f"fewer_{way}"] = round(tokens["fixed"] / tokens[way], 2)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spm_model", help="a SentencePiece model to use instead of training one")
    # WikiText-2 valid + test and GLUE hold too few distinct pieces for ALBERT's 30,000 (~27,700 at most).
    parser.add_argument("--vocab_size", type=int, default=27000)
    parser.add_argument("--spm_prefix", help="where the trained model goes (<prefix>.model; default: a temp dir)")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--pool_batches", type=int, default=50)
    parser.add_argument("--bucket_step", type=int, default=16)
    parser.add_argument("--seed", type=int, default=12345)
    args = parser.parse_args()

    from albert_tf.tasks import glue
    from albert_tf.tokenization import SentencePieceTokenizer

    root = data_root()
    examples = glue_examples(root)
    started = time.perf_counter()
    prefix = args.spm_prefix or os.path.join(tempfile.mkdtemp(), "glue_wiki")
    spm_model = args.spm_model or train_spm(root, examples, prefix, args.vocab_size)
    spm_seconds = time.perf_counter() - started
    tokenizer = SentencePieceTokenizer(spm_model)
    sets = {}
    for (name, split), rows in examples.items():
        features = glue.encode_examples(rows, tokenizer, args.max_seq_length)
        sets[f"{name} {split}"] = measure(features, args.batch_size, args.pool_batches, args.bucket_step, args.seed)
    print(
        json.dumps(
            {
                "spm_model": spm_model,
                "spm_pieces": tokenizer.vocab_size,
                "spm_train_seconds": None if args.spm_model else round(spm_seconds, 1),
                "max_seq_length": args.max_seq_length,
                "batch_size": args.batch_size,
                "pool_batches": args.pool_batches,
                "bucket_step": args.bucket_step,
                "sets": sets,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
