"""The paper's ablations at small scale: pretraining runs on WikiText-2, JSON records and plots.

Every run uses the project's own pipeline: `data_prep` (SentencePiece + `pipeline.run`) for the
data, `albert_tf.pretraining.job.pretrain` for pretraining, `albert_tf.pretraining.job.evaluate_checkpoints`
(`run_pretraining --nodo_train`: every kept checkpoint on another eval set) for the evaluations,
`albert_tf.run_classifier.run` for the downstream check.

Data: WikiText-2 valid+test (with `--corpus wikitext2,race,squad` also RACE's dev+test articles and
SQuAD v1.1's dev contexts, 3.3× the words) split by document (every `--heldout_every`-th held out). The
SentencePiece model is trained on the training articles only; data_prep builds SOP and NSP
(`random_next_sentence`) training data from the training articles and SOP and NSP eval data from the
held-out ones, all with the same masking settings.

Studies (all runs share the data, the optimizer settings and, unless named, seed 1):
  * sop_nsp (paper Table 5): SOP-trained vs NSP-trained, `--seeds` seeds, `--headline_steps` steps,
    each checkpoint evaluated on the SOP and the NSP eval sets.
  * sharing (Table 4): all-shared / attention-only / FFN-only / not-shared at E = `--embedding_sizes`[1].
  * embedding (Table 3): E in `--embedding_sizes` (the last = H), all-shared and not-shared.
  * finetune: SST-2 and MRPC dev accuracy from the SOP- and NSP-trained runs of the first seed.
Outputs: `<out>/results/<run>.json` (one record per finished run, written atomically),
`<out>/*.png` (learning curves and final bars) and `<out>/summary.md` (the tables). Rerunning skips
finished runs; an interrupted pretraining run resumes from its last checkpoint in `--work_dir`.

    taskset -c 1 python bench/ablations.py [--work_dir /tmp/albert_ablations] [--out bench/ablations]
"""

import argparse
import dataclasses
import json
import os
import pathlib
import shutil
import time

from _common import REPO

from albert_tf.tokenization import SentencePieceTokenizer

PAPER = {  # ALBERT paper (v6), base-scale numbers for the README tables
    "table5": {  # intra-sentence loss: MLM / NSP / SOP accuracy on the intrinsic tasks
        "none": (54.9, 52.4, 53.3),
        "nsp": (54.5, 90.5, 52.0),
        "sop": (54.0, 78.9, 86.5),
    },
    "table4_e128": {"all": 80.1, "attention": 81.7, "ffn": 79.5, "none": 82.3},  # Avg downstream, E=128
    "table3_shared": {64: 79.8, 128: 80.1, 256: 79.6, 768: 79.8},  # Avg downstream, all-shared
    "table3_not_shared": {64: 81.3, 128: 81.7, 256: 81.8, 768: 82.3},
}
METRICS = ("masked_lm_accuracy", "sentence_order_accuracy", "masked_lm_loss", "sentence_order_loss")
FINETUNE_TASKS = {"sst-2": "SST-2", "mrpc": "MRPC", "rte": "RTE", "cola": "CoLA"}


CORPORA = ("wikitext2", "race", "squad")


