"""Fine-tuning's speed paths through the runner: length-grouped batches (same outputs as fixed padding)."""

import dataclasses
import json

import keras
import numpy as np
import pytest

from albert_tf.compute import make_compute
from albert_tf.finetuning import best_model, datasets, runner
from albert_tf.finetuning.settings import FineTuneError, FineTuneSettings
from albert_tf.inputs import length_batching
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.tasks import glue
from albert_tf.tokenization import SentencePieceTokenizer

from paths import CONFIGS

pytestmark = pytest.mark.realdata
MAX_SEQ_LENGTH = 128


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory):
    """albert_tiny with the 4,000 pieces of the wikitext SentencePiece model."""
    config = json.loads((CONFIGS / "albert_tiny.json").read_text())
    path = tmp_path_factory.mktemp("config") / "albert_config.json"
    path.write_text(json.dumps({**config, "vocab_size": 4000}))
    return str(path)


@pytest.fixture(scope="module")
def fine_tuned_dir(tmp_path_factory, wikitext_spm, tiny_config):
    """A tiny classifier (random weights, fixed seed) saved as a fine-tuning run's best/."""
    keras.utils.set_random_seed(3)
    model = AlbertClassifier(AlbertBackbone.from_albert_config(tiny_config), 2)
    directory = tmp_path_factory.mktemp("fine_tuned")
    best_model.save(model, str(directory), {"accuracy": 0.5}, SentencePieceTokenizer(wikitext_spm))
    return directory


def evaluate(fine_tuned_dir, real_data, output_dir, **overrides):
    settings = FineTuneSettings(
        output_dir=str(output_dir),
        init_checkpoint=str(fine_tuned_dir),
        do_train=False,
        max_seq_length=MAX_SEQ_LENGTH,
        eval_batch_size=32,
        verbose=False,
        **overrides,
    )
    summary = runner.run(glue.task("sst-2", str(real_data / "glue")), settings)
    return summary, [(output_dir / path).read_text() for path in summary["predictions"]]


@pytest.mark.slow
def test_grouped_evaluation_equals_fixed_padding_on_sst2_dev(fine_tuned_dir, real_data, wikitext_spm, tmp_path):
    grouped, grouped_file = evaluate(fine_tuned_dir, real_data, tmp_path / "grouped")
    fixed, fixed_file = evaluate(fine_tuned_dir, real_data, tmp_path / "fixed", length_grouping=False)
    assert grouped["eval"]["num_examples"] == 872
    assert grouped["eval"] == fixed["eval"]
    assert grouped_file == fixed_file  # every dev prediction, in input order

    # The logits behind them: within float tolerance, the same argmax, from batches far shorter than 128.
    model = best_model.load(str(fine_tuned_dir))
    tokenizer = SentencePieceTokenizer(wikitext_spm)
    examples, _ = glue.task("sst-2", str(real_data / "glue")).read("dev")
    features = glue.encode_examples(examples, tokenizer, MAX_SEQ_LENGTH)
    today = model.predict(features, batch_size=32, verbose=0)["logits"]
    grouped_logits = datasets.predict(model, features, 32)["logits"]
    off = datasets.predict(model, features, 32, length_grouping=False)["logits"]
    np.testing.assert_allclose(grouped_logits, today, atol=2e-5, rtol=1e-5)
    np.testing.assert_array_equal(grouped_logits.argmax(-1), today.argmax(-1))
    np.testing.assert_array_equal(off, today)  # --nolength_grouping: today's fixed shapes, the same numbers
    assert np.mean(features["input_mask"].sum(-1)) < 40  # the cut removed real work


def test_only_steps_compiled_per_shape_need_few_batch_widths():
    compute = make_compute()  # TensorFlow's default strategy (a TPU's: tests/test_compute.py)
    assert not compute.compiles_every_shape(jit_compile=None)  # graph mode: one trace for any width
    assert compute.compiles_every_shape(jit_compile=True)
    assert not compute.predicts_per_shape


