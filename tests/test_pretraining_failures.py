"""run_pretraining under bad data and faults: one clear error naming the file, nothing lost."""

import json
import os
import re
import shutil

import pytest

from command_helpers import run_command
from paths import CONFIGS

pytestmark = pytest.mark.realdata
SEQ = 64


def settings(output_dir, data, steps=2, **extra):
    """A short run on `data` (the `pretraining_data` fixture: its shards and config)."""
    from albert_tf.pretraining.settings import PretrainSettings

    values = dict(
        output_dir=str(output_dir),
        input_file=data["data"],
        albert_config_file=data["config"],
        train_batch_size=8,
        max_seq_length=SEQ,
        num_train_steps=steps,
        num_warmup_steps=0,
        save_checkpoints_steps=2,
        verbose=False,
    )
    values.update(extra)
    return PretrainSettings(**values)


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
        pretrain(settings(tmp_path / "verified", pretraining_data, verify_data=True, input_file=str(data_copy)))
    assert not (tmp_path / "verified" / "checkpoints").exists()  # refused before training
    with pytest.raises(DataError, match=rf"{victim.name}: corrupt record .*checkpoints are intact"):
        pretrain(settings(tmp_path / "run", pretraining_data, steps=400, shuffle_buffer=10, input_file=str(data_copy)))


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
        pretrain(settings(tmp_path / "a", pretraining_data, max_seq_length=128, input_file=str(data_copy)))
    shutil.copy(os.path.join(pretraining_data["data"], "metadata.json"), data_copy / "metadata.json")
    victim = shards(data_copy)[2]
    victim.write_bytes(victim.read_bytes()[:-100])
    with pytest.raises(DataError, match=rf"{victim.name}: \d+ bytes, but metadata.json records \d+"):
        pretrain(settings(tmp_path / "b", pretraining_data, input_file=str(data_copy)))
    (data_copy / "metadata.json").unlink()
    with pytest.raises(DataError, match=r"metadata.json not found: .* not a finished data_prep output"):
        pretrain(settings(tmp_path / "c", pretraining_data, input_file=str(data_copy)))
    assert not any((tmp_path / name).exists() for name in "abc")


def test_a_glob_over_the_data_dir_reads_only_the_listed_shards(pretraining_data, tmp_path):
    from albert_tf.inputs.shard_reader import resolve_input

    source = resolve_input(os.path.join(pretraining_data["data"], "*"))  # also matches metadata.json
    assert [os.path.basename(f) for f in source.files] == [f"part-0000{i}-of-00003.tfrecord" for i in range(3)]


@pytest.mark.slow
def test_positions_shorter_than_the_data_and_a_changed_config_on_resume_are_clear(pretraining_data, tmp_path):
    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import PretrainingError
    from albert_tf.shard_set import DataError

    config = json.loads(open(pretraining_data["config"]).read())
    short = dict(config, max_position_embeddings=32)
    (tmp_path / "short.json").write_text(json.dumps(short))
    with pytest.raises(DataError, match=r"max_position_embeddings 32 is shorter than the data's sequences \(64\)"):
        pretrain(settings(tmp_path / "short", pretraining_data, albert_config_file=str(tmp_path / "short.json")))
    pretrain(settings(tmp_path / "run", pretraining_data))
    (tmp_path / "wider.json").write_text(json.dumps(dict(config, intermediate_size=64)))
    with pytest.raises(PretrainingError, match=r"was trained with another config \(intermediate_size differ"):
        pretrain(settings(tmp_path / "run", pretraining_data, steps=4, albert_config_file=str(tmp_path / "wider.json")))


@pytest.mark.slow
def test_an_unreadable_latest_checkpoint_falls_back_to_the_previous_one(pretraining_data, tmp_path, capsys):
    from albert_tf.pretraining.job import pretrain

    pretrain(settings(tmp_path, pretraining_data, steps=4))
    checkpoint_dir = tmp_path / "checkpoints"
    data_file = next(checkpoint_dir.glob("ckpt-4.data-*"))
    data_file.write_bytes(data_file.read_bytes()[:100])  # a kill or a full disk mid-copy
    summary = pretrain(settings(tmp_path, pretraining_data, steps=6, verbose=True))
    assert summary["start_step"] == 2 and summary["end_step"] == 6
    out = capsys.readouterr().out
    assert "resumed from" in out and "ckpt-2 at step 2 (unreadable, skipped: ckpt-4" in out


