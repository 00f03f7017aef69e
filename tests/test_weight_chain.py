"""The shared-weight gradient chain: the same gradients, summed one layer application at a time."""

import json
import os
import re
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.models.backbone import AlbertBackbone

from paths import CONFIGS, REPO


def tiny_config(**overrides):
    config = json.loads((CONFIGS / "albert_tiny.json").read_text())
    config.update({"num_hidden_layers": 6, **overrides})
    return AlbertConfig(**{k: v for k, v in config.items() if k in AlbertConfig.__dataclass_fields__})


def features(batch=2, seq=9):
    rng = np.random.default_rng(0)
    mask = np.ones((batch, seq), "int32")
    mask[1, 6:] = 0
    return {
        "input_ids": tf.constant(rng.integers(5, 8000, (batch, seq)), tf.int32),
        "input_mask": tf.constant(mask),
        "segment_ids": tf.constant(np.zeros((batch, seq), "int32")),
    }


def loss_and_gradients(config, chain, dtype=None, steps=1, remat=False):
    keras.utils.set_random_seed(0)
    model = AlbertBackbone.from_albert_config(config, dtype=dtype, remat=remat)
    model.chain_shared_weights = chain
    inputs = features()

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            outputs = model(inputs, training=True)
            loss = tf.reduce_sum(tf.cast(outputs["sequence_output"], "float32") ** 2)
            loss += tf.reduce_sum(tf.cast(outputs["pooled_output"], "float32"))
        grads = tape.gradient(loss, model.trainable_variables)
        return loss, [tf.convert_to_tensor(g) for g in grads]

    for _ in range(steps):
        loss, grads = step()
    seeds = [np.array(v) for v in model.non_trainable_variables]
    return float(loss), [np.array(g) for g in grads], seeds


DROPOUT = {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides, remat",
    [
        ({}, False),
        ({"num_hidden_groups": 2, "inner_group_num": 2}, False),
        (DROPOUT, False),
        (DROPOUT, True),
    ],
    ids=["one_group", "groups_and_inner_groups", "dropout", "dropout_remat"],
)
def test_the_chain_gives_the_gradients_of_plain_reads(overrides, remat):
    config = tiny_config(**overrides)
    # Two steps: the dropout seed generators must move on as without the chain.
    plain_loss, plain, plain_seeds = loss_and_gradients(config, chain=False, steps=2, remat=remat)
    loss, chained, seeds = loss_and_gradients(config, chain=True, steps=2, remat=remat)
    assert loss == pytest.approx(plain_loss, rel=1e-6)
    assert len(chained) == len(plain)
    for a, b in zip(chained, plain):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert any(np.abs(g).max() > 1e-3 for g in plain)
    for a, b in zip(seeds, plain_seeds):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_the_chain_gives_the_gradients_of_plain_reads_under_mixed_bfloat16():
    config = tiny_config()
    plain_loss, plain, _ = loss_and_gradients(config, chain=False, dtype="mixed_bfloat16")
    loss, chained, _ = loss_and_gradients(config, chain=True, dtype="mixed_bfloat16")
    assert loss == pytest.approx(plain_loss, rel=1e-6)
    for a, b in zip(chained, plain):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


# Runs one training step per (chain mode, remat) with TF's graph dumps on (they must be set before TF
# starts, hence a fresh process; one for every case) and prints, per case, the largest AddN that
# Grappler's final graph uses to sum a shared weight's gradient: walks back from each returned
# gradient through the summation (AddN, AddV2, Sub, Neg, Identity).
GRAPPLED_ADDN = textwrap.dedent(
    """
    import glob, json, os, sys
    import tensorflow as tf
    from google.protobuf import text_format
    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertBackbone

    def largest_addn(mode, remat):
        model = AlbertBackbone.from_albert_config(AlbertConfig(**json.loads(sys.argv[1])), remat=remat == "remat")
        model.chain_shared_weights = mode == "chain"
        shared = [v for block in model.block_names for v in model.get_layer(block).trainable_variables]
        ids = tf.ones((2, 16), tf.int32)
        inputs = {"input_ids": ids, "input_mask": ids, "segment_ids": tf.zeros_like(ids)}

        def step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(inputs, training=True)["sequence_output"] ** 2)
            return tape.gradient(loss, shared)

        step.__name__ = f"train_step__{mode}__{remat}"  # names the dump file of this case
        tf.function(step)()
        prefix = os.environ["TF_DUMP_GRAPH_PREFIX"]
        [path] = glob.glob(os.path.join(prefix, f"*{step.__name__}*.main.before_partition.pbtxt"))
        graph = text_format.Parse(open(path).read(), tf.compat.v1.GraphDef())
        nodes = {node.name: node for node in graph.node}
        largest = 0
        for node in graph.node:
            if node.op != "_Retval":
                continue
            pending = [node.input[0]]
            while pending:
                producer = nodes[pending.pop().split(":")[0].lstrip("^")]
                if producer.op in ("AddN", "AddV2", "Sub", "Neg", "Identity"):
                    data_inputs = [i for i in producer.input if not i.startswith("^")]
                    if producer.op == "AddN":
                        largest = max(largest, len(data_inputs))
                    pending += data_inputs
        return largest

    cases = json.loads(sys.argv[2])
    print("LARGEST", json.dumps({f"{mode} {remat}": largest_addn(mode, remat) for mode, remat in cases}))
    """
)


@pytest.fixture(scope="module")
def largest_addn_after_grappler(tmp_path_factory):
    """{"<mode> <remat>": the largest AddN over a shared weight's partial gradients}, every case in one process."""
    dumps = tmp_path_factory.mktemp("graph_dumps")
    env = dict(os.environ, TF_DUMP_GRAPH_PREFIX=str(dumps), TF_DUMP_GRAPH_NAME_FILTER="*", TF_CPP_MIN_LOG_LEVEL="3")
    env["TF_DUMP_GRAPH_GROUPS"] = "main"
    config = tiny_config()
    fields = {k: v for k, v in json.loads(config.to_json_string()).items() if k in AlbertConfig.__dataclass_fields__}
    cases = [(mode, remat) for mode in ("unchained", "chain") for remat in ("plain", "remat")]
    result = subprocess.run(
        [sys.executable, "-c", GRAPPLED_ADDN, json.dumps(fields), json.dumps(cases)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(re.search(r"LARGEST (.*)", result.stdout).group(1))


@pytest.mark.slow
@pytest.mark.parametrize("remat", ["plain", "remat"])
def test_after_grappler_no_addn_sums_more_than_two_partials_of_a_shared_weight(largest_addn_after_grappler, remat):
    config = tiny_config()
    # Without the chain, Grappler merges the tape's sums into one AddN over every application.
    assert largest_addn_after_grappler[f"unchained {remat}"] == config.num_hidden_layers
    assert largest_addn_after_grappler[f"chain {remat}"] <= 2
