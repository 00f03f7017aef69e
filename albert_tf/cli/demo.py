"""The built-in demo: `python -m albert_tf.run_pretraining` with no flags (or `python -m albert_tf.demo [DIR]`).

Everything from text that ships with Python, no download: the documents are
`pydoc_data.topics` (the language reference) and the docstrings of the
standard library's modules (read with `ast`, nothing imported). Then, with the
project's own tools: a SentencePiece vocabulary, SOP + n-gram-masked
TFRecords (the Beam job), a few minutes of pretraining of `albert_tiny` on the
CPU, evaluation before and after, and the exports.
"""

import ast
import os
import shutil
import sys
import sysconfig
import time
from pydoc_data import topics

from albert_tf.compute import make_compute
from albert_tf.config import AlbertConfig, shipped_configs_dir
from albert_tf.export import exported_versions
from albert_tf.inputs.shard_reader import resolve_input
from albert_tf.json_records import write_json
from albert_tf.pretraining.job import pretrain
from albert_tf.pretraining.loop import PretrainingLoop
from albert_tf.pretraining.settings import PretrainSettings
from albert_tf.publish import staged_file
from albert_tf.tokenization import SentencePieceTokenizer
from data_prep.documents import split_sentences

DEMO_CONFIG = os.path.join(shipped_configs_dir(), "albert_tiny.json")
SEQ_LENGTH = 64
BATCH_SIZE = 32
MEASURE_STEPS = 20
# What more steps give (README): the demo's figures follow its step count, which follows the machine's speed.
MEASURED = "3,940 steps on 2 AVX-512 cores gave masked_lm_accuracy 0.231, sentence_order_accuracy 0.835"


def _paragraph_sentences(text: str):
    for paragraph in text.split("\n\n"):
        yield from split_sentences(paragraph)


def demo_documents():
    """Documents (lists of sentences) from the Python installation, in a fixed order."""
    for name in sorted(topics.topics):
        sentences = list(_paragraph_sentences(topics.topics[name]))
        if len(sentences) > 1:
            yield sentences
    stdlib = sysconfig.get_paths()["stdlib"]
    for root, dirs, files in os.walk(stdlib):
        dirs[:] = sorted(d for d in dirs if d not in ("test", "tests", "idle_test", "site-packages", "__pycache__"))
        for file in sorted(files):
            if not file.endswith(".py"):
                continue
            try:
                with open(os.path.join(root, file), encoding="utf-8") as f:
                    tree = ast.parse(f.read())
            except (SyntaxError, UnicodeDecodeError, OSError):
                continue
            sentences = []
            for node in [tree] + [
                n for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            ]:
                docstring = ast.get_docstring(node)
                if docstring:
                    sentences.extend(_paragraph_sentences(docstring))
            if len(sentences) > 1:
                yield sentences


def write_corpus(path: str) -> dict:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    documents = sentences = 0
    with staged_file(path) as staging, open(staging, "w", encoding="utf-8") as f:
        for document in demo_documents():
            f.write("\n".join(document) + "\n\n")
            documents += 1
            sentences += len(document)
    return {"documents": documents, "sentences": sentences, "bytes": os.path.getsize(path)}