def test_the_mlm_logits_count_in_a_pretraining_batchs_memory(monkeypatch):
    from albert_tf import memory_check
    from albert_tf.config import AlbertConfig

    from paths import CONFIGS

    monkeypatch.setattr(memory_check, "available_bytes", lambda: 24 * 2**30)  # this machine
    config = AlbertConfig.from_json_file(str(CONFIGS / "albert_tiny.json"))
    count = memory_check.parameter_count(config)
    # Issue 41: albert_tiny at --train_batch_size 10000 was OOM-killed after 57 s; the logits alone are 12.8 GB.
    with pytest.raises(memory_check.MemoryLimitError, match=r"^--train_batch_size: 10000 sequences of 128 per step"):
        memory_check.check_batch_fits(config, count, 10_000, 128, remat=False, max_predictions=20)
    memory_check.check_batch_fits(config, count, 10_000, 128, remat=False)  # fine-tuning has no MLM logits
    memory_check.check_batch_fits(config, count, 128, 128, remat=False, max_predictions=20)


def test_the_parameter_count_from_a_config_alone_is_the_built_models():
    from albert_tf.config import AlbertConfig
    from albert_tf.memory_check import parameter_count

    from paths import CONFIGS

    # test_param_table's counts of the built models (heads included).
    for name, built in (("albert_base_v2", 11_813_810), ("albert_xxlarge_v1", 223_158_450)):
        assert parameter_count(AlbertConfig.from_json_file(str(CONFIGS / f"{name}.json"))) == built


@pytest.mark.parametrize(
    "field,value,says",
    [
        ("vocab_size", 10**9, r"vocab_size 1,000,000,000 makes a model of at least [\d,]+ parameters"),
        ("hidden_size", 10**6, r"hidden_size 1,000,000 makes a model of at least [\d,]+ parameters"),
    ],
)
def test_an_absurd_config_is_refused_before_anything_is_built(
    pretraining_data, tmp_path, monkeypatch, field, value, says
):
    from albert_tf import memory_check
    from albert_tf.pretraining.job import pretrain

    monkeypatch.setattr(memory_check, "available_bytes", lambda: 24 * 2**30)
    config = json.loads(open(pretraining_data["config"]).read()) | {field: value}
    config_file = tmp_path / "absurd.json"
    config_file.write_text(json.dumps(config))
    memory_check_error = memory_check.MemoryLimitError
    with pytest.raises(memory_check_error, match=f"^{config_file}: {says}.* but 24.0 GiB is available$"):
        memory_check.check_config_fits(memory_check_config(config_file), str(config_file), SEQ, remat=False)
    if field == "vocab_size":
        return  # pretrain refuses it earlier still: the data's vocabulary has 4,000 pieces
    with pytest.raises(memory_check_error, match=f"^{config_file}: {says}"):
        pretrain(settings(tmp_path / "out", pretraining_data, albert_config_file=str(config_file)))
    assert not (tmp_path / "out").exists()


def test_a_model_too_deep_to_build_is_refused_as_its_config_is_read(tmp_path):
    """10⁶ layers built for minutes, then Keras' graph ran out of recursion (~490 layer applications)."""
    from albert_tf.config import ConfigError
    from albert_tf.convert_checkpoint import convert

    from command_helpers import run_command
    from interop_helpers import build, save_ours, train_toy_spm

    save_ours(build("pretrainer"), tmp_path / "ours", train_toy_spm(tmp_path / "spm"))
    convert(str(tmp_path / "ours"), output_dir=str(tmp_path / "hf"), output_format="hf")
    config = json.loads((tmp_path / "hf" / "config.json").read_text()) | {"num_hidden_layers": 10**6}
    (tmp_path / "hf" / "config.json").write_text(json.dumps(config))
    flags = [f"--input={tmp_path / 'hf'}", f"--output_dir={tmp_path / 'out'}"]
    result = run_command("albert_tf.convert_checkpoint", flags)
    assert result.returncode == 1 and result.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'hf' / 'config.json'}: field 'num_hidden_layers': 1,000,000 gives "
        f"{10**6 * config['inner_group_num']:,} layer applications (num_hidden_layers × inner_group_num); at most "
        "256 are built (the paper's deepest model has 48)"
    ]
    assert not (tmp_path / "out").exists()
    deep = json.loads((tmp_path / "ours" / "albert_config.json").read_text()) | {"num_hidden_layers": 64}
    (tmp_path / "deep.json").write_text(json.dumps(deep | {"inner_group_num": 5}))
    with pytest.raises(ConfigError, match="'num_hidden_layers': 64 gives 320 layer applications"):
        memory_check_config(tmp_path / "deep.json")


