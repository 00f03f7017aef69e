"""Packed rows from data_prep through both loops: the same instances, each computing what it computes alone."""

import collections
import json
import os
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from albert_tf.tokenization import SentencePieceTokenizer

from command_helpers import run_command
from paths import REPO
from pretraining_helpers import cli, common_args, final_weights, save_fresh_pretrainer

SEQ = 64
ROWS_HOLD = 3


def test_best_fit_decreasing_packs_every_item_once_within_the_limits():
    from data_prep.packing import pack_rows

    rng = random.Random(7)
    lengths = [rng.choice([rng.randint(5, 20), rng.randint(40, 64)]) for _ in range(500)]
    rows = pack_rows(lengths, capacity=64, max_per_row=3)
    assert sorted(i for row in rows for i in row) == list(range(500))
    assert all(len(row) <= 3 and sum(lengths[i] for i in row) <= 64 for row in rows)
    assert rows == pack_rows(lengths, capacity=64, max_per_row=3)  # deterministic
    assert [min(row) for row in rows] == sorted(min(row) for row in rows)  # rows keep the shard's order
    assert len(rows) < 0.8 * len(lengths)  # short items share rows
    assert pack_rows(lengths, 64, 1) == [[i] for i in range(500)]
    with pytest.raises(ValueError, match="65 tokens does not fit a row of 64"):
        pack_rows([3, 65], 64, 2)


def sentence_file(real_data, path):
    """WikiText-2 valid as the docs ask: one sentence a line, a blank line between paragraphs (short documents)."""
    paragraphs = []
    for line in (real_data / "wikitext2" / "valid.txt").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("= "):
            paragraphs.append("\n".join(s.strip() + " ." for s in line.split(" . ") if s.strip()))
    path.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def packed_data(tmp_path_factory, real_data, pretraining_data):
    """The same instances one a row and packed up to 3 a row (length 64), with the tiny config."""
    from data_prep.pipeline import Settings, run

    root = tmp_path_factory.mktemp("packed")
    text = sentence_file(real_data, root / "sentences.txt")
    made = {}
    for hold in (1, ROWS_HOLD):
        made[hold] = str(root / f"rows_{hold}")
        run(
            Settings(
                input_file=text,
                output_dir=made[hold],
                tokenizer=SentencePieceTokenizer(pretraining_data["spm"]),
                max_seq_length=SEQ,
                dupe_factor=1,
                num_shards=2,
                max_instances_per_row=hold,
            )
        )
    return {"one": made[1], "packed": made[ROWS_HOLD], "config": pretraining_data["config"], "root": root}


def read_rows(directory):
    from albert_tf.inputs.shard_reader import pretraining_dataset, resolve_input

    source = resolve_input(directory)
    rows = source.data.metadata["counts"]["packing"]["rows"]
    dataset = pretraining_dataset(source, 1, is_training=False).take(rows)
    return [({k: v.numpy()[0] for k, v in x.items()}, {k: v.numpy()[0] for k, v in y.items()}) for x, y in dataset]


def instances_of(row):
    """A packed row's instances, each as it would be alone: (ids, segments, positions, labels, sop label)."""
    inputs, labels = row
    mask = inputs["input_mask"]
    found = []
    for number in range(1, mask.max() + 1):
        where = np.flatnonzero(mask == number)
        start, end = where[0], where[-1] + 1
        assert list(where) == list(range(start, end))  # an instance is contiguous
        real = labels["masked_lm_weights"] > 0
        mine = real & (inputs["masked_lm_positions"] >= start) & (inputs["masked_lm_positions"] < end)
        slot = number - 1 if "cls_positions" in inputs else 0
        if "cls_positions" in inputs:
            assert inputs["cls_positions"][slot] == start and labels["next_sentence_weights"][slot] == 1
        found.append(
            (
                tuple(inputs["input_ids"][start:end]),
                tuple(inputs["segment_ids"][start:end]),
                tuple(inputs["masked_lm_positions"][mine] - start),
                tuple(labels["masked_lm_ids"][mine]),
                int(labels["next_sentence_labels"][slot]),
            )
        )
    if "cls_positions" in inputs:  # empty slots weigh nothing
        assert labels["next_sentence_weights"][mask.max() :].sum() == 0
    return found


