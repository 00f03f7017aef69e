"""bench/ablations.py at a minuscule scale: records and plots appear, and a rerun skips finished runs."""

import importlib.util
import json
import sys

import pytest

from paths import REPO

pytestmark = pytest.mark.realdata


def load_bench_file(name, file):
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_ablations():
    """bench/ablations.py as a module; bench/ stays off sys.path (its data_prep.py would shadow the package),
    so the scripts' shared preamble, `_common`, is loaded from its file first."""
    if "_common" not in sys.modules:
        load_bench_file("_common", "_common.py")
    return load_bench_file("bench_ablations", "ablations.py")


def tiny_args(real_data, tmp_path):
    return [
        "--data",
        str(real_data),
        "--work_dir",
        str(tmp_path / "work"),
        "--out",
        str(tmp_path / "out"),
        "--max_documents",
        "30",
        "--vocab_size",
        "600",
        "--hidden_size",
        "16",
        "--intermediate_size",
        "32",
        "--num_hidden_layers",
        "2",
        "--embedding_sizes",
        "8,12,16",
        "--seq",
        "32",
        "--batch",
        "8",
        "--headline_steps",
        "20",
        "--evals_per_run",
        "2",
        "--eval_batch",
        "32",
        "--eval_examples",
        "64",
        "--seeds",
        "1",
        "--dupe_factor",
        "1",
        "--studies",
        "sop_nsp",
    ]


@pytest.mark.slow
def test_records_plots_and_resume(real_data, tmp_path, capsys):
    ablations = load_ablations()

    records = ablations.main(tiny_args(real_data, tmp_path))
    out = tmp_path / "out"
    assert set(records) == {"sop_seed1", "nsp_seed1"}
    for name in records:
        record = json.loads((out / "results" / f"{name}.json").read_text())
        assert [p["step"] for p in record["curve"]] == [10, 20]
        for eval_set in ("eval_sop", "eval_nsp", "fit"):  # both held-out sets, and the run's own training data
            assert 0.0 <= record["final"][eval_set]["sentence_order_accuracy"] <= 1.0
            assert 0.0 <= record["final"][eval_set]["masked_lm_accuracy"] <= 1.0
        assert record["params"] > 0 and record["task"] in ("sop", "nsp")
    for png in ("sop_vs_nsp_curves.png", "sop_vs_nsp_bars.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    assert "SOP vs NSP" in (out / "summary.md").read_text()
    # Held-out articles: no article text of the eval split is in the training split.
    train = (tmp_path / "work" / "text" / "train.txt").read_text()
    heldout = (tmp_path / "work" / "text" / "heldout.txt").read_text()
    titles = [line for line in heldout.splitlines() if line.startswith(" = ") and not line.startswith(" = =")]
    assert titles and not any(title in train.splitlines() for title in titles)

    capsys.readouterr()
    before = {p.name: p.stat().st_mtime_ns for p in (out / "results").iterdir()}
    ablations.main(tiny_args(real_data, tmp_path))
    printed = capsys.readouterr().out
    assert printed.count("finished before, skipped") == 2 and "pretraining" not in printed
    assert {p.name: p.stat().st_mtime_ns for p in (out / "results").iterdir()} == before


def test_extra_corpora_read_back_as_documents(real_data, tmp_path):
    """RACE articles and SQuAD contexts, written in WikiText layout, come back through data_prep's reader whole."""
    from data_prep.documents import read_documents

    ablations = load_ablations()
    extra = ablations.extra_articles(str(real_data), "wikitext2,race,squad")
    race = sorted((real_data / "race").glob("*/*/*.txt"))
    squad = json.loads((real_data / "squad_v1.1" / "dev-v1.1.json").read_text())["data"]
    assert len(extra) == len(race) + len(squad)

    train, heldout = ablations.split_articles([], tmp_path, every=10, max_documents=0, extra=extra)
    documents = list(read_documents(train, "wikitext")) + list(read_documents(heldout, "wikitext"))
    assert len(documents) == len(extra)
    # The words of every source document survive (sentence splitting moves only whitespace).
    first_race = json.loads(race[0].read_text())["article"]
    assert " ".join(documents[0]).split() == first_race.split()
    last_squad = " ".join(p["context"] for p in squad[-1]["paragraphs"])
    heldout_or_train = [" ".join(d).split() for d in documents]
    assert last_squad.split() in heldout_or_train
