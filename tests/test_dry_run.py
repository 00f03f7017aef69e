"""`run_pretraining --dry_run`: every check a run makes, the plan printed, nothing trained or written."""

import json

import pytest

from command_helpers import run_command

pytestmark = pytest.mark.realdata


def args(pretraining_data, output_dir, *extra):
    return [
        f"--input_file={pretraining_data['data']}",
        f"--albert_config_file={pretraining_data['config']}",
        f"--output_dir={output_dir}",
        "--num_train_steps=2",
        "--save_checkpoints_steps=2",
        "--num_warmup_steps=0",
        "--noexport",
        *extra,
    ]


def dry_run(pretraining_data, output_dir, *extra):
    result = run_command("albert_tf.run_pretraining", args(pretraining_data, output_dir, "--dry_run", *extra))
    return result, (json.loads(result.stdout) if result.returncode == 0 else None)


@pytest.mark.slow
def test_the_plan_says_rows_epochs_batch_and_memory_and_a_resume_is_checked(pretraining_data, tmp_path):
    metadata = json.loads((pretraining_data["root"] / "data" / "metadata.json").read_text())
    out = tmp_path / "run"
    result, plan = dry_run(pretraining_data, out, "--train_batch_size=32", "--grad_accum_steps=2")
    assert result.returncode == 0, result.stderr[-2000:]
    assert not out.exists()  # nothing written: no directory, no settings.json
    assert plan["data"]["rows"] == metadata["num_instances"] and plan["data"]["max_seq_length"] == 64
    assert plan["batch"] == {
        "train_batch_size": 32,
        "grad_accum_steps": 2,
        "replicas": 1,
        "micro_batch_per_replica": 16,
    }
    assert plan["steps"]["epochs"] == round(2 * 32 / metadata["num_instances"], 2)
    assert plan["model"]["vocab_size"] == 4000 and plan["tokenizer"]["kind"] == "sentencepiece"
    assert 0 < plan["memory"]["step_lower_bound_gib"] < plan["memory"]["available_gib"]
    assert plan["resumes_from_step"] is None and plan["warnings"] == []
    _, warmup = dry_run(pretraining_data, out, "--num_warmup_steps=5")  # the last flag wins
    assert "the learning rate never reaches --learning_rate" in warmup["warnings"][0]

    # A real run of 2 steps, then plans against its checkpoints: the same batch resumes, another is refused.
    trained = run_command("albert_tf.run_pretraining", args(pretraining_data, out, "--train_batch_size=8"))
    assert trained.returncode == 0, trained.stderr[-2000:]
    before = sorted(p.name for p in (out / "checkpoints").iterdir())
    result, plan = dry_run(pretraining_data, out, "--train_batch_size=8")
    assert result.returncode == 0 and plan["resumes_from_step"] == 2
    refused, _ = dry_run(pretraining_data, out, "--train_batch_size=16")
    assert refused.returncode == 1 and "--train_batch_size" in refused.stderr.strip().splitlines()[-1]
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == before


def test_a_batch_beyond_memory_and_eval_only_are_refused_in_one_line(pretraining_data, tmp_path, monkeypatch):
    from albert_tf import memory_check

    monkeypatch.setattr(memory_check, "available_bytes", lambda: 2**30)
    result, _ = dry_run(pretraining_data, tmp_path / "run", "--train_batch_size=100000")
    assert result.returncode == 1 and "--train_batch_size: 100000 sequences of 64" in result.stderr
    monkeypatch.undo()
    result, _ = dry_run(pretraining_data, tmp_path / "run", "--nodo_train")
    assert result.returncode == 1 and result.stderr.strip().endswith(
        "--dry_run plans a training run; drop --nodo_train"
    )
    assert not (tmp_path / "run").exists()