def memory_check_config(path):
    from albert_tf.config import AlbertConfig

    return AlbertConfig.from_json_file(str(path))


def test_a_full_disk_while_checkpointing_names_the_path_and_leaves_no_temp_dir(pretraining_data, tmp_path, monkeypatch):
    import errno

    import tensorflow as tf

    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import PretrainingError

    def disk_full(manager, checkpoint_number=None, **kwargs):
        # What TensorFlow leaves when the disk fills mid-save: its staging directory, partly written.
        staging = os.path.join(manager.directory, f"ckpt-{checkpoint_number}_temp")
        os.makedirs(staging)
        open(os.path.join(staging, "part-00000-of-00001.data-00000-of-00001"), "wb").write(b"\0" * 100)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tf.train.CheckpointManager, "save", disk_full)
    checkpoints = tmp_path / "out" / "checkpoints"
    with pytest.raises(PretrainingError) as caught:
        pretrain(settings(tmp_path / "out", pretraining_data))
    assert str(caught.value) == (
        f"{checkpoints / 'ckpt-2'}: saving the checkpoint of step 2 failed ([Errno 28] No space left on device); "
        "no earlier checkpoint exists; free space (or fix the directory) and run the same command again"
    )
    assert not [p for p in os.listdir(checkpoints) if "_temp" in p]


# ---- settings out of range; a resume with another batch size (hardening probes) ----
@pytest.mark.parametrize(
    "name,value",
    [
        ("num_train_steps", 0),
        ("save_checkpoints_steps", 0),
        ("keep_checkpoint_max", 0),
        ("train_batch_size", -8),
        ("learning_rate", -1e-3),
        ("learning_rate", float("nan")),
        ("max_predictions_per_seq", 0),
        ("log_every_steps", 0),
        ("num_warmup_steps", -1),
        ("grad_accum_steps", 0),
    ],
)
def test_pretraining_settings_refuse_values_out_of_range(tmp_path, name, value):
    from albert_tf.pretraining.settings import PretrainingError, PretrainSettings

    with pytest.raises(PretrainingError, match=f"^--{name} {value}: must be"):
        PretrainSettings(output_dir=str(tmp_path), **{name: value})


@pytest.mark.parametrize(
    "changes,says",
    [
        ({"input_file": None}, "--input_file required (data_prep's output)"),
        (
            {"albert_config_file": None, "output_dir": ""},
            "--albert_config_file, --output_dir required with --input_file",
        ),
        ({"do_train": False, "albert_config_file": None}, "--albert_config_file required with --nodo_train"),
        ({"do_train": False, "dry_run": True}, "--dry_run plans a training run; drop --nodo_train"),
        (
            {"do_train": False, "input_file": None},
            "--nodo_train needs --eval_file (the data to evaluate the checkpoints on)",
        ),
        (
            {"init_from_group0": True},
            "--init_from_group0 needs --init_checkpoint (the checkpoint whose group 0 starts every group)",
        ),
    ],
)
def test_pretraining_settings_say_what_the_run_lacks_before_any_work(tmp_path, changes, says):
    import dataclasses

    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import PretrainingError, PretrainSettings

    complete = PretrainSettings(
        output_dir=str(tmp_path / "run"), input_file=str(tmp_path / "data"), albert_config_file="config.json"
    )
    complete.check_inputs()
    lacking = dataclasses.replace(complete, **changes)
    with pytest.raises(PretrainingError) as raised:
        lacking.check_inputs()
    assert str(raised.value) == says
    with pytest.raises(PretrainingError, match=f"^{re.escape(says)}$"):
        pretrain(lacking)  # refused first: no data read, nothing written
    assert list(tmp_path.iterdir()) == []


