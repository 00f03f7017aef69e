"""Converts Google's TF1 ALBERT checkpoints to albert_tf's format and back.

    python -m albert_tf.convert_checkpoint --input <TF1 checkpoint prefix> \
        --albert_config_file <albert_config.json> --output_dir <dir>

writes `<dir>/albert_config.json` and `<dir>/pretrainer.weights.h5` (or
`backbone.weights.h5` when the checkpoint has no `cls/` heads). With
`--to_original`, `--input` is one of ours and `<dir>/model.ckpt` is written in
Google's layout. Nothing is written to `--output_dir` unless it all succeeds.
"""

import os
import shutil
import sys
import tempfile

from absl import app, flags

FLAGS = flags.FLAGS


def define_flags():
    """Defined only when run as a program, so importing never clashes."""
    flags.DEFINE_string("input", None, "Checkpoint to convert (TF1 prefix, or ours with --to_original).")
    flags.DEFINE_string("albert_config_file", None, "albert_config.json of the checkpoint.")
    flags.DEFINE_string("output_dir", None, "Directory to write the converted checkpoint to.")
    flags.DEFINE_bool("to_original", False, "Write ours back in Google's TF1 layout.")
    flags.mark_flags_as_required(["input", "albert_config_file", "output_dir"])

ORIGINAL_PREFIX = "model.ckpt"


def convert(input_path, config_path, output_dir, to_original=False):
    """Converts and returns the list of files written into `output_dir`."""
    from albert_tf import checkpoints
    from albert_tf.config import AlbertConfig
    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.pretrainer import AlbertPretrainer

    config = AlbertConfig.from_json_file(config_path)
    backbone = AlbertBackbone.from_albert_config(config)
    if to_original:
        _, has_heads = checkpoints.find_keras_weights(input_path)
    else:
        checkpoints.name_table(config)  # fails early on inexpressible configs
        _, names = checkpoints.read_original_checkpoint(input_path)
        has_heads = any(name.startswith("cls/") for name in names)
    model = AlbertPretrainer(backbone) if has_heads else backbone
    checkpoints.load_checkpoint(model, input_path)

    parent = os.path.dirname(os.path.abspath(output_dir))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".convert-", dir=parent)
    try:
        if to_original:
            checkpoints.save_original_checkpoint(model, os.path.join(staging, ORIGINAL_PREFIX))
            with open(os.path.join(staging, "checkpoint"), "w") as f:
                f.write(f'model_checkpoint_path: "{ORIGINAL_PREFIX}"\n')
            config.to_json_file(os.path.join(staging, checkpoints.CONFIG_FILE))
        else:
            checkpoints.save_model_dir(model, staging)
        os.makedirs(output_dir, exist_ok=True)
        written = []
        for name in sorted(os.listdir(staging)):
            os.replace(os.path.join(staging, name), os.path.join(output_dir, name))
            written.append(os.path.join(output_dir, name))
        return written
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def main(argv):
    del argv
    from albert_tf.checkpoints import CheckpointError
    from albert_tf.config import ConfigError

    try:
        written = convert(FLAGS.input, FLAGS.albert_config_file, FLAGS.output_dir, FLAGS.to_original)
    except (CheckpointError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    return 0


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    from albert_tf.cli.app import run_cli

    run_cli(main, define_flags)


if __name__ == "__main__":
    cli()