def corpus_names(value: str) -> str:
    """`--corpus`: comma-separated names from `CORPORA`, WikiText-2 always among them."""
    names = value.split(",")
    unknown = [name for name in names if name not in CORPORA]
    if unknown or "wikitext2" not in names:
        raise argparse.ArgumentTypeError(f"{value!r}: expected wikitext2 plus any of race, squad (comma-separated)")
    return value


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=os.environ.get("ALBERT_TF_DATA", str(REPO.parent / "shared" / "data")))
    p.add_argument("--work_dir", default="/tmp/albert_ablations", help="data, checkpoints (resumable)")
    p.add_argument("--out", default=str(REPO / "bench" / "ablations"), help="records, plots, summary.md")
    p.add_argument("--config", default=str(REPO / "configs" / "albert_tiny.json"), help="the base model")
    p.add_argument("--hidden_size", type=int, default=64)
    p.add_argument("--intermediate_size", type=int, default=256)
    p.add_argument("--num_hidden_layers", type=int, default=4)
    p.add_argument("--embedding_sizes", default="16,32,64", help="small, medium (sharing study), = H")
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--headline_steps", type=int, default=1500, help="steps of the SOP/NSP runs")
    p.add_argument("--steps", type=int, default=400, help="steps of the sharing and embedding runs")
    p.add_argument("--evals_per_run", type=int, default=5, help="checkpoints evaluated along each run")
    p.add_argument("--eval_batch", type=int, default=128)
    p.add_argument("--eval_examples", type=int, default=1536, help="examples per evaluation (cycles the set)")
    p.add_argument("--seeds", default="1,2", help="seeds of the SOP/NSP pair")
    p.add_argument("--pair_tasks", default="sop,nsp", help="which of the pair to train (one per process/core)")
    p.add_argument("--finetune_steps", type=int, default=250)
    p.add_argument("--finetune_tasks", default="sst-2,mrpc")
    p.add_argument("--vocab_size", type=int, default=8000)
    p.add_argument("--dupe_factor", type=int, default=5, help="training data; the eval data uses 2")
    p.add_argument("--heldout_every", type=int, default=10, help="every N-th article is held out for eval")
    p.add_argument(
        "--corpus",
        default="wikitext2",
        type=corpus_names,
        help="wikitext2, optionally with ,race (RACE dev+test articles) and ,squad (SQuAD v1.1 dev contexts)",
    )
    p.add_argument("--max_documents", type=int, default=0, help="use only the first N articles (tests)")
    p.add_argument("--studies", default="sop_nsp,sharing,embedding,finetune")
    p.add_argument("--plots_only", action="store_true", help="redraw plots and summary from the records")
    return p.parse_args(argv)


# --- data --------------------------------------------------------------------------------------------


def extra_articles(data: str, corpus: str) -> list:
    """RACE articles and SQuAD v1.1 contexts as WikiText-layout articles (title line, one line per paragraph).

    More English documents for the SOP/NSP pair: WikiText-2 valid+test has 124 articles. RACE's
    articles and SQuAD's paragraphs are prose too; they are not fine-tuned on in this study.
    """
    names, articles = corpus.split(","), []
    if "race" in names:
        for path in sorted(pathlib.Path(data, "race").glob("*/*/*.txt")):
            text = json.loads(path.read_text(encoding="utf-8"))["article"]
            title = f" = RACE {path.parent.parent.name} {path.parent.name} {path.stem} = \n"
            articles.append([title] + [f" {p.strip()} \n" for p in text.splitlines() if p.strip()])
    if "squad" in names:
        squad = json.loads(pathlib.Path(data, "squad_v1.1", "dev-v1.1.json").read_text(encoding="utf-8"))
        for article in squad["data"]:
            title = f" = SQuAD {article['title']} = \n"
            articles.append([title] + [f" {p['context'].strip()} \n" for p in article["paragraphs"]])
    return articles


def split_articles(sources, work: pathlib.Path, every: int, max_documents: int, extra=()):
    """WikiText articles (a ` = Title = ` line starts one) and `extra` ones → train.txt and heldout.txt (every N-th)."""
    from data_prep.documents import is_wikitext_title

    train, heldout = work / "text" / "train.txt", work / "text" / "heldout.txt"
    if heldout.exists():
        return str(train), str(heldout)
    articles, current = [], []
    for source in sources:
        with open(source, encoding="utf-8") as f:
            for line in f:
                if is_wikitext_title(line) and current:
                    articles.append(current)
                    current = []
                current.append(line)
    if current:
        articles.append(current)
    articles.extend(extra)
    if max_documents:
        articles = articles[:max_documents]
    train.parent.mkdir(parents=True, exist_ok=True)
    parts = {"train": [], "heldout": []}
    for i, article in enumerate(articles):
        parts["heldout" if i % every == every - 1 else "train"].append("".join(article))
    for name, path in (("train", train), ("heldout", heldout)):  # heldout last: it marks the step done
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(parts[name]), encoding="utf-8")
        os.replace(tmp, path)
    return str(train), str(heldout)


