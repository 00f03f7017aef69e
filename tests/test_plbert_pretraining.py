"""PL-BERT pretraining: a tiny PL-BERT trains on phoneme data from WikiText-2, on both backends, packed or not."""

import json
import os
import subprocess
import sys

import pytest
from plbert_helpers import load_the_way_styletts2_does, make_plbert_data, wikitext_corpus

from command_helpers import run_command
from paths import REPO
from pretraining_helpers import cli

CONFIG = str(REPO / "configs" / "plbert_tiny.json")
STEPS, WINDOW = 60, 20


@pytest.fixture(scope="module")
def plbert_data(tmp_path_factory, real_data):
    """~150 lines of WikiText-2 as PL-BERT data, one window a row and packed 4 a row (length 64)."""
    root = tmp_path_factory.mktemp("plbert_pretraining")
    corpus = wikitext_corpus(real_data, root / "wiki.txt", 150)
    made = {}
    for name, extra in (("plain", []), ("packed", ["--max_instances_per_row", 4])):
        flags = ("--objective", "plbert", "--word_vocab_size", 500, "--max_seq_length", 64, "--num_shards", 1)
        result = make_plbert_data(*flags, "--input_file", corpus, "--output_dir", root / name, *extra)
        assert result.returncode == 0, result.stderr[-3000:]
        made[name] = str(root / name)
    return made


def run_args(data, output_dir, **extra):
    args = {
        "input_file": data,
        "albert_config_file": CONFIG,
        "output_dir": output_dir,
        "train_batch_size": 16,
        "num_train_steps": STEPS,
        "num_warmup_steps": 5,
        "learning_rate": 3e-3,
        "log_every_steps": WINDOW,
        "save_checkpoints_steps": STEPS,
        **extra,
    }
    return [f"--{k}={v}" for k, v in args.items()] + ["--noexport"]


def assert_both_losses_fall(history):
    first, last = history[0], history[-1]
    assert [h["step"] for h in history] == [WINDOW, 2 * WINDOW, STEPS]
    assert last["phoneme_loss"] < first["phoneme_loss"] - 0.2, history
    assert last["word_loss"] < first["word_loss"] - 0.2, history
    assert "masked_lm_loss" not in last and "sentence_order_accuracy" not in last


def assert_plbert_export(output_dir, loads_as_styletts2=False):
    export = output_dir / "final" / "plbert"
    assert sorted(p.name for p in export.iterdir()) == ["config.yml", f"step_{STEPS}.t7"]
    if loads_as_styletts2:  # the trained encoder, as StyleTTS 2 reads it, computes what final/ computes
        import numpy as np
        import torch

        from albert_tf import formats

        encoder, missing, unexpected = load_the_way_styletts2_does(str(export))
        assert missing == [] and unexpected == []
        ids = np.random.default_rng(0).integers(1, 178, (2, 16)).astype("int32")
        mask = np.ones_like(ids)
        mask[1, 9:] = 0
        with torch.no_grad():
            theirs = encoder(torch.tensor(ids, dtype=torch.long), attention_mask=torch.tensor(mask)).last_hidden_state
        backbone = formats.backbone_of(formats.load(str(output_dir / "final")).model)
        ours = backbone({"input_ids": ids, "input_mask": mask, "segment_ids": 0 * ids})["sequence_output"]
        np.testing.assert_allclose(theirs.numpy(), np.asarray(ours), atol=1e-5, rtol=0)


@pytest.mark.realdata
@pytest.mark.parametrize("layout", ["plain", "packed"])
def test_a_tiny_plbert_learns_both_tasks_on_tensorflow(plbert_data, tmp_path, layout):
    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import PretrainSettings

    summary = pretrain(
        PretrainSettings(
            output_dir=str(tmp_path),
            input_file=plbert_data[layout],
            albert_config_file=CONFIG,
            train_batch_size=16,
            num_train_steps=STEPS,
            num_warmup_steps=5,
            learning_rate=3e-3,
            log_every_steps=WINDOW,
            save_checkpoints_steps=STEPS,
            do_eval=layout == "packed",  # the eval path once: best/ kept by phoneme_accuracy
            eval_batch_size=16,
            max_eval_steps=2,
            verbose=False,
        )
    )
    assert_both_losses_fall(summary["history"])
    if layout == "packed":
        assert summary["eval"]["phoneme_accuracy"] > 0 and (tmp_path / "best" / "model.keras").is_file()
    assert_plbert_export(tmp_path, loads_as_styletts2=layout == "plain")
    record = json.loads((tmp_path / "checkpoints" / "run_settings.json").read_text())
    assert record["objective"] == "plbert"


