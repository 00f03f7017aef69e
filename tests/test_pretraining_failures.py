"""run_pretraining under bad data and faults: one clear error naming the file, nothing lost."""

import json
import os
import shutil

import pytest

pytestmark = pytest.mark.realdata
SEQ = 64


def settings(output_dir, steps=2, **extra):
    from albert_tf.pretraining.settings import TrainSettings

    values = dict(
        output_dir=str(output_dir),
        train_batch_size=8,
        max_seq_length=SEQ,
        num_train_steps=steps,
        num_warmup_steps=0,
        save_checkpoints_steps=2,
        verbose=False,
    )
    values.update(extra)
    return TrainSettings(**values)


@pytest.fixture
def data_copy(pretraining_data, tmp_path):
    """A private copy of the pretraining data that a test may damage."""
    target = tmp_path / "data"
    shutil.copytree(pretraining_data["data"], target)
    return target


def shards(directory):
    return sorted(p for p in directory.iterdir() if p.name.startswith("part-"))


@pytest.mark.slow
def test_a_corrupt_record_names_its_shard_and_keeps_the_checkpoints(pretraining_data, data_copy, tmp_path):
    from albert_tf.pretraining.job import pretrain
    from albert_tf.shard_set import DataError

    victim = shards(data_copy)[1]
    raw = bytearray(victim.read_bytes())
    for offset in range(len(raw) // 20, len(raw) - 16, len(raw) // 20):  # same size, broken records all along
        raw[offset : offset + 8] = b"\xff" * 8
    victim.write_bytes(bytes(raw))
    with pytest.raises(DataError, match=rf"{victim.name}: checksum differs"):
        pretrain(settings(tmp_path / "verified", verify_data=True), pretraining_data["config"], str(data_copy))
    assert not (tmp_path / "verified" / "checkpoints").exists()  # refused before training
    with pytest.raises(DataError, match=rf"{victim.name}: corrupt record .*checkpoints are intact"):
        pretrain(settings(tmp_path / "run", steps=400, shuffle_buffer=10), pretraining_data["config"], str(data_copy))


def test_a_truncated_shard_or_edited_metadata_is_refused_before_training(pretraining_data, data_copy, tmp_path):
    from albert_tf.pretraining.job import pretrain
    from albert_tf.shard_set import DataError

    metadata = json.loads((data_copy / "metadata.json").read_text())
    metadata["max_seq_length"] = 128
    (data_copy / "metadata.json").write_text(json.dumps(metadata))
    with pytest.raises(
        DataError,
        match=r"part-00000-of-00003.tfrecord: its records do not match .*"
        r"max_seq_length 64 \(metadata.json says 128\)",
    ):
        pretrain(settings(tmp_path / "a", max_seq_length=128), pretraining_data["config"], str(data_copy))
    shutil.copy(os.path.join(pretraining_data["data"], "metadata.json"), data_copy / "metadata.json")
    victim = shards(data_copy)[2]
    victim.write_bytes(victim.read_bytes()[:-100])
    with pytest.raises(DataError, match=rf"{victim.name}: \d+ bytes, but metadata.json records \d+"):
        pretrain(settings(tmp_path / "b"), pretraining_data["config"], str(data_copy))
    (data_copy / "metadata.json").unlink()
    with pytest.raises(DataError, match=r"metadata.json not found: .* not a finished data_prep output"):
        pretrain(settings(tmp_path / "c"), pretraining_data["config"], str(data_copy))
    assert not any((tmp_path / name).exists() for name in "abc")


def test_a_glob_over_the_data_dir_reads_only_the_listed_shards(pretraining_data, tmp_path):
    from albert_tf.inputs.shard_reader import resolve_input

    source = resolve_input(os.path.join(pretraining_data["data"], "*"))  # also matches metadata.json
    assert [os.path.basename(f) for f in source.files] == [f"part-0000{i}-of-00003.tfrecord" for i in range(3)]


@pytest.mark.slow
def test_positions_shorter_than_the_data_and_a_changed_config_on_resume_are_clear(pretraining_data, tmp_path):
    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import TrainingError
    from albert_tf.shard_set import DataError

    config = json.loads(open(pretraining_data["config"]).read())
    short = dict(config, max_position_embeddings=32)
    (tmp_path / "short.json").write_text(json.dumps(short))
    with pytest.raises(DataError, match=r"max_position_embeddings 32 is shorter than the data's sequences \(64\)"):
        pretrain(settings(tmp_path / "short"), str(tmp_path / "short.json"), pretraining_data["data"])
    pretrain(settings(tmp_path / "run"), pretraining_data["config"], pretraining_data["data"])
    (tmp_path / "wider.json").write_text(json.dumps(dict(config, intermediate_size=64)))
    with pytest.raises(TrainingError, match=r"was trained with another config \(intermediate_size differ"):
        pretrain(settings(tmp_path / "run", steps=4), str(tmp_path / "wider.json"), pretraining_data["data"])


@pytest.mark.slow
def test_an_unreadable_latest_checkpoint_falls_back_to_the_previous_one(pretraining_data, tmp_path, capsys):
    from albert_tf.pretraining.job import pretrain

    pretrain(settings(tmp_path, steps=4), pretraining_data["config"], pretraining_data["data"])
    checkpoint_dir = tmp_path / "checkpoints"
    data_file = next(checkpoint_dir.glob("ckpt-4.data-*"))
    data_file.write_bytes(data_file.read_bytes()[:100])  # a kill or a full disk mid-copy
    summary = pretrain(settings(tmp_path, steps=6, verbose=True), pretraining_data["config"], pretraining_data["data"])
    assert summary["start_step"] == 2 and summary["end_step"] == 6
    out = capsys.readouterr().out
    assert "resumed from" in out and "ckpt-2 at step 2 (unreadable, skipped: ckpt-4" in out
