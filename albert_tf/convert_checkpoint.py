"""Converts ALBERT weights between Google's TF1 layout, ours, HF transformers and keras-hub.

    python -m albert_tf.convert_checkpoint --input PATH --output_dir OUT \
        [--output_format albert_tf|original|hf|keras_hub] [--albert_config_file CONFIG]

`--input` is detected: a TF1 checkpoint (prefix or directory; its
`albert_config.json` beside it or `--albert_config_file`), our model
directory (or `.keras` file, or run directory), an HF transformers directory
(`config.json` + `model.safetensors`) or a keras-hub preset directory. The
default output is our model directory: `albert_config.json` and
`pretrainer.weights.h5` / `backbone.weights.h5` (`model.keras` for a task
model) plus the vocabulary as `spm.model`. `--to_original` is
`--output_format original` (`<dir>/model.ckpt` in Google's layout). Nothing is
written to `--output_dir` unless it all succeeds.
"""

import os

from absl import flags

from albert_tf import checkpoints, loading
from albert_tf.checkpoints import CheckpointError
from albert_tf.cli.app import run_cli
from albert_tf.config import AlbertConfig
from albert_tf.interop import hf, keras_hub
from albert_tf.locking import OutputDirLock
from albert_tf.models.backbone import AlbertBackbone
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.publish import staged_files

FLAGS = flags.FLAGS
OUTPUT_FORMATS = ("albert_tf", "original", "hf", "keras_hub")
ORIGINAL_PREFIX = "model.ckpt"


def define_flags():
    """Defined only when run as a program, so importing never clashes."""
    flags.DEFINE_string("input", None, "What to convert: TF1 checkpoint, our model dir, HF dir or keras-hub preset.")
    flags.DEFINE_string("albert_config_file", None, "albert_config.json of a TF1 checkpoint (default: beside it).")
    flags.DEFINE_string("output_dir", None, "Directory to write the converted model to.")
    flags.DEFINE_enum("output_format", None, OUTPUT_FORMATS, "Format to write (default albert_tf).")
    flags.DEFINE_bool("to_original", False, "Same as --output_format=original.")
    flags.DEFINE_string("spm_model_file", None, "SentencePiece model to ship (default: the one found with the input).")
    flags.DEFINE_string("vocab_file", None, "WordPiece vocab.txt to ship instead (default: the one found).")
    flags.DEFINE_bool("do_lower_case", None, "The tokenizer's lowercasing (default: the one saved with the input).")
    flags.mark_flags_as_required(["input", "output_dir"])


def _write_ours(loaded, staging):
    model = loaded.model
    if isinstance(model, (AlbertBackbone, AlbertPretrainer)):
        checkpoints.save_model_dir(model, staging)
    else:  # a task model: the whole Keras model, config beside it for people and tools
        model.save(os.path.join(staging, "model.keras"))
        model.backbone.albert_config.to_json_file(os.path.join(staging, checkpoints.CONFIG_FILE))


def _write_original(loaded, staging):
    model = loaded.model
    if not isinstance(model, (AlbertBackbone, AlbertPretrainer)):
        raise CheckpointError(
            f"{type(model).__name__}: Google's TF1 layout here covers the encoder and "
            "the pretraining heads only; convert to albert_tf, hf or keras_hub instead"
        )
    checkpoints.save_original_checkpoint(model, os.path.join(staging, ORIGINAL_PREFIX))
    with open(os.path.join(staging, "checkpoint"), "w") as f:
        f.write(f'model_checkpoint_path: "{ORIGINAL_PREFIX}"\n')
    model = getattr(model, "backbone", model)
    model.albert_config.to_json_file(os.path.join(staging, checkpoints.CONFIG_FILE))


def export_notes(model, output_format):
    """What a format cannot hold of `model` (said, never silent)."""
    name = type(model).__name__
    if output_format == "keras_hub" and name == "AlbertPretrainer":
        return ["keras-hub's AlbertMaskedLM has no SOP head: sop_head is not written"]
    if output_format == "hf" and name in ("AlbertSpanQA", "AlbertTokenClassifier"):
        return [
            f"HF's {name.replace('Albert', 'AlbertFor').replace('SpanQA', 'QuestionAnswering')} "
            "has no pooler: it is not written (the head does not read it)"
        ]
    return []


def convert(
    input_path,
    config_path=None,
    output_dir=None,
    to_original=False,
    output_format=None,
    spm_model_file=None,
    notes=None,
    vocab_file=None,
    do_lower_case=None,
):
    """Converts and returns the paths written into `output_dir`.

    Args:
        input_path: any model `albert_tf.loading.load_model` reads (TF1,
            ours, HF directory, keras-hub preset).
        config_path: `albert_config.json` for a TF1 checkpoint or our weights.
        output_dir: where to write; created, files replaced only on success.
        to_original: the old flag, same as `output_format="original"`.
        output_format: one of `OUTPUT_FORMATS` (default `albert_tf`).
        spm_model_file / vocab_file / do_lower_case: the tokenizer to ship instead of the one found.
        notes: a list that receives what was zero-filled or left out.
    """
    if to_original and output_format not in (None, "original"):
        raise CheckpointError(f"--to_original contradicts --output_format={output_format}")
    output_format = output_format or ("original" if to_original else "albert_tf")
    if output_format not in OUTPUT_FORMATS:
        raise CheckpointError(f"unknown output format {output_format!r}; one of {', '.join(OUTPUT_FORMATS)}")
    if config_path is not None:
        AlbertConfig.from_json_file(config_path)  # a bad config is the first error reported
    notes = [] if notes is None else notes
    loaded = loading.load_model(input_path, config_path, spm_model_file, vocab_file, do_lower_case)
    notes += [f"{input_path}: has no {name}: set to zeros" for name in loaded.zero_filled]
    notes += export_notes(loaded.model, output_format)
    writers = {
        "albert_tf": _write_ours,
        "original": _write_original,
        "hf": lambda l, d: hf.save_hf_dir(l.model, d, l.spm_model_file),
        "keras_hub": lambda l, d: keras_hub.save_preset(l.model, d, l.spm_model_file),
    }
    with OutputDirLock(output_dir), staged_files(output_dir) as staging:
        writers[output_format](loaded, staging)
        if output_format in ("albert_tf", "original") and loaded.tokenizer is not None:
            loaded.tokenizer.save(staging)  # vocabulary + tokenizer.json: the model carries its tokenizer
        written = [os.path.join(output_dir, name) for name in sorted(os.listdir(staging))]
    return written


def main(argv):
    del argv
    notes = []
    written = convert(
        FLAGS.input,
        FLAGS.albert_config_file,
        FLAGS.output_dir,
        FLAGS.to_original,
        FLAGS.output_format,
        FLAGS.spm_model_file,
        notes,
        FLAGS.vocab_file,
        FLAGS.do_lower_case,
    )
    for note in notes:
        print(f"note: {note}")
    for path in written:
        print(f"wrote {path}")
    return 0


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    run_cli(main, define_flags)


if __name__ == "__main__":
    cli()
