"""The backend as one object (`albert_tf.compute`): each implementation answers for itself, and the
training code asks it rather than Keras. JAX's checkpoints through it: tests/test_jax_finetuning_and_kernels.py."""

import types

import keras
import pytest
import tensorflow as tf

from albert_tf import flops
from albert_tf.compute import make_compute
from albert_tf.compute.jax_compute import JaxCompute
from albert_tf.compute.tf_compute import TensorFlowCompute
from albert_tf.distribution import DistributionError
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.models.classifier import AlbertClassifier

from paths import CONFIGS, REPO


class UnreachedTPU(tf.distribute.TPUStrategy):
    """A TPUStrategy as far as the compute can tell (none is reachable here)."""

    num_replicas_in_sync = 8

    def __init__(self):
        pass


def jax_compute():
    """A JaxCompute over devices answering as two `JaxDevices` of one process do (no JAX in this process)."""
    return JaxCompute(types.SimpleNamespace(num_replicas_in_sync=2, num_processes=1, process_id=0, chief=True))


def test_each_implementation_says_whether_every_shape_compiles():
    tensorflow = make_compute()
    assert isinstance(tensorflow, TensorFlowCompute) and tensorflow.name == "tensorflow"
    assert not tensorflow.compiles_every_shape(None)  # graph mode: one trace for any width
    assert not tensorflow.compiles_every_shape(False)
    assert tensorflow.compiles_every_shape(True)  # XLA compiles each shape
    assert not tensorflow.predicts_per_shape and tensorflow.iterator_in_checkpoint
    tpu = TensorFlowCompute(UnreachedTPU())
    assert tpu.compiles_every_shape(None) and not tpu.iterator_in_checkpoint  # a TPU compiles each shape
    jax = jax_compute()
    assert jax.name == "jax" and jax.compiles_every_shape(None) and jax.compiles_every_shape(True)
    assert jax.predicts_per_shape and jax.iterator_in_checkpoint and jax.num_replicas_in_sync == 2
    with pytest.raises(DistributionError, match="^--nojit_compile: on Keras' JAX backend the training step is always"):
        jax.compiles_every_shape(False)


def test_tensorflow_checkpoint_state_keeps_the_object_names_of_existing_checkpoints():
    model = AlbertClassifier(AlbertBackbone.from_albert_config(str(CONFIGS / "albert_tiny.json")), 2)
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    compute = make_compute()
    pretraining = compute.checkpoint_state(model, optimizer)
    assert sorted(pretraining.trackables()) == ["model", "optimizer"]
    assert pretraining.trackables()["model"] is model
    fine_tuning = compute.checkpoint_state(model, optimizer, seed_states=True)
    assert sorted(fine_tuning.trackables()) == ["model", "optimizer", "seed_states"]
    assert fine_tuning.trackables()["seed_states"]  # the dropout layers' seed generators


def test_a_tensorflow_cluster_is_its_strategys():
    cluster = tf.train.ClusterSpec({"worker": ["127.0.0.1:1", "127.0.0.1:2"]})
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, task_type="worker", task_id=1)
    compute = TensorFlowCompute(types.SimpleNamespace(cluster_resolver=resolver, num_replicas_in_sync=2))
    assert not compute.chief and compute.cluster_resolver is resolver
    assert compute.num_processes == 1 and compute.describe() is None  # TF_CONFIG says the processes
    assert make_compute().chief and make_compute().any_process(True) and not make_compute().any_process(False)


def test_training_code_asks_the_compute_not_keras():
    package = REPO / "albert_tf"
    sources = [package / "pretraining" / "loop.py", *sorted((package / "finetuning").glob("*.py"))]
    asking = [str(path.relative_to(REPO)) for path in sources if "keras.backend.backend()" in path.read_text()]
    assert asking == []


def test_cpus_have_no_peak_and_known_accelerators_do():
    assert make_compute().peak_flops("float32") is None  # this machine computes on its CPUs
    assert flops.peak_flops_of("NVIDIA H200", "bfloat16") == 989.4e12
    assert flops.peak_flops_of("NVIDIA H100 PCIe", "float32") == 378e12  # not the SXM part's
    assert flops.peak_flops_of("TPU v5 lite", "float32") == 197e12 and flops.peak_flops_of("Quadro", "bf16") is None


class PeakedCompute(TensorFlowCompute):
    """This CPU, as if its peak were known (no accelerator here to read one from)."""

    def peak_flops(self, mixed_precision):
        return 1e12


@pytest.mark.realdata
def test_the_progress_window_shows_mfu_where_the_peak_is_known(pretraining_data, tmp_path):
    """On CPUs the peak is None and the window has no mfu (`test_cpus_have_no_peak_and_known_accelerators_do`)."""
    from albert_tf.config import AlbertConfig
    from albert_tf.inputs.shard_reader import resolve_input
    from albert_tf.pretraining.job import pretrain
    from albert_tf.pretraining.settings import PretrainSettings

    settings = PretrainSettings(
        output_dir=str(tmp_path / "run"),
        input_file=pretraining_data["data"],
        albert_config_file=pretraining_data["config"],
        train_batch_size=4,
        max_seq_length=64,
        num_train_steps=2,
        num_warmup_steps=1,
        save_checkpoints_steps=2,
        log_every_steps=1,
        verbose=False,
    )
    data = resolve_input(pretraining_data["data"])
    compute = PeakedCompute(tf.distribute.get_strategy())
    history = pretrain(settings, compute, data=data)["history"]
    config = AlbertConfig.from_json_file(pretraining_data["config"])
    step_flops = flops.train_step_flops(config, 4, 64, predictions=data.data.predictions_per_row)
    assert [window["step"] for window in history] == [1, 2]
    for window in history:
        assert window["mfu"] == pytest.approx(step_flops * window["steps/s"] / 1e12)