def test_grouped_batches_are_cut_to_their_longest_row_or_under_xla_to_a_bucket(real_data, wikitext_spm):
    tokenizer = SentencePieceTokenizer(wikitext_spm)
    examples, _ = glue.task("sst-2", str(real_data / "glue")).read("dev")
    features = glue.encode_examples(examples, tokenizer, MAX_SEQ_LENGTH)
    labels = np.array([int(e.label) for e in examples])
    grouped = datasets.train_dataset(features, labels, 32, seed=1)
    widths = set()
    for batch, _ in grouped.take(60):
        longest = int(length_batching.true_lengths({"input_mask": batch["input_mask"].numpy()}).max())
        assert batch["input_ids"].shape[1] == longest  # no padding column beyond the batch's longest row
        widths.add(longest)
    assert len(widths) > len(length_batching.fine_bucket_lengths(MAX_SEQ_LENGTH)) and min(widths) <= 24, widths
    compiled = datasets.train_dataset(features, labels, 32, seed=1, compiled=True)
    compiled_widths = {int(batch["input_ids"].shape[1]) for batch, _ in compiled.take(60)}
    assert compiled_widths <= set(length_batching.fine_bucket_lengths(MAX_SEQ_LENGTH)), compiled_widths
    fixed = datasets.train_dataset(features, labels, 32, seed=1, length_grouping=False)
    assert fixed.element_spec[0]["input_ids"].shape.as_list() == [32, MAX_SEQ_LENGTH]
    # fit deletes its iterator on return; tf.data's autotune thread would make that wait up to a minute.
    for dataset in (grouped, compiled, fixed):
        assert dataset.options().autotune.enabled is False
    with pytest.raises(Exception, match="fewer than --train_batch_size 1000") as raised:
        datasets.train_dataset(features, labels, 1000, seed=1)
    assert type(raised.value).__name__ == "FineTuneError"


@pytest.mark.slow
def test_grouped_training_through_the_runner_with_accumulation_and_remat(
    real_data, wikitext_spm, tiny_config, tmp_path
):
    settings = FineTuneSettings(
        output_dir=str(tmp_path / "out"),
        albert_config_file=tiny_config,
        tokenizer=SentencePieceTokenizer(wikitext_spm),
        max_seq_length=64,
        train_batch_size=16,
        grad_accum_steps=2,
        remat=True,
        eval_batch_size=64,
        train_step=4,
        save_checkpoints_steps=2,
        learning_rate=1e-4,
        verbose=False,
    )
    task = glue.task("sst-2", str(real_data / "glue"))
    summary = runner.run(task, settings)
    assert [h["global_step"] for h in summary["history"]] == [2, 4]
    assert summary["eval"]["num_examples"] == 872 and np.isfinite(summary["history"][-1]["train_loss"])
    record = json.loads((tmp_path / "out" / "best" / "eval_results.json").read_text())
    assert record["accuracy"] == max(h["accuracy"] for h in summary["history"])
    assert dataclasses.asdict(settings)["length_grouping"] is True


# ---- --mixed_precision, --strategy, --jit_compile (issue 40) -----------------------------------------


def test_a_tpu_strategy_with_no_tpu_to_reach_is_one_line_naming_the_flag(monkeypatch):
    """TensorFlow's own ValueError ("Please provide a TPU Name") came out as a traceback."""
    from albert_tf.distribution import DistributionError, DistributionSettings

    for name in ("TPU_NAME", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "TPU_CONFIG"):  # where TensorFlow looks for one
        monkeypatch.delenv(name, raising=False)

    with pytest.raises(DistributionError, match="^--strategy tpu: no --tpu given and this machine is no TPU VM: "):
        make_compute(DistributionSettings(strategy="tpu"))


@pytest.mark.parametrize("strategy", ["default", "mirrored"])
def test_a_tpu_name_without_the_tpu_strategy_is_refused_naming_the_flag(strategy):
    """--tpu was read only by --strategy tpu: under another strategy (or on JAX) it was silently ignored."""
    from albert_tf.distribution import DistributionError, DistributionSettings

    expected = f"^--tpu my-tpu: names the TPU of --strategy tpu, but --strategy is {strategy}$"
    with pytest.raises(DistributionError, match=expected):
        make_compute(DistributionSettings(strategy=strategy, tpu="my-tpu"))


