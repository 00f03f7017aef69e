"""What several pretraining test files share: the CLI in a subprocess, its flags, reading what a run wrote."""

import os
import socket
import subprocess
import sys

import numpy as np

from paths import REPO

# run_pretraining with every step lasting at least 0.2 s (the loop calls worker_faults.step_finished after each),
# so a signal sent once a checkpoint exists lands steps before the run's end however busy the machine.
SLOWED_RUN = """
import time
import albert_tf.cli  # reads --backend from argv before Keras is imported
from albert_tf.pretraining import worker_faults
step_finished = worker_faults.step_finished
worker_faults.step_finished = lambda: (time.sleep(0.2), step_finished())
from albert_tf.cli.run_pretraining import cli
cli()
"""


def cli(args, env=None, **kwargs):
    return subprocess.Popen(
        [sys.executable, "-m", "albert_tf.run_pretraining"] + args,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})},
        **kwargs,
    )


def common_args(data, output_dir, steps, **extra):
    args = {
        "input_file": data["data"],
        "albert_config_file": data["config"],
        "output_dir": output_dir,
        "train_batch_size": 16,
        "num_train_steps": steps,
        "num_warmup_steps": 2,
        "learning_rate": 0.01,
        "save_checkpoints_steps": 5,
        "log_every_steps": 5,
        "deterministic": True,
        "export": False,
    }
    args.update(extra)
    return [f"--{k}={v}" if not isinstance(v, bool) else (f"--{k}" if v else f"--no{k}") for k, v in args.items()]


def latest_checkpoint_step(checkpoint_dir) -> int:
    """The step of the checkpoint the `checkpoint` state file names (-1: none yet)."""
    import tensorflow as tf

    latest = tf.train.latest_checkpoint(str(checkpoint_dir)) if os.path.isdir(checkpoint_dir) else None
    return int(latest.rsplit("-", 1)[1]) if latest else -1


def save_fresh_pretrainer(directory, config_file) -> str:
    """A fresh model saved once, so runs on both backends start from the same weights (their initializers differ)."""
    from albert_tf import AlbertBackbone, AlbertPretrainer, formats

    formats.save(AlbertPretrainer(AlbertBackbone.from_albert_config(config_file)), str(directory))
    return str(directory)


def final_weights(output_dir):
    from albert_tf.config import AlbertConfig
    from albert_tf.formats import load_weights
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.pretrainer import AlbertPretrainer

    final = os.path.join(output_dir, "final")
    model = AlbertPretrainer(
        AlbertBackbone.from_albert_config(AlbertConfig.from_json_file(os.path.join(final, "albert_config.json")))
    )
    load_weights(model, final)
    return model.get_weights()


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def read_dataset(directory):
    import tensorflow as tf

    from albert_tf.inputs.shard_reader import decode_batch, feature_description
    from albert_tf.shard_set import PretrainingData

    data = PretrainingData.load(str(directory))
    spec = feature_description(data.max_seq_length, data.max_predictions_per_seq)
    records = tf.data.TFRecordDataset(data.shard_paths()).batch(100000)
    batches = [decode_batch(b, spec) for b in records]
    return data.metadata, {k: np.concatenate([b[k].numpy() for b in batches]) for k in spec}


def handmade_data(directory, rows_hold=3, seq=16, predictions=4, rows=2):
    """A data directory as data_prep writes one (a shard of `rows` all-zero rows, its `metadata.json`), in
    milliseconds: for tests of what a reader makes of its metadata, not of its text."""
    import json

    from albert_tf.shard_set import HashingWriter, feature_spec, metadata_record, shard_name
    from data_prep.tfrecord import encode_example, write_record

    os.makedirs(directory, exist_ok=True)
    name = shard_name(0, 1)
    spec = feature_spec(seq, predictions, rows_hold)
    with open(os.path.join(directory, name), "wb") as f:
        shard = HashingWriter(f)
        for _ in range(rows):
            write_record(shard, encode_example([(k, v["dtype"], [0] * v["length"]) for k, v in spec.items()]))
    metadata = metadata_record(
        num_instances=rows, shards={name: rows}, shard_files={name: shard.manifest_entry()}, max_seq_length=seq,
        max_predictions_per_seq=predictions, max_instances_per_row=rows_hold, max_predictions_per_row=predictions,
        vocab_size=30, vocab_type="sentencepiece", vocab_sha256="0" * 64, task="sop", settings={},
        input_files=[], counts={"documents": 1, "instances": rows},
    )  # fmt: skip
    with open(os.path.join(directory, "metadata.json"), "w", encoding="utf-8") as f:
        json.dump(metadata, f)
    return str(directory)
