"""A first small-scale look at the paper's ablations: albert_tiny pretrained on WikiText-2.

Four runs from the same data pipeline and seed, each `--steps` LAMB steps:
  * shared (ALBERT, G=1, sharing=all) on SOP data
  * not shared (sharing=none: every layer its own weights, BERT-style) on SOP data
  * shared on NSP data (`--random_next_sentence`): the SOP-vs-NSP ablation
Prints JSON: per run, the eval curve (masked_lm_accuracy, sentence_order_accuracy),
always on SOP data (the original evaluates on the training files; here all three
runs are measured on the same SOP eval data so they compare).

    python bench/pretrain_small.py [--steps 600] [--data ../shared/data]
"""

import argparse
import json
import os
import pathlib
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from data_prep.pipeline import Settings  # noqa: E402
from data_prep.pipeline import run as create_data  # noqa: E402
from data_prep.train_sentencepiece import corpus_sentences, train_sentencepiece  # noqa: E402

SEQ = 64


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=os.environ.get("ALBERT_TF_DATA", str(REPO.parent / "shared" / "data")))
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()

    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import TrainSettings

    work = pathlib.Path(tempfile.mkdtemp(prefix="bench_pretrain_small_"))
    text = [os.path.join(args.data, "wikitext2", f) for f in ("valid.txt", "test.txt")]
    spm = train_sentencepiece(corpus_sentences(text, "wikitext", lower=True), str(work / "spm"), vocab_size=8000)
    data = {}
    for task, nsp in (("sop", False), ("nsp", True)):
        create_data(
            Settings(
                input_file=",".join(text),
                output_dir=str(work / task),
                spm_model_file=spm,
                input_format="wikitext",
                max_seq_length=SEQ,
                dupe_factor=3,
                num_shards=4,
                random_next_sentence=nsp,
            )
        )
        data[task] = str(work / task)
    config = json.loads((REPO / "configs" / "albert_tiny.json").read_text())
    configs = {}
    for name, sharing in (("shared", None), ("not_shared", "none")):
        c = dict(config)
        if sharing:
            c["sharing"] = sharing
            c["num_hidden_groups"] = c["num_hidden_layers"]
        path = work / f"{name}.json"
        path.write_text(json.dumps(c))
        configs[name] = str(path)
    runs = [("shared_sop", "shared", "sop"), ("not_shared_sop", "not_shared", "sop"), ("shared_nsp", "shared", "nsp")]
    results = {"steps": args.steps, "batch": args.batch, "seq": SEQ, "runs": {}}
    for run_name, config_name, task in runs:
        settings = TrainSettings(
            output_dir=str(work / "runs" / run_name),
            train_batch_size=args.batch,
            max_seq_length=SEQ,
            num_train_steps=args.steps,
            num_warmup_steps=args.steps // 10,
            learning_rate=0.01,
            save_checkpoints_steps=args.steps // 4,
            do_eval=True,
            max_eval_steps=20,
            eval_batch_size=64,
            log_every_steps=args.steps,
            verbose=False,
            eval_at_start=True,
        )
        summary = pretrain(settings, configs[config_name], data[task], eval_file=data["sop"])
        curve = [json.loads(line) for line in open(os.path.join(settings.output_dir, "eval_results.txt"))]
        results["runs"][run_name] = {
            "train_data": task,
            "eval_on_sop": [
                {
                    k: round(v, 4) if isinstance(v, float) else v
                    for k, v in e.items()
                    if k in ("global_step", "masked_lm_accuracy", "sentence_order_accuracy")
                }
                for e in [summary["eval_start"]] + curve
            ],
        }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