def test_the_sequence_lengths_default_to_the_datas_and_given_ones_are_kept(pretraining_data):
    from albert_tf.pretraining.settings import PretrainSettings
    from albert_tf.shard_set import DataError, PretrainingData

    data = PretrainingData.load(pretraining_data["data"])
    metadata = json.loads(open(os.path.join(pretraining_data["data"], "metadata.json")).read())
    unset = PretrainSettings(output_dir="run", input_file=pretraining_data["data"])
    assert (unset.max_seq_length, unset.max_predictions_per_seq) == (None, None)
    resolved = unset.for_data(data)
    assert (resolved.max_seq_length, resolved.max_predictions_per_seq) == (
        metadata["max_seq_length"],
        metadata["max_predictions_per_seq"],
    )
    assert resolved.for_data(data) == resolved
    given = PretrainSettings(output_dir="run", max_seq_length=2 * metadata["max_seq_length"]).for_data(data)
    assert given.max_seq_length == 2 * metadata["max_seq_length"]  # kept, and refused against the data
    assert given.max_predictions_per_seq == metadata["max_predictions_per_seq"]
    with pytest.raises(DataError, match=rf"sequence length {metadata['max_seq_length']} \(--max_seq_length is"):
        data.check_fits(given.max_seq_length, given.max_predictions_per_seq, data.vocab_size)


@pytest.mark.realdata
@pytest.mark.slow
def test_resume_with_another_batch_size_is_one_clear_error(pretraining_data, tmp_path):
    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import PretrainingError, PretrainSettings

    def settings(batch, steps):
        return PretrainSettings(
            output_dir=str(tmp_path / "run"),
            input_file=pretraining_data["data"],
            albert_config_file=pretraining_data["config"],
            train_batch_size=batch,
            max_seq_length=64,
            num_train_steps=steps,
            num_warmup_steps=0,
            save_checkpoints_steps=2,
            verbose=False,
        )

    pretrain(settings(8, 2))
    kept = sorted(os.listdir(tmp_path / "run" / "checkpoints"))
    with pytest.raises(PretrainingError, match="trained with --train_batch_size 8 \\(now 4\\).*same flags"):
        pretrain(settings(4, 4))
    assert sorted(os.listdir(tmp_path / "run" / "checkpoints")) == kept
    pretrain(settings(8, 4))  # the same flags resume


@pytest.mark.parametrize(
    "field,value,says",
    [
        ("max_instances_per_row", 0, "field 'max_instances_per_row': 0, must be at least 1"),
        ("max_seq_length", "16", "field 'max_seq_length': '16' is a string, expected a whole number of at least 1"),
        ("max_predictions_per_seq", True, "field 'max_predictions_per_seq': True is a boolean, expected a whole"),
        ("num_instances", -2, "field 'num_instances': -2, must be at least 0"),
        ("shards", ["part-00000-of-00001.tfrecord"], "field 'shards': .* is a list, expected an object"),
        ("shards", {"../part-00000-of-00001.tfrecord": 2}, "field 'shards': '../part-00000-of-00001.tfrecord' is not"),
        ("shard_files", {"part-00000-of-00001.tfrecord": 7}, "field 'shard_files': part-00000-of-00001.tfrecord: 7"),
    ],
)
def test_metadata_with_a_field_of_the_wrong_type_or_value_is_refused_naming_it(tmp_path, field, value, says):
    """`max_instances_per_row: 0` reached an 84-line broadcasting traceback in pretraining; a string or
    a boolean size was read as a size."""
    from albert_tf.inputs.shard_reader import resolve_input
    from albert_tf.shard_set import DataError

    from pretraining_helpers import handmade_data

    directory = handmade_data(tmp_path / "data")
    metadata = json.loads((tmp_path / "data" / "metadata.json").read_text())
    (tmp_path / "data" / "metadata.json").write_text(json.dumps({**metadata, field: value}))
    with pytest.raises(DataError, match=rf"^{tmp_path / 'data' / 'metadata.json'}: {says}"):
        resolve_input(directory)