def make_data(args, work: pathlib.Path) -> dict:
    """SentencePiece on the training articles; SOP/NSP train and eval shards (resumable)."""
    from data_prep.pipeline import Settings
    from data_prep.pipeline import run as create_data
    from data_prep.train_sentencepiece import corpus_sentences, train_sentencepiece

    sources = [os.path.join(args.data, "wikitext2", f) for f in ("valid.txt", "test.txt")]
    extra = extra_articles(args.data, args.corpus)
    train_text, heldout_text = split_articles(sources, work, args.heldout_every, args.max_documents, extra)
    spm = work / "spm.model"
    if not spm.exists():
        train_sentencepiece(corpus_sentences([train_text], "wikitext", lower=True), str(work / "spm"), args.vocab_size)
    data = {"spm": str(spm), "text": {"train": train_text, "heldout": heldout_text}}
    for split, text, dupe in (("train", train_text, args.dupe_factor), ("eval", heldout_text, 2)):
        for task in ("sop", "nsp"):
            out = work / "data" / f"{split}_{task}"
            if not (out / "metadata.json").exists():
                shutil.rmtree(out, ignore_errors=True)
                create_data(
                    Settings(
                        input_file=text,
                        output_dir=str(out),
                        tokenizer=SentencePieceTokenizer(str(spm)),
                        input_format="wikitext",
                        max_seq_length=args.seq,
                        dupe_factor=dupe,
                        num_shards=2,
                        random_next_sentence=task == "nsp",
                    )
                )
            data[f"{split}_{task}"] = str(out)
    data["instances"] = {
        k: json.loads((pathlib.Path(v) / "metadata.json").read_text()).get("num_instances")
        for k, v in data.items()
        if k.startswith(("train_", "eval_"))
    }
    return data