@pytest.mark.slow
@pytest.mark.parametrize(
    "speed",
    [
        {"mixed_precision": "bfloat16"},
        {"mixed_precision": "float16"},
        {"strategy": "mirrored"},
        {"jit_compile": True},
    ],
    ids=["bfloat16", "float16", "mirrored", "jit_compile"],
)
def test_speed_flags_train_through_the_runner(real_data, wikitext_spm, tiny_config, tmp_path, monkeypatch, speed):
    from albert_tf.finetuning import training

    compiled = {}
    original_compile = keras.Model.compile

    def recording_compile(self, *args, **kwargs):
        compiled.update(kwargs, policy=self.backbone.dtype_policy.name if hasattr(self, "backbone") else None)
        compiled["replicas"] = self.distribute_strategy.num_replicas_in_sync
        compiled["strategy"] = type(self.distribute_strategy).__name__
        return original_compile(self, *args, **kwargs)

    monkeypatch.setattr(keras.Model, "compile", recording_compile)
    settings = FineTuneSettings(
        output_dir=str(tmp_path / "out"),
        albert_config_file=tiny_config,
        tokenizer=SentencePieceTokenizer(wikitext_spm),
        max_seq_length=64,
        train_batch_size=16,
        eval_batch_size=64,
        train_step=2,
        save_checkpoints_steps=2,
        learning_rate=1e-4,
        verbose=False,
        **speed,
    )
    summary = runner.run(glue.task("sst-2", str(real_data / "glue")), settings)
    assert summary["eval"]["num_examples"] == 872 and np.isfinite(summary["history"][-1]["train_loss"])
    assert compiled["jit_compile"] is bool(settings.jit_compile)  # TensorFlow: XLA only when asked
    if settings.mixed_precision == "bfloat16":
        assert compiled["policy"] == "mixed_bfloat16"
    if settings.mixed_precision == "float16":  # float16 gradients underflow without loss scaling
        assert compiled["policy"] == "mixed_float16"
        assert isinstance(compiled["optimizer"], keras.optimizers.LossScaleOptimizer)
    if settings.strategy == "mirrored":
        assert compiled["strategy"] == "MirroredStrategy"
    # best/ is float32 whatever the compute policy; LayerNorm kept float32 while training.
    saved = best_model.load(str(tmp_path / "out"))
    assert saved.backbone.dtype_policy.name == "float32"
    assert training.CLIP_NORM == 1.0


# Two replicas need two devices before TensorFlow starts: the CPU split in two, in a fresh process.
TWO_REPLICAS = """
import json, sys
import numpy as np
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from albert_tf.compute.tf_compute import TensorFlowCompute
from albert_tf.finetuning import runner
from albert_tf.tasks import glue
from albert_tf.finetuning.settings import FineTuneSettings
from albert_tf.tokenization import SentencePieceTokenizer

args = json.loads(sys.argv[1])
replicas = {}
make_compute = runner.make_compute


def recording(distribution):
    if distribution.strategy == "mirrored":
        compute = TensorFlowCompute(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
    else:
        compute = make_compute(distribution)
    replicas[distribution.strategy] = compute.num_replicas_in_sync
    return compute


runner.make_compute = recording
results = {}
for strategy in ("default", "mirrored"):
    settings = FineTuneSettings(output_dir=args["out"] + "/" + strategy, strategy=strategy, dropout=0.0, seed=7,
                                verbose=False, tokenizer=SentencePieceTokenizer(args["spm"]), **args["settings"])
    summary = runner.run(glue.task("sst-2", args["glue"]), settings)
    results[strategy] = {"loss": [h["train_loss"] for h in summary["history"]], "eval": summary["eval"]}
print(json.dumps({"replicas": replicas, "results": results}))
"""