def test_metadata_contradicting_the_records_or_cut_short_is_one_line_before_training(tmp_path):
    from albert_tf.inputs.shard_reader import resolve_input
    from albert_tf.shard_set import DataError

    from pretraining_helpers import handmade_data

    metadata_file = tmp_path / "packed" / "metadata.json"
    directory = handmade_data(tmp_path / "packed", rows_hold=3)
    shard = f"{directory}/part-00000-of-00001.tfrecord"
    metadata = json.loads(metadata_file.read_text())
    for hold in (1, 2):
        metadata_file.write_text(json.dumps({**metadata, "max_instances_per_row": hold}))
        with pytest.raises(
            DataError,
            match=rf"^{shard}: its records do not match .*: max_instances_per_row 3 \(metadata.json says {hold}\)$",
        ):
            resolve_input(directory)
    metadata_file.write_text(json.dumps(metadata)[:-20])
    with pytest.raises(DataError, match=rf"^{metadata_file}: not valid JSON \(line 1, column"):
        resolve_input(directory)
    one = handmade_data(tmp_path / "one", rows_hold=1)
    metadata = json.loads((tmp_path / "one" / "metadata.json").read_text())
    (tmp_path / "one" / "metadata.json").write_text(json.dumps({**metadata, "max_instances_per_row": 2}))
    with pytest.raises(DataError, match=r"max_instances_per_row 1 \(metadata.json says 2\)$"):
        resolve_input(one)
    (tmp_path / "one" / "metadata.json").write_text(json.dumps({**metadata, "max_instances_per_row": 0}))
    run = run_command(
        "albert_tf.run_pretraining",
        [
            f"--input_file={one}",
            f"--albert_config_file={CONFIGS / 'albert_tiny.json'}",
            f"--output_dir={tmp_path / 'run'}",
        ],
    )
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'one' / 'metadata.json'}: field 'max_instances_per_row': 0, must be at least 1"
    ]
    assert not (tmp_path / "run").exists()


@pytest.mark.realdata
@pytest.mark.slow
def test_a_refused_resume_keeps_the_record_builds_nothing_and_a_torn_record_is_one_line(
    pretraining_data, tmp_path, monkeypatch
):
    # Hardening V defects 1, 2 and 6: a resume refused by its binding had rewritten settings.json and was refused
    # only once the model was built; a record cut by a kill mid-write ended in a JSONDecodeError traceback.
    from albert_tf.pretraining import job

    from command_helpers import run_command
    from pretraining_helpers import common_args

    run = tmp_path / "run"
    args = common_args(pretraining_data, str(run), 2, train_batch_size=8, save_checkpoints_steps=2)
    made = run_command("albert_tf.run_pretraining", args)
    assert made.returncode == 0, made.stderr[-3000:]
    record = run / "settings.json"
    kept = record.read_bytes()
    wider = tmp_path / "wider.json"
    wider.write_text(json.dumps(json.loads(open(pretraining_data["config"]).read()) | {"intermediate_size": 64}))

    def built(*args, **kwargs):
        raise AssertionError("the model was built before the resume's binding was checked")

    monkeypatch.setattr(job, "PretrainingLoop", built)
    refused_by = (
        ("--train_batch_size=4", f"error: {run} was trained with --train_batch_size 8 (now 4): its checkpoints"),
        (f"--albert_config_file={wider}", f"error: {run} was trained with another config (intermediate_size differ"),
    )
    for changed, said in refused_by:
        refused = run_command("albert_tf.run_pretraining", args + [changed, "--num_train_steps=4"])
        assert refused.returncode == 1, refused.stderr[-3000:]
        (line,) = refused.stderr.splitlines()  # one line, no traceback
        assert line.startswith(said), line
        assert record.read_bytes() == kept  # the refused command is not the run's record
    monkeypatch.undo()

    for torn in (run / "train_summary.json", run / "checkpoints" / "albert_config.json"):
        whole = torn.read_bytes()
        torn.write_bytes(whole[:40])
        again = run_command("albert_tf.run_pretraining", args)  # the finished run again: it reads both
        assert again.returncode == 1 and "Traceback" not in again.stderr, again.stderr[-3000:]
        assert again.stderr.splitlines()[-1].startswith(f"error: {torn}: not valid JSON (line "), again.stderr
        torn.write_bytes(whole)

    # What a killed run leaves: staging copies, a half-written TensorFlow checkpoint. A successful resume cleans up.
    (run / ".staging-best-x1y2").mkdir()
    (run / ".staging-train_summary.json-4242").write_text('{"start_step"')
    (run / "checkpoints" / "ckpt-3_temp").mkdir()
    (run / "checkpoints" / "ckpt-3_temp" / "part-00000-of-00001.index").write_bytes(b"half")
    resumed = run_command("albert_tf.run_pretraining", args + ["--num_train_steps=4"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads(record.read_text())["previous"][-1]["flags"]["num_train_steps"] == 2
    assert not [p.name for p in run.rglob("*") if "staging" in p.name or p.name.endswith("_temp")]