def data_stats(work: pathlib.Path) -> dict:
    """Instances and the share of label 1 (swapped / random next) in each data set: the majority baselines."""
    import tensorflow as tf

    stats = {}
    for folder in sorted((work / "data").glob("*_*")):
        if not (folder / "metadata.json").exists():
            continue
        count = ones = 0
        feature = {"next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64)}
        for batch in tf.data.TFRecordDataset(sorted(map(str, folder.glob("*.tfrecord")))).batch(4096):
            labels = tf.io.parse_example(batch, feature)["next_sentence_labels"]
            count += int(labels.shape[0])
            ones += int(tf.reduce_sum(labels))
        stats[folder.name] = {"instances": count, "label_1_share": round(ones / max(count, 1), 4)}
    return stats


# --- runs --------------------------------------------------------------------------------------------


def plan(args) -> list:
    """Every run: name, studies, model (E, sharing), training task, seed, steps."""
    e_small, e_mid, e_h = (int(e) for e in args.embedding_sizes.split(","))
    studies = set(args.studies.split(","))
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = {}

    def add(name, study, e, sharing, task="sop", seed=seeds[0], steps=args.steps):
        run = runs.setdefault(
            name,
            {"name": name, "studies": [], "E": e, "sharing": sharing, "task": task, "seed": seed, "steps": steps},
        )
        run["studies"].append(study)

    if "sop_nsp" in studies:
        for seed in seeds:
            for task in args.pair_tasks.split(","):
                add(f"{task}_seed{seed}", "sop_nsp", e_mid, "all", task, seed, args.headline_steps)
    for sharing in ("all", "attention", "ffn", "none") if "sharing" in studies else ():
        add(f"E{e_mid}_{sharing}", "sharing", e_mid, sharing)
    for sharing in ("all", "none") if "embedding" in studies else ():
        for e in (e_small, e_mid, e_h):
            add(f"E{e}_{sharing}", "embedding", e, sharing)
    return list(runs.values())


def model_config(args, run, work: pathlib.Path) -> str:
    config = json.loads(pathlib.Path(args.config).read_text())
    config.update(
        vocab_size=args.vocab_size,
        embedding_size=run["E"],
        hidden_size=args.hidden_size,
        intermediate_size=args.intermediate_size,
        num_hidden_layers=args.num_hidden_layers,
        max_position_embeddings=max(config["max_position_embeddings"], args.seq),
    )
    if run["sharing"] != "all":
        # attention / ffn: that sublayer follows the group routing (one group: shared by every layer),
        # the other is each layer's own; none: one group per layer as well (BERT-like)
        config["sharing"] = run["sharing"]
        if run["sharing"] == "none":
            config["num_hidden_groups"] = args.num_hidden_layers
    path = work / "configs" / f"{run['name']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2))
    return str(path)


def train_settings(args, run, output_dir, config_file, data):
    from albert_tf.pretraining.settings import PretrainSettings

    steps = run["steps"]
    every = max(1, steps // args.evals_per_run)
    return PretrainSettings(
        output_dir=output_dir,
        input_file=data[f"train_{run['task']}"],
        eval_file=data["eval_sop"],
        albert_config_file=config_file,
        train_batch_size=args.batch,
        eval_batch_size=args.eval_batch,
        max_seq_length=args.seq,
        num_train_steps=steps,
        num_warmup_steps=steps // 10,
        learning_rate=args.lr,
        save_checkpoints_steps=every,
        keep_checkpoint_max=args.evals_per_run + 2,  # keep every checkpoint: each is a curve point
        do_eval=True,
        max_eval_steps=max(1, args.eval_examples // args.eval_batch),
        log_every_steps=max(1, steps // 10),
        seed=run["seed"],
        verbose=False,
        sentence_task=run["task"],  # the NSP runs read NSP data on purpose
    )


def evaluate_on(settings, eval_sets: dict) -> dict:
    """Each kept checkpoint of the run on each of `eval_sets` (curve key → data dir): {step: {key: metrics}}.

    The library's eval-only mode (`run_pretraining --nodo_train`), as a function.
    """
    from albert_tf.pretraining.job import evaluate_checkpoints

    curve = {}
    for key, path in eval_sets.items():
        for step, metrics in evaluate_checkpoints(dataclasses.replace(settings, eval_file=path)).items():
            curve.setdefault(step, {})[key] = {k: round(float(metrics[k]), 5) for k in METRICS}
    return curve


def count_params(config_file) -> int:
    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertBackbone

    return int(AlbertBackbone.from_albert_config(AlbertConfig.from_json_file(config_file)).count_params())


def read_eval_results(output_dir) -> dict:
    """`eval_results.txt` (pretrain's evaluations at each checkpoint) by step, the last line of a step winning."""
    curve = {}
    with open(os.path.join(output_dir, "eval_results.txt")) as f:
        for line in f:
            entry = json.loads(line)
            curve[int(entry["global_step"])] = {k: round(float(entry[k]), 5) for k in METRICS}
    return curve


def write_record(out: pathlib.Path, name: str, record: dict):
    path = out / "results" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2))
    os.replace(tmp, path)


def read_record(out: pathlib.Path, name: str):
    path = out / "results" / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def pretraining_run(args, run, data, work: pathlib.Path, out: pathlib.Path) -> dict:
    from albert_tf.pretraining.job import pretrain
    from albert_tf.tokenization import SentencePieceTokenizer

    config_file = model_config(args, run, work)
    output_dir = str(work / "runs" / run["name"])
    settings = train_settings(args, run, output_dir, config_file, data)
    began = time.time()
    summary = pretrain(settings, tokenizer=SentencePieceTokenizer(data["spm"]))
    train_seconds = time.time() - began
    # The SOP eval set during training (pretrain's own eval); the pair afterwards also on the NSP eval set
    # and on (a slice of) its own training data: "fit" tells "not learnt" from "learnt, not generalized".
    eval_sets = {}
    if "sop_nsp" in run["studies"]:
        eval_sets = {"eval_nsp": data["eval_nsp"], "fit": data[f"train_{run['task']}"]}
    other, params = evaluate_on(settings, eval_sets), count_params(config_file)
    curve = []
    for step, metrics in sorted(read_eval_results(output_dir).items()):
        curve.append({"step": step, "eval_sop": metrics, **other.get(step, {})})
    record = dict(run)
    record.update(
        kind="pretraining",
        config=json.loads(pathlib.Path(config_file).read_text()),
        hidden_size=args.hidden_size,
        params=params,
        batch=args.batch,
        seq=args.seq,
        learning_rate=args.lr,
        output_dir=output_dir,
        resumed_from_step=summary["start_step"],
        train_seconds=round(train_seconds, 1),
        seconds=round(time.time() - began, 1),
        eval_examples=settings.max_eval_steps * settings.eval_batch_size,
        eval_instances=data["instances"],
        curve=curve,
        final=curve[-1] if curve else None,
        train_loss_history=[
            {k: round(float(v), 5) for k, v in h.items() if isinstance(v, (int, float))}
            for h in summary.get("history", [])
        ],
    )
    write_record(out, run["name"], record)
    return record


def finetune_run(args, source: dict, task: str, data, work: pathlib.Path, out: pathlib.Path) -> dict:
    from albert_tf import run_classifier
    from albert_tf.tasks import glue

    name = f"ft_{task}_{source['name']}"
    output_dir = work / "finetune" / name
    shutil.rmtree(output_dir, ignore_errors=True)  # short: an interrupted one starts again
    steps = args.finetune_steps
    began = time.time()
    summary = run_classifier.run(
        run_classifier.ClassifierSettings(
            do_train=True,
            do_eval=True,
            task_name=task,
            data_dir=os.path.join(args.data, "glue", FINETUNE_TASKS[task]),
            output_dir=str(output_dir),
            tokenizer=SentencePieceTokenizer(data["spm"]),
            init_checkpoint=source["output_dir"],
            max_seq_length=args.seq,
            train_batch_size=32,
            eval_batch_size=64,
            learning_rate=1e-4,
            train_step=steps,
            warmup_step=steps // 10,
            save_checkpoints_steps=max(1, steps // 4),
            dropout=0.0,
            seed=source["seed"],
            verbose=False,
        )
    )
    metric = glue.get_task(task).metric
    history = [{k: round(float(v), 5) for k, v in h.items() if isinstance(v, (int, float))} for h in summary["history"]]
    best = max(history, key=lambda h: h[metric])
    record = {
        "name": name,
        "kind": "finetune",
        "studies": ["finetune"],
        "task": task,
        "pretrained": source["name"],
        "metric": metric,
        "best": best,
        "last": history[-1],
        "history": history,
        "steps": steps,
        "seconds": round(time.time() - began, 1),
    }
    write_record(out, name, record)
    return record


# --- plots and tables --------------------------------------------------------------------------------


def pct(x):
    return "–" if x is None else f"{100 * x:.1f}"


def final_metric(record, eval_set, metric):
    final = record.get("final") or {}
    return final.get(f"eval_{eval_set}", {}).get(metric)


def plot(records: dict, out: pathlib.Path, args, stats: dict):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pre = {k: r for k, r in records.items() if r.get("kind") == "pretraining"}
    pair = sorted((r for r in pre.values() if "sop_nsp" in r["studies"]), key=lambda r: (r["task"], r["seed"]))
    written = []
    if pair:
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
        panels = [
            ("sop", "sentence_order_accuracy", "SOP eval set: sentence-order accuracy"),
            ("nsp", "sentence_order_accuracy", "NSP eval set: next-sentence accuracy"),
            ("sop", "masked_lm_accuracy", "MLM accuracy (SOP eval set)"),
        ]
        for ax, (eval_set, metric, title) in zip(axes, panels):
            for r in pair:
                xs = [p["step"] for p in r["curve"]]
                ys = [100 * p[f"eval_{eval_set}"][metric] for p in r["curve"]]
                style = "-" if r["task"] == "sop" else "--"
                color = "tab:blue" if r["task"] == "sop" else "tab:orange"
                ax.plot(
                    xs, ys, style, color=color, marker="o", ms=3, label=f"{r['task'].upper()}-trained, seed {r['seed']}"
                )
                fit = [p.get("fit", {}).get(metric) for p in r["curve"]]
                if eval_set == r["task"] and metric == "sentence_order_accuracy" and None not in fit:
                    # the run's own training data: learnt at all, or learnt but not carried to new articles
                    ax.plot(xs, [100 * y for y in fit], ":", color=color, lw=1, label="  same, on its training data")
            if metric == "sentence_order_accuracy":
                ax.set_ylim(25, 100)  # the same scale as the paper's numbers: chance is not magnified
                ax.axhline(50, color="grey", lw=0.8, ls=":")
                share = stats.get(f"eval_{eval_set}", {}).get("label_1_share")
                if share is not None and abs(share - 0.5) > 0.02:  # the majority class, when it is not ~50%
                    ax.axhline(100 * max(share, 1 - share), color="red", lw=0.8, ls=":", label="majority class")
            ax.set_title(title, fontsize=10)
            ax.set_xlabel("step")
            ax.set_ylabel("%")
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=8)
        axes[1].legend(fontsize=8)
        fig.suptitle("SOP vs NSP (paper Table 5): each model evaluated on held-out SOP and NSP sets")
        fig.tight_layout()
        fig.savefig(out / "sop_vs_nsp_curves.png", dpi=80)
        plt.close(fig)
        written.append("sop_vs_nsp_curves.png")

        fig, ax = plt.subplots(figsize=(7, 4))
        labels = ["MLM", "NSP eval", "SOP eval"]
        cells = [("sop", "masked_lm_accuracy"), ("nsp", "sentence_order_accuracy"), ("sop", "sentence_order_accuracy")]
        for i, task in enumerate(("nsp", "sop")):
            runs = [r for r in pair if r["task"] == task]
            if not runs:
                continue
            means, errs = [], []
            for eval_set, metric in cells:
                values = [100 * final_metric(r, eval_set, metric) for r in runs]
                means.append(sum(values) / len(values))
                errs.append((max(values) - min(values)) / 2)
            xs = [j + (i - 0.5) * 0.38 for j in range(3)]
            ax.bar(xs, means, 0.38, yerr=errs, capsize=3, label=f"{task.upper()}-trained (n={len(runs)} seeds)")
            for x, m in zip(xs, means):
                ax.text(x, m + 1, f"{m:.1f}", ha="center", fontsize=8)
        ax.axhline(50, color="grey", lw=0.8, ls=":")
        ax.set_xticks(range(3), labels)
        ax.set_ylabel("accuracy % (final; bar = seed range)")
        ax.set_title("SOP vs NSP at the last step")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "sop_vs_nsp_bars.png", dpi=80)
        plt.close(fig)
        written.append("sop_vs_nsp_bars.png")

    for study, title in (("sharing", "Cross-layer sharing (Table 4)"), ("embedding", "Embedding size E (Table 3)")):
        runs = [r for r in pre.values() if study in r["studies"]]
        if not runs:
            continue
        order = {"all": 0, "attention": 1, "ffn": 2, "none": 3}
        runs.sort(key=lambda r: (r["E"], order[r["sharing"]]) if study == "embedding" else order[r["sharing"]])
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
        for r in runs:
            xs = [p["step"] for p in r["curve"]]
            axes[0].plot(
                xs, [100 * p["eval_sop"]["masked_lm_accuracy"] for p in r["curve"]], marker="o", ms=3, label=r["name"]
            )
        axes[0].set_title(f"{title}: MLM accuracy (held-out SOP set)", fontsize=10)
        axes[0].set_xlabel("step")
        axes[0].set_ylabel("%")
        axes[0].grid(alpha=0.3)
        axes[0].legend(fontsize=8)
        names = [f"{r['name']}\n{r['params'] / 1e6:.2f}M" for r in runs]
        for ax, (metric, label) in zip(
            axes[1:],
            (("masked_lm_accuracy", "final MLM accuracy %"), ("sentence_order_accuracy", "final SOP accuracy %")),
        ):
            values = [100 * final_metric(r, "sop", metric) for r in runs]
            ax.bar(range(len(runs)), values, color=["tab:blue" if r["sharing"] == "all" else "tab:green" for r in runs])
            for x, v in enumerate(values):
                ax.text(x, v + 0.3, f"{v:.1f}", ha="center", fontsize=8)
            ax.set_xticks(range(len(runs)), names, fontsize=7)
            ax.set_ylim(min(values) - 5, max(values) + 3)
            ax.set_title(label + " (params below)", fontsize=10)
        fig.tight_layout()
        fig.savefig(out / f"{study}.png", dpi=80)
        plt.close(fig)
        written.append(f"{study}.png")
    return written


def summary_tables(records: dict, args, stats: dict) -> str:
    pre = {k: r for k, r in records.items() if r.get("kind") == "pretraining"}
    lines = []
    if stats:
        lines += [
            "### Data: instances and share of label 1 (swapped for SOP, random next for NSP)",
            "",
            "| data set | instances | label 1 share | majority baseline |",
            "|---|---|---|---|",
        ]
        for name, entry in stats.items():
            share = entry["label_1_share"]
            lines.append(f"| {name} | {entry['instances']} | {share:.3f} | {100 * max(share, 1 - share):.1f} |")
        lines.append("")
    pair = [r for r in pre.values() if "sop_nsp" in r["studies"]]
    if pair:
        lines += [
            "### SOP vs NSP (Table 5): final accuracy on the held-out eval sets, mean over seeds (min–max)",
            "",
            "| trained with | seeds | steps | MLM | NSP eval | SOP eval | paper MLM / NSP / SOP |",
            "|---|---|---|---|---|---|---|",
        ]
        for task in ("nsp", "sop"):
            runs = sorted((r for r in pair if r["task"] == task), key=lambda r: r["seed"])
            if not runs:
                continue
            cells = []
            for eval_set, metric in (
                ("sop", "masked_lm_accuracy"),
                ("nsp", "sentence_order_accuracy"),
                ("sop", "sentence_order_accuracy"),
            ):
                values = [100 * final_metric(r, eval_set, metric) for r in runs]
                mean = sum(values) / len(values)
                cells.append(f"{mean:.1f} ({min(values):.1f}–{max(values):.1f})" if len(values) > 1 else f"{mean:.1f}")
            paper = " / ".join(str(v) for v in PAPER["table5"][task])
            seeds = ",".join(str(r["seed"]) for r in runs)
            lines.append(f"| {task.upper()} | {seeds} | {runs[0]['steps']} | " + " | ".join(cells) + f" | {paper} |")
        lines.append("")
        lines += [
            "Per seed (last column: the run's own sentence task on its training data, the part evaluated):",
            "",
            "| run | MLM | NSP eval | SOP eval | minutes | own task, training data |",
            "|---|---|---|---|---|---|",
        ]
        for r in sorted(pair, key=lambda r: (r["task"], r["seed"])):
            fit = ((r.get("final") or {}).get("fit") or {}).get("sentence_order_accuracy")
            lines.append(
                f"| {r['name']} | {pct(final_metric(r, 'sop', 'masked_lm_accuracy'))} | "
                f"{pct(final_metric(r, 'nsp', 'sentence_order_accuracy'))} | "
                f"{pct(final_metric(r, 'sop', 'sentence_order_accuracy'))} | {r['seconds'] / 60:.1f} | {pct(fit)} |"
            )
        lines.append("")
    for study, title, paper_key in (
        ("sharing", "Sharing (Table 4)", "table4_e128"),
        ("embedding", "Embedding size (Table 3)", None),
    ):
        runs = [r for r in pre.values() if study in r["studies"]]
        if not runs:
            continue
        order = {"all": 0, "attention": 1, "ffn": 2, "none": 3}
        runs.sort(key=lambda r: (order[r["sharing"]], r["E"]))
        lines += [
            f"### {title}: final accuracy on the held-out SOP eval set",
            "",
            "| run | E | sharing | params | MLM | SOP | minutes | paper (Avg downstream, base) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in runs:
            if paper_key:
                paper = PAPER[paper_key][r["sharing"]]
            else:
                table = PAPER["table3_shared" if r["sharing"] == "all" else "table3_not_shared"]
                paper = " / ".join(f"E{e}: {v}" for e, v in table.items())
            lines.append(
                f"| {r['name']} | {r['E']} | {r['sharing']} | {r['params'] / 1e6:.2f}M | "
                f"{pct(final_metric(r, 'sop', 'masked_lm_accuracy'))} | "
                f"{pct(final_metric(r, 'sop', 'sentence_order_accuracy'))} | {r['seconds'] / 60:.1f} | {paper} |"
            )
        lines.append("")
    ft = sorted(
        (r for r in records.values() if r.get("kind") == "finetune"), key=lambda r: (r["task"], r["pretrained"])
    )
    if ft:
        lines += [
            "### Downstream: dev score after fine-tuning (best of the evaluated checkpoints, and the last)",
            "",
            "| task | pretrained | metric | best dev | last | steps | minutes |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in ft:
            lines.append(
                f"| {r['task']} | {r['pretrained']} | {r['metric']} | {pct(r['best'][r['metric']])} "
                f"(step {r['best'].get('global_step')}) | {pct(r['last'][r['metric']])} | {r['steps']} | "
                f"{r['seconds'] / 60:.1f} |"
            )
        lines.append("")
    return "\n".join(lines)


def load_records(out: pathlib.Path) -> dict:
    folder = out / "results"
    if not folder.is_dir():
        return {}
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def main(argv=None):
    args = parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.plots_only:
        import tensorflow as tf

        try:  # one core per study (the runs compare with each other, not with other jobs)
            tf.config.threading.set_intra_op_parallelism_threads(1)
            tf.config.threading.set_inter_op_parallelism_threads(1)
        except RuntimeError:  # TF already running in this process (the test): its threads stay
            pass
        work = pathlib.Path(args.work_dir)
        work.mkdir(parents=True, exist_ok=True)
        began = time.time()
        data = make_data(args, work)
        print(f"data ready ({time.time() - began:.0f}s): {data['instances']}", flush=True)
        runs = plan(args)
        for run in runs:
            record = read_record(out, run["name"])
            if record is None:
                print(f"[{time.strftime('%H:%M:%S')}] {run['name']}: pretraining {run['steps']} steps", flush=True)
                record = pretraining_run(args, run, data, work, out)
                print(
                    f"  done in {record['seconds'] / 60:.1f} min: "
                    + json.dumps({k: v for k, v in record["final"].items() if k != "step"}),
                    flush=True,
                )
            else:
                print(f"{run['name']}: finished before, skipped", flush=True)
            first_seed = int(args.seeds.split(",")[0])
            if "finetune" in args.studies.split(",") and run["name"] == f"nsp_seed{first_seed}":
                # right after the first pair, before the other runs
                for source in (read_record(out, f"sop_seed{first_seed}"), record):
                    for task in args.finetune_tasks.split(","):
                        name = f"ft_{task}_{source['name']}"
                        if read_record(out, name) is None:
                            print(f"[{time.strftime('%H:%M:%S')}] {name}: fine-tuning", flush=True)
                            ft = finetune_run(args, source, task, data, work, out)
                            print(f"  best {ft['metric']} {ft['best'][ft['metric']]:.4f}", flush=True)
                        else:
                            print(f"{name}: finished before, skipped", flush=True)
    work = pathlib.Path(args.work_dir)
    if (work / "data").is_dir() and not (out / "data.json").exists():
        (out / "data.json").write_text(json.dumps(data_stats(work), indent=2))
    records = load_records(out)
    stats = json.loads((out / "data.json").read_text()) if (out / "data.json").exists() else {}
    written = plot(records, out, args, stats)
    (out / "summary.md").write_text(summary_tables(records, args, stats) + "\n")
    print(f"wrote {', '.join(written)} and summary.md to {out}", flush=True)
    return records


if __name__ == "__main__":
    main()
