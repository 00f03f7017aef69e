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


@pytest.mark.slow
def test_fine_tuning_plans_from_its_files_and_checks_a_resume(real_data, pretraining_data, tmp_path):
    """run_classifier --dry_run: every file read and tokenized (a bad row is a warning), the schedule, a resume."""
    rows = (real_data / "glue" / "SST-2" / "train.tsv").read_text(encoding="utf-8").splitlines()
    (tmp_path / "train.tsv").write_text("\n".join(rows[:41] + ["a row without its label"]) + "\n", encoding="utf-8")
    (tmp_path / "dev.tsv").write_text("\n".join(rows[:1] + rows[41:61]) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    argv = ["--task_name=sst-2", f"--data_dir={tmp_path}"]
    argv += [f"--albert_config_file={pretraining_data['config']}", f"--spm_model_file={pretraining_data['spm']}"]
    argv += [f"--output_dir={out}", "--do_train", "--do_eval", "--max_seq_length=32", "--train_batch_size=8"]
    argv += ["--train_step=10", "--warmup_step=10", "--save_checkpoints_steps=2"]
    result = run_command("albert_tf.run_classifier", argv + ["--dry_run"])
    assert result.returncode == 0, result.stderr[-2000:]
    plan = json.loads(result.stdout)
    assert not out.exists()
    assert plan["splits"]["train"] == {"examples": 40, "rows": 40, "skipped": 1}
    assert plan["splits"]["dev"]["examples"] == 20 and plan["binding"]["labels"] == ["0", "1"]
    assert plan["steps"] == {"train_step": 10, "warmup_step": 10, "epochs": 2.0}
    assert plan["batch"]["micro_batch_per_replica"] == 8 and plan["resumes_from_step"] is None
    assert "train.tsv: 1 of 41 records skipped; first: " in plan["warnings"][0], plan["warnings"]
    assert "never reaches --learning_rate" in plan["warnings"][1]

    trained = run_command("albert_tf.run_classifier", argv[:-3] + ["--train_step=2", "--save_checkpoints_steps=2"])
    assert trained.returncode == 0, trained.stderr[-2000:]
    again = run_command("albert_tf.run_classifier", argv[:-3] + ["--train_step=2", "--dry_run"])
    assert again.returncode == 0 and json.loads(again.stdout)["resumes_from_step"] == 2
    changed = run_command(
        "albert_tf.run_classifier", argv[:-3] + ["--train_step=2", "--learning_rate=1e-3", "--dry_run"]
    )
    assert changed.returncode == 1 and "made with other settings (learning_rate" in changed.stderr, changed.stderr


def test_pretraining_and_fine_tuning_plans_share_their_common_parts(real_data, pretraining_data, tmp_path):
    """One planner (albert_tf/run_plan.py): the same keys around each command's own sections."""
    result, pretraining = dry_run(pretraining_data, tmp_path / "pre", "--train_batch_size=8")
    assert result.returncode == 0, result.stderr[-2000:]
    rows = (real_data / "glue" / "SST-2" / "train.tsv").read_text(encoding="utf-8").splitlines()
    (tmp_path / "train.tsv").write_text("\n".join(rows[:17]) + "\n", encoding="utf-8")
    argv = ["--task_name=sst-2", f"--data_dir={tmp_path}", f"--output_dir={tmp_path / 'fine'}", "--do_train"]
    argv += [f"--albert_config_file={pretraining_data['config']}", f"--spm_model_file={pretraining_data['spm']}"]
    argv += ["--nodo_eval", "--max_seq_length=32", "--train_batch_size=8", "--train_step=4", "--dry_run"]
    result = run_command("albert_tf.run_classifier", argv)
    assert result.returncode == 0, result.stderr[-2000:]
    fine_tuning = json.loads(result.stdout)
    assert set(pretraining) - {"data"} == set(fine_tuning) - {"task", "metric", "splits", "binding"}
    assert set(pretraining["model"]) == set(fine_tuning["model"]) - {"from"}
    assert pretraining["model"]["config"] == pretraining_data["config"]
    assert pretraining["model"]["parameters"] == fine_tuning["model"]["parameters"]  # the same config
    for part in ("batch", "memory"):
        assert set(pretraining[part]) == set(fine_tuning[part]), part
    assert pretraining["steps"] == {
        "num_train_steps": 2,
        "num_warmup_steps": 0,
        "epochs": pretraining["steps"]["epochs"],
    }
    assert fine_tuning["steps"] == {"train_step": 4, "warmup_step": 0, "epochs": 2.0}  # 16 examples, 4 × 8
    assert (pretraining["max_seq_length"], fine_tuning["max_seq_length"]) == (64, 32)  # the data's; the flag's
    assert pretraining["tokenizer"]["vocab_sha256"] == fine_tuning["tokenizer"]["vocab_sha256"]
    assert pretraining["backend"] == fine_tuning["backend"] and fine_tuning["resumes_from_step"] is None
    assert not (tmp_path / "pre").exists() and not (tmp_path / "fine").exists()