def run_demo(demo_dir: str, minutes: float = 3.0) -> dict:
    """Builds the corpus, vocabulary and data, pretrains, evaluates, exports; prints a report."""
    # Beam logs while it is imported: import it once the CLI has quieted the libraries.
    from data_prep.pipeline import Settings
    from data_prep.pipeline import run as create_data
    from data_prep.train_sentencepiece import corpus_sentences, train_sentencepiece

    demo_dir = os.path.abspath(demo_dir)
    say = lambda message: print(f"[demo] {message}", flush=True)  # noqa: E731
    config = AlbertConfig.from_json_file(DEMO_CONFIG)
    corpus = os.path.join(demo_dir, "corpus", "python_docs.txt")
    say(f"1/5 corpus from Python's own documentation -> {corpus}")
    stats = write_corpus(corpus)
    say(f"    {stats['documents']} documents, {stats['sentences']} sentences, {stats['bytes'] / 1e6:.1f} MB")
    say(f"2/5 SentencePiece vocabulary ({config.vocab_size} pieces)")
    spm_model = train_sentencepiece(
        corpus_sentences([corpus], "bert", lower=True),
        os.path.join(demo_dir, "vocab", "spm"),
        vocab_size=config.vocab_size,
    )
    say("3/5 SOP + n-gram-masked TFRecords (Apache Beam, local runner)")
    data_dir = os.path.join(demo_dir, "data")
    metadata = create_data(
        Settings(
            input_file=corpus,
            output_dir=data_dir,
            tokenizer=SentencePieceTokenizer(spm_model),
            max_seq_length=SEQ_LENGTH,
            dupe_factor=2,
            num_shards=4,
            max_instances_per_row=3,  # packed rows: short documents would leave much of each row padding
            overwrite=True,
        )
    )
    packing = metadata["counts"]["packing"]
    say(
        f"    {metadata['num_instances']} instances packed into {packing['rows']} rows, {packing['fill']:.0%} text "
        f"(one a row: {packing['fill_one_instance_a_row']:.0%})"
    )
    output_dir = os.path.join(demo_dir, "model")
    train_input = resolve_input(data_dir)
    steps = _steps_for(minutes, train_input)
    settings = PretrainSettings(
        output_dir=output_dir,
        input_file=data_dir,
        albert_config_file=DEMO_CONFIG,
        train_batch_size=BATCH_SIZE,  # the sequence lengths are the data's
        num_train_steps=steps,
        num_warmup_steps=steps // 10,
        learning_rate=0.01,
        optimizer="lamb",
        save_checkpoints_steps=max(steps // 4, 1),
        keep_checkpoint_max=2,
        do_eval=True,
        max_eval_steps=20,
        eval_batch_size=BATCH_SIZE,
        log_every_steps=max(steps // 50, 1),
        eval_at_start=True,
    )
    say(f"4/5 pretraining albert_tiny for {steps} steps (batch {BATCH_SIZE} x {SEQ_LENGTH}, LAMB)")
    start = time.perf_counter()
    summary = pretrain(settings, tokenizer=SentencePieceTokenizer(spm_model), data=train_input)
    # Run again once complete, the run's exports are already there.
    summary["outputs"].update(exported_versions(output_dir, summary["end_step"], SEQ_LENGTH))
    before, after = summary["eval_start"], summary["eval"]
    say(
        "    before training: masked_lm_accuracy {masked_lm_accuracy:.3f}, "
        "sentence_order_accuracy {sentence_order_accuracy:.3f}".format(**before)
    )
    say(
        "5/5 after {steps} steps ({minutes:.1f} min): masked_lm_accuracy {masked_lm_accuracy:.3f}, "
        "sentence_order_accuracy {sentence_order_accuracy:.3f}".format(
            steps=steps, minutes=(time.perf_counter() - start) / 60, **after
        )
    )
    report = demo_report(demo_dir, corpus, spm_model, data_dir, output_dir, summary, steps)
    write_json(os.path.join(demo_dir, "demo_report.json"), report)
    for line in closing_lines(report, minutes):
        say(line)
    return report


def demo_report(demo_dir, corpus, spm_model, data_dir, output_dir, summary, steps) -> dict:
    """What the demo made and measured (`demo_report.json`)."""
    return {
        "demo_dir": demo_dir,
        "corpus": corpus,
        "spm_model": spm_model,
        "data": data_dir,
        "model_dir": output_dir,
        "checkpoints": os.path.join(output_dir, "checkpoints"),
        "final": summary["outputs"]["final"],
        "saved_models": [summary["outputs"][k] for k in summary["outputs"] if k.startswith("saved_model")],
        # The run directory: TensorBoard shows its train/ and eval/ together.
        "tensorboard": f"tensorboard --logdir {output_dir}",
        "before": summary["eval_start"],
        "after": summary["eval"],
        "steps": steps,
    }


def closing_lines(report: dict, minutes: float) -> list:
    """The demo's last lines: where everything is, what its figures come from, and what to do next."""
    return [
        "done. Everything is under " + report["demo_dir"],
        *(f"    {key}: {report[key]}" for key in ("data", "checkpoints", "final", "saved_models", "tensorboard")),
        f"These figures come from {report['steps']} steps (what {minutes:g} minutes fit on this machine, 200 at "
        f"least): accuracy follows the step count ({MEASURED}). To train longer: python -m albert_tf.run_pretraining "
        "--demo_minutes 15 --demo_dir <a new directory>.",
        "Next: pretrain on your own corpus: python -m data_prep.train_sentencepiece, then "
        "data_prep.create_pretraining_data, then python -m albert_tf.run_pretraining --input_file ... "
        "--albert_config_file configs/albert_base_v2.json --output_dir ... (README). To fine-tune, start from a "
        "released model, e.g. Google's albert_base (docs/finetuning.md, docs/formats.md): this demo's model, "
        "minutes of albert_tiny, is too weak to learn a task such as SST-2.",
    ]


def _steps_for(minutes: float, train_input) -> int:
    """Steps that fit in `minutes` on this machine, from a short timing run (at least 200)."""
    probe_dir = os.path.join(os.path.dirname(train_input.data.directory), ".timing")
    settings = PretrainSettings(
        output_dir=probe_dir,
        train_batch_size=BATCH_SIZE,
        max_seq_length=SEQ_LENGTH,
        max_predictions_per_seq=train_input.data.max_predictions_per_seq,
        num_train_steps=1000,
        verbose=False,
    )
    loop = PretrainingLoop(make_compute(), AlbertConfig.from_json_file(DEMO_CONFIG), settings, train_input)
    per_step = loop.time_steps(MEASURE_STEPS)
    shutil.rmtree(probe_dir, ignore_errors=True)
    return max(200, int(minutes * 60 * 0.85 / per_step) // 10 * 10)


def cli():
    """`python -m albert_tf.demo [DIR]` (default `albert_tf_demo`)."""
    run_demo(sys.argv[1] if len(sys.argv) > 1 else "albert_tf_demo")


if __name__ == "__main__":
    cli()