@pytest.mark.realdata
def test_packed_rows_hold_exactly_the_instances_of_one_a_row(packed_data):
    from albert_tf.shard_set import PretrainingData

    one, packed = read_rows(packed_data["one"]), read_rows(packed_data["packed"])
    alone = collections.Counter(i for row in one for i in instances_of(row))
    together = collections.Counter(i for row in packed for i in instances_of(row))
    assert together == alone and sum(alone.values()) == len(one)
    assert all(1 <= row[0]["input_mask"].max() <= ROWS_HOLD for row in packed)
    metadata = PretrainingData.load(packed_data["packed"]).metadata
    assert metadata["max_instances_per_row"] == ROWS_HOLD and metadata["num_instances"] == len(one)
    fill = metadata["counts"]["packing"]
    real_tokens = sum(int((row[0]["input_mask"] > 0).sum()) for row in packed)
    assert fill["rows"] == len(packed) < len(one)
    assert fill["fill"] == round(real_tokens / (len(packed) * SEQ), 4) > fill["fill_one_instance_a_row"]
    assert PretrainingData.load(packed_data["one"]).metadata["counts"]["packing"]["rows"] == len(one)


# Run as a script on either backend (a process each): prints the largest difference per attention kernel.
COMPARE_HELPERS = '''
import numpy as np


def batch_of_packed_rows(directory, rows=6):
    from albert_tf.inputs.shard_reader import pretraining_dataset, resolve_input

    inputs, labels = next(iter(pretraining_dataset(resolve_input(directory), rows, is_training=False)))
    return {k: v.numpy() for k, v in inputs.items()}, {k: v.numpy() for k, v in labels.items()}


def alone_in_a_row(inputs, labels, row, number):
    """Instance `number` of packed row `row` as a one-instance row of the same width: (features, its slots)."""
    mask = inputs["input_mask"][row]
    where = np.flatnonzero(mask == number)
    start, length = where[0], len(where)
    single = {k: np.zeros((1, mask.shape[0]), "int32") for k in ("input_ids", "input_mask", "segment_ids")}
    single["input_ids"][0, :length] = inputs["input_ids"][row, where]
    single["segment_ids"][0, :length] = inputs["segment_ids"][row, where]
    single["input_mask"][0, :length] = 1
    positions = inputs["masked_lm_positions"][row]
    mine = np.flatnonzero((labels["masked_lm_weights"][row] > 0) & (positions >= start) & (positions < start + length))
    single["masked_lm_positions"] = (positions[mine] - start)[None].astype("int32")
    return single, mine


'''
COMPARE = COMPARE_HELPERS + textwrap.dedent("""
    import json, sys
    import keras
    from albert_tf import AlbertBackbone, AlbertPretrainer
    from albert_tf.layers.attention import AlbertAttention
    directory, config, kernels = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    inputs, labels = batch_of_packed_rows(directory)
    packed = AlbertPretrainer(AlbertBackbone.from_albert_config(config), packed_rows=True)
    plain = AlbertPretrainer(AlbertBackbone.from_albert_config(config))
    plain.set_weights(packed.get_weights())
    worst, instances = {}, 0
    for kernel in kernels:
        for layer in packed._flatten_layers():
            if isinstance(layer, AlbertAttention):
                layer.attention_kernel = kernel
        out = {k: np.asarray(v) for k, v in packed(inputs).items()}
        assert out["sop_logits"].shape == inputs["cls_positions"].shape + (2,)
        worst[kernel] = 0.0
        for row in range(len(inputs["input_ids"])):
            for number in range(1, inputs["input_mask"][row].max() + 1):
                single, mine = alone_in_a_row(inputs, labels, row, number)
                alone = {k: np.asarray(v) for k, v in plain(single).items()}
                worst[kernel] = max(
                    worst[kernel],
                    float(np.abs(alone["mlm_logits"][0] - out["mlm_logits"][row, mine]).max()),
                    float(np.abs(alone["sop_logits"][0] - out["sop_logits"][row, number - 1]).max()),
                )
                instances += 1
    print(json.dumps({"backend": keras.backend.backend(), "worst": worst, "instances": instances}))
""")