@pytest.mark.realdata
@pytest.mark.slow
def test_a_tiny_plbert_learns_on_jax_packed_and_records_its_objective(plbert_data, tmp_path):
    process = cli(["--backend", "jax"] + run_args(plbert_data["packed"], str(tmp_path)))
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
    assert_both_losses_fall(json.loads((tmp_path / "train_summary.json").read_text())["history"])
    assert_plbert_export(tmp_path)
    record = json.loads((tmp_path / "settings.json").read_text())
    assert record["objective"] == "plbert" and record["flags"]["backend"] == "jax"


@pytest.mark.realdata
def test_the_dry_run_plan_names_the_objective_and_the_config_must_fit_the_symbols(plbert_data, tmp_path):
    result = run_command("albert_tf.run_pretraining", run_args(plbert_data["plain"], str(tmp_path), dry_run=True))
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["data"]["objective"] == "plbert"
    config = json.loads((REPO / "configs" / "plbert_tiny.json").read_text())
    config["vocab_size"] = 30000
    (tmp_path / "wrong.json").write_text(json.dumps(config))
    args = run_args(
        plbert_data["plain"], str(tmp_path / "run"), dry_run=True, albert_config_file=tmp_path / "wrong.json"
    )
    refused = run_command("albert_tf.run_pretraining", args)
    assert refused.returncode != 0
    assert (
        refused.stderr.strip()
        .splitlines()[-1]
        .endswith("the data has 178 phoneme symbols (the config's vocab_size is 30000)")
    )


@pytest.mark.realdata
def test_a_resume_on_albert_data_is_refused_in_one_line(plbert_data, pretraining_data, tmp_path):
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    # What a PL-BERT run records beside its checkpoints (batch_binding.record_batch).
    (checkpoints / "run_settings.json").write_text(
        json.dumps({"train_batch_size": 16, "grad_accum_steps": 1, "backend": "tensorflow", "objective": "plbert"})
    )
    result = run_command("albert_tf.run_pretraining", run_args(pretraining_data["data"], str(tmp_path), dry_run=True))
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert "was trained on plbert data, this data is albert data" in last, result.stderr[-2000:]


def test_the_health_monitor_speaks_of_the_phoneme_task_on_plbert_runs():
    from albert_tf.pretraining.health import HealthMonitor, HealthSettings
    from albert_tf.pretraining.objectives import PLBERT

    monitor = HealthMonitor(HealthSettings(learning_window_steps=40), "warn")
    flat = {"phoneme_loss": 5.0, "phoneme_accuracy": 0.3, "word_loss": 6.0, "word_accuracy": 0.2}
    window = {"phoneme_weight": 1000.0}
    assert PLBERT.health_window(monitor, 20, 20, flat, window) == ([], None)
    lines, _ = PLBERT.health_window(monitor, 60, 20, flat, window)
    assert lines and lines[0].startswith("health: the run is not learning: phoneme_loss 5.0000 at step 20")
    _, collapse = PLBERT.health_window(monitor, 80, 20, {**flat, "phoneme_accuracy": 0.01}, window)
    assert collapse.kind == "accuracy collapse" and "phoneme_accuracy 0.010" in collapse.message


@pytest.mark.realdata
def test_masks_are_deterministic_and_a_resume_that_skips_batches_gets_the_same_ones(plbert_data):
    import numpy as np

    from albert_tf.inputs.shard_reader import pretraining_dataset, resolve_input
    from albert_tf.pretraining.objectives import PLBERT

    source = resolve_input(plbert_data["packed"])

    def third_batch(skip, seed=7):
        batches = PLBERT.batches(source.data, seed)
        dataset = pretraining_dataset(source, 8, seed=seed, skip_batches=skip, make_batches=batches)
        return list(dataset.skip(2 - skip).take(1))[0]

    (inputs, labels), (resumed_inputs, resumed_labels) = third_batch(0), third_batch(2)
    for got, want in ((resumed_inputs, inputs), (resumed_labels, labels)):
        for key in want:
            np.testing.assert_array_equal(got[key].numpy(), want[key].numpy(), err_msg=key)
    assert labels["phoneme_weights"].numpy().sum() > 0
    other_inputs, _ = third_batch(0, seed=8)
    assert not np.array_equal(other_inputs["input_ids"].numpy(), inputs["input_ids"].numpy())