@pytest.mark.slow
def test_two_mirrored_replicas_train_as_one_device_does(real_data, wikitext_spm, tiny_config, tmp_path):
    import subprocess
    import sys

    from paths import REPO

    settings = dict(
        albert_config_file=tiny_config,
        max_seq_length=64,
        train_batch_size=16,
        eval_batch_size=64,
        train_step=4,
        save_checkpoints_steps=2,
        learning_rate=1e-3,
    )
    args = {"out": str(tmp_path), "glue": str(real_data / "glue"), "spm": wikitext_spm, "settings": settings}
    done = subprocess.run(
        [sys.executable, "-c", TWO_REPLICAS, json.dumps(args)], cwd=REPO, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["replicas"] == {"default": 1, "mirrored": 2}
    one, two = report["results"]["default"], report["results"]["mirrored"]
    # The global batch split over two replicas gives the same mean gradient, so the same training.
    np.testing.assert_allclose(two["loss"], one["loss"], rtol=1e-4)
    assert two["eval"]["num_examples"] == 872
    assert two["eval"]["accuracy"] == pytest.approx(one["eval"]["accuracy"], abs=2 / 872)


def test_multi_worker_fine_tuning_is_refused_naming_the_keras_limit():
    with pytest.raises(FineTuneError, match=r"--strategy multi_worker: .*keras-team/keras#20329.*--strategy mirrored"):
        FineTuneSettings(output_dir="x", strategy="multi_worker")
    with pytest.raises(FineTuneError, match=r"on --backend jax, `fit` would split each batch over the processes"):
        FineTuneSettings(output_dir="x", strategy="multi_worker")


def test_speed_flag_values_are_checked():
    with pytest.raises(FineTuneError, match="--mixed_precision must be one of"):
        FineTuneSettings(output_dir="x", mixed_precision="int8")
    with pytest.raises(FineTuneError, match="--strategy must be one of"):
        FineTuneSettings(output_dir="x", strategy="horovod")


def test_layer_norm_stays_float32_in_a_bfloat16_fine_tuning_model(tiny_config):
    from albert_tf.config import AlbertConfig
    from albert_tf.finetuning.start import Start

    start = Start(AlbertConfig.from_json_file(tiny_config), "tiny", None, None)
    model = AlbertClassifier(start.backbone(dtype="mixed_bfloat16"), 2)
    assert model.backbone.embeddings.layer_norm.compute_dtype == "float32"
    assert model.backbone.embedding_projection.compute_dtype == "bfloat16"
    outputs = model(
        {name: np.ones((2, 16), "int32") for name in ("input_ids", "input_mask", "segment_ids")}, training=False
    )
    assert model.get_layer("classifier").compute_dtype == "bfloat16" and np.isfinite(outputs["logits"]).all()


# ---- pretraining eval: batches cut to their longest row, the same metrics --------------------------------
def test_pretraining_eval_on_cut_batches_equals_fixed_padding(pretraining_data, monkeypatch):
    import tensorflow as tf

    from albert_tf.config import AlbertConfig
    from albert_tf.inputs.shard_reader import pretraining_dataset, resolve_input
    from albert_tf.pretraining import loop as loop_module
    from albert_tf.pretraining.loop import PretrainingLoop
    from albert_tf.pretraining.settings import PretrainSettings

    # The data's rows are packed to 64: read at 96 (32 more padding positions), the cut must give 64 back.
    def padded_to_96(*args, **kwargs):
        def pad(inputs, labels):
            widened = {
                name: tf.pad(value, [[0, 0], [0, 32]]) if name in length_batching.SEQUENCE_FEATURES else value
                for name, value in inputs.items()
            }
            return widened, labels

        return pretraining_dataset(*args, **kwargs).map(pad)

    monkeypatch.setattr(loop_module, "pretraining_dataset", padded_to_96)
    settings = PretrainSettings(
        output_dir="unused", train_batch_size=4, eval_batch_size=4, max_seq_length=96, max_eval_steps=6, verbose=False
    )
    keras.utils.set_random_seed(5)
    data = resolve_input(pretraining_data["data"])
    loop = PretrainingLoop(make_compute(), AlbertConfig.from_json_file(pretraining_data["config"]), settings, data)
    context = tf.distribute.InputContext()
    eval_dataset = loop.eval_dataset(context)
    assert eval_dataset.options().autotune.enabled is False  # a fresh iterator per evaluation
    for inputs, _ in eval_dataset.take(6):
        longest = int(length_batching.true_lengths({"input_mask": inputs["input_mask"].numpy()}).max())
        assert inputs["input_ids"].shape[1] == longest <= 64, longest
    grouped = loop.evaluate()
    loop.settings = dataclasses.replace(settings, length_grouping=False)
    assert {int(inputs["input_ids"].shape[1]) for inputs, _ in loop.eval_dataset(context).take(3)} == {96}
    fixed = loop.evaluate()
    assert grouped.keys() == fixed.keys()
    for name in fixed:
        assert grouped[name] == pytest.approx(fixed[name], rel=1e-5, abs=1e-6), name


# ---- predict's file mode: grouped by length, outputs in input order ---------------------------------
def test_predictor_on_grouped_batches_equals_the_fixed_path_in_input_order(fine_tuned_dir, real_data, wikitext_spm):
    from albert_tf.inference import Predictor

    model = best_model.load(str(fine_tuned_dir))
    tokenizer = SentencePieceTokenizer(wikitext_spm)
    examples, _ = glue.task("sst-2", str(real_data / "glue")).read("dev")
    texts = [example.text_a for example in examples][:300]
    result = Predictor(model, tokenizer, MAX_SEQ_LENGTH).predict(texts, batch_size=4)  # 300 rows: 2 chunks
    features = glue.encode_examples(examples[:300], tokenizer, MAX_SEQ_LENGTH)
    today = model.predict(features, batch_size=32, verbose=0)["logits"]
    np.testing.assert_allclose(result["logits"], today, atol=2e-5, rtol=1e-5)
    np.testing.assert_array_equal(result["labels"], today.argmax(-1))