def compare(packed_data, backend, kernels):
    result = subprocess.run(
        [sys.executable, "-c", COMPARE, packed_data["packed"], packed_data["config"], kernels],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["backend"] == backend and found["instances"] > 6  # several rows hold several instances
    return found["worst"]


@pytest.mark.realdata
def test_each_packed_instance_computes_what_it_computes_alone_on_tensorflow(packed_data):
    worst = compare(packed_data, "tensorflow", "einsum,keras")
    assert max(worst.values()) < 1e-5, worst


@pytest.mark.realdata
@pytest.mark.slow
def test_each_packed_instance_computes_what_it_computes_alone_on_jax(packed_data):
    # "xla" is jax.nn.dot_product_attention with the [B, 1, S, S] mask: the call cuDNN takes on a GPU.
    worst = compare(packed_data, "jax", "einsum,xla")
    assert max(worst.values()) < 1e-5, worst


def pretrain(packed_data, output_dir, backend="tensorflow", data="packed", **extra):
    """run_pretraining: in this process on TensorFlow, in a process of its own on JAX (one backend a process)."""
    args = common_args({"data": packed_data[data], "config": packed_data["config"]}, str(output_dir), 6, **extra)
    args += ["--max_seq_length", str(SEQ)]
    if backend == "tensorflow":
        return run_command("albert_tf.run_pretraining", args)
    process = cli(["--backend", backend] + args)
    stdout, stderr = process.communicate(timeout=600)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.fixture(scope="module")
def initial_model(tmp_path_factory, packed_data):
    return save_fresh_pretrainer(tmp_path_factory.mktemp("initial") / "model", packed_data["config"])


@pytest.mark.realdata
@pytest.mark.slow
def test_both_loops_train_the_same_on_packed_rows_and_bind_the_layout(packed_data, initial_model, tmp_path):
    extra = dict(log_every_steps=1, init_checkpoint=initial_model, grad_accum_steps=2, do_eval=True, max_eval_steps=2)
    runs = {}
    for backend in ("tensorflow", "jax"):
        result = pretrain(packed_data, tmp_path / backend, backend, **extra)
        assert result.returncode == 0, result.stderr[-3000:]
        runs[backend] = json.loads((tmp_path / backend / "train_summary.json").read_text())
    for key in ("masked_lm_loss", "sentence_order_loss", "sentence_order_accuracy"):
        np.testing.assert_allclose(
            [h[key] for h in runs["jax"]["history"]], [h[key] for h in runs["tensorflow"]["history"]], rtol=2e-6
        )
    for a, b in zip(final_weights(tmp_path / "jax"), final_weights(tmp_path / "tensorflow")):
        np.testing.assert_allclose(a, b, rtol=0, atol=2e-6)
    assert runs["tensorflow"]["eval"]["sentence_order_accuracy"] == runs["jax"]["eval"]["sentence_order_accuracy"]

    # The run's checkpoints hold the packed data's iterator: one line, and nothing changes.
    before = sorted(os.listdir(tmp_path / "tensorflow" / "checkpoints"))
    record = (tmp_path / "tensorflow" / "settings.json").read_bytes()
    refused = pretrain(packed_data, tmp_path / "tensorflow", data="one", num_train_steps=8)
    assert refused.returncode == 1 and "up to 3 instances a row, this data holds up to 1" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert sorted(os.listdir(tmp_path / "tensorflow" / "checkpoints")) == before
    assert (tmp_path / "tensorflow" / "settings.json").read_bytes() == record  # the record is the run's, unchanged

    # On the same data it resumes where it stopped, data position included: without its last checkpoint
    # (unreadable: the run falls back to step 5), the same command ends on the same weights.
    stopped_at_6 = final_weights(tmp_path / "tensorflow")
    for path in (tmp_path / "tensorflow" / "checkpoints").glob("ckpt-6.*"):
        path.unlink()
    resumed = pretrain(packed_data, tmp_path / "tensorflow", **extra)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "ckpt-5 at step 5" in resumed.stdout + resumed.stderr
    for a, b in zip(final_weights(tmp_path / "tensorflow"), stopped_at_6):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


@pytest.mark.realdata
def test_packed_and_one_a_row_data_in_one_run_is_one_line(packed_data, tmp_path):
    mixed = run_command(
        "albert_tf.run_pretraining",
        common_args(
            {"data": f"{packed_data['packed']},{packed_data['one']}", "config": packed_data["config"]},
            str(tmp_path / "mixed"),
            2,
        )
        + ["--max_seq_length", str(SEQ)],
    )
    assert mixed.returncode == 1 and "in one run" in mixed.stderr and "--max_instances_per_row" in mixed.stderr
    assert len(mixed.stderr.strip().splitlines()) == 1, mixed.stderr
    evaluated = pretrain(packed_data, tmp_path / "eval", eval_file=packed_data["one"], do_eval=True)
    assert evaluated.returncode == 1 and "(--eval_file) holds one instance a row" in evaluated.stderr
    assert not (tmp_path / "mixed").exists() and not (tmp_path / "eval").exists()