@pytest.mark.realdata
@pytest.mark.slow
def test_the_plbert_benchmark_smoke_runs_ours_and_the_reference_on_real_phonemes(real_data, tmp_path):
    """`bench/plbert_step.py --smoke`: WikiText-2 phonemized, ours (JAX, padded and packed) and the
    reference's torch model each take steps on the same masked rows; the report has the ratios."""
    result = subprocess.run(
        [sys.executable, "bench/plbert_step.py", "--smoke", "--batches", str(tmp_path / "batches")],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "ALBERT_TF_DATA": str(real_data)},
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert set(report["summary"]) == {"ours_padded", "ours_packed", "reference"}
    for case in report["summary"].values():
        assert case["real_phonemes_per_step"] > 0 and case["step_s"] > 0
    assert set(report["ratios"]) == {"ours_padded/reference", "ours_packed/reference"}
    kept = sorted(p.name for p in (tmp_path / "batches").iterdir())  # what a GPU machine without TF reads
    assert kept == ["batches.json", "packed.npz", "padded.npz"]


def plbert_dir(directory, word_vocab_size, seed):
    """A PL-BERT directory (the reference's layout) of a tiny model with random weights, at step 700."""
    import numpy as np

    from albert_tf.formats import plbert as plbert_format
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.plbert import PlbertPretrainer

    model = PlbertPretrainer(AlbertBackbone.from_albert_config(CONFIG), word_vocab_size=word_vocab_size)
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(0, 0.2, w.shape).astype("float32") for w in model.get_weights()])
    os.makedirs(directory)
    plbert_format.save_plbert_dir(model, str(directory), step=700)
    return directory


def continue_pretraining(data, init_checkpoint, output_dir):
    """One step from `init_checkpoint` at a learning rate too small to move any weight: what it loaded, exported."""
    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import PretrainSettings

    settings = PretrainSettings(
        output_dir=str(output_dir),
        input_file=data,
        albert_config_file=CONFIG,
        init_checkpoint=str(init_checkpoint),
        train_batch_size=4,
        num_train_steps=1,
        num_warmup_steps=0,
        learning_rate=1e-30,
        save_checkpoints_steps=1,
        export=False,
    )
    pretrain(settings)
    return output_dir / "final" / "plbert" / "step_1.t7"


@pytest.mark.realdata
def test_pretraining_continues_from_a_plbert_directory_and_exports_it_again_bitwise(plbert_data, tmp_path, capsys):
    torch = pytest.importorskip("torch")
    metadata = json.loads(open(os.path.join(plbert_data["plain"], "metadata.json")).read())
    source = plbert_dir(tmp_path / "plbert", metadata["word_vocab_size"], seed=3)
    exported = continue_pretraining(plbert_data["plain"], source, tmp_path / "run")
    before = torch.load(str(source / "step_700.t7"))["net"]
    after = torch.load(str(exported))["net"]
    assert list(before) == list(after)
    for key, tensor in before.items():  # every tensor came from the directory and went back unchanged
        assert torch.equal(tensor, after[key]), key
    assert f"initialized from {source} (weights only, as the original)\n" in capsys.readouterr().out


@pytest.mark.realdata
def test_a_plbert_directory_of_other_words_starts_a_fresh_word_head_and_says_so(plbert_data, tmp_path, capsys):
    torch = pytest.importorskip("torch")
    metadata = json.loads(open(os.path.join(plbert_data["plain"], "metadata.json")).read())
    source = plbert_dir(tmp_path / "plbert", 7, seed=4)  # another corpus's word vocabulary
    exported = continue_pretraining(plbert_data["plain"], source, tmp_path / "run")
    before = torch.load(str(source / "step_700.t7"))["net"]
    after = torch.load(str(exported))["net"]
    assert after["module.word_predictor.weight"].shape == (metadata["word_vocab_size"], 32)
    kept = [key for key in before if "word_predictor" not in key]
    assert len(kept) == len(before) - 2
    for key in kept:  # the encoder and the phoneme head are the directory's
        assert torch.equal(before[key], after[key]), key
    out = capsys.readouterr().out
    expected = f"; the word head starts fresh: {source} has 7 words, this model {metadata['word_vocab_size']}\n"
    assert expected in out, out
