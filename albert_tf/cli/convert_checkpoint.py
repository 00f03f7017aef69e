"""Converts ALBERT weights between Google's TF1 layout, ours, HF transformers and keras-hub.

    python -m albert_tf.convert_checkpoint --input PATH --output_dir OUT \
        [--output_format albert_tf|original|hf|keras_hub|plbert] [--albert_config_file CONFIG]

`--input` is detected: a TF1 checkpoint (prefix or directory; its
`albert_config.json` beside it or `--albert_config_file`), our model
directory (or `.keras` file, or run directory), an HF transformers directory
(`config.json` + `model.safetensors`), a keras-hub preset directory or a
PL-BERT directory (`config.yml` + `step_<N>.t7`, as StyleTTS 2 loads it). The
default output is our model directory: `albert_config.json` and
`pretrainer.weights.h5` / `backbone.weights.h5` (`model.keras` for a task
model) plus the vocabulary as `spm.model`. `--to_original` is
`--output_format original` (`<dir>/model.ckpt` in Google's layout). Nothing is
written to `--output_dir` unless it all succeeds, and a model already there
is replaced only when every one of its files is (a mix would load as the old one).
What the output cannot hold, or the input lacked, is said as `note:` lines.
"""

import dataclasses
import os
from typing import Optional

from absl import flags

from albert_tf.cli.app import run_cli
from albert_tf.cli.flags import define_option_flags, define_vocabulary_flags, given_tokenizer, settings_from_flags
from albert_tf.cli.run_record import write_settings
from albert_tf.config import AlbertConfig
from albert_tf.locking import OutputDirLock
from albert_tf.options import option
from albert_tf.publish import staged_files
from albert_tf.run_layout import SETTINGS_FILE
from albert_tf.tokenization import Tokenizer


@dataclasses.dataclass(frozen=True)
class ConvertSettings:
    """What `python -m albert_tf.convert_checkpoint` is asked (its flags of the same names)."""

    input: str = option(help="What to convert: TF1 checkpoint, our model dir, HF dir or keras-hub preset.")
    output_dir: str = option(help="Directory to write the converted model to.")
    albert_config_file: Optional[str] = option(None, "albert_config.json of a TF1 checkpoint (default: beside it).")
    # A string, not an enum of the formats' registry: reading the registry loads the models (seconds for --help).
    output_format: Optional[str] = option(
        None, "Format to write: a registered format's name: hf, keras_hub, original, plbert (default albert_tf)."
    )
    to_original: bool = option(False, "Same as --output_format=original.")
    tokenizer: Optional[Tokenizer] = None  # to ship instead of the one found with the input
    do_lower_case: Optional[bool] = None  # overrides the found tokenizer's setting


def define_flags():
    """Defined only when run as a program, so importing never clashes."""
    define_option_flags(ConvertSettings)
    define_vocabulary_flags(" To ship instead of the one found with the input.")
    flags.mark_flags_as_required(["input", "output_dir"])


def convert(
    input_path,
    config_path=None,
    output_dir=None,
    to_original=False,
    output_format=None,
    tokenizer=None,
    notes=None,
    do_lower_case=None,
):
    """`formats.load` then `formats.save`; returns the paths written into `output_dir`.

    Args:
        input_path: any model `albert_tf.formats.load` reads (TF1, ours, HF directory, keras-hub preset).
        config_path: `albert_config.json` for a TF1 checkpoint or our weights.
        output_dir: where to write; created, files replaced only on success.
        to_original: the old flag, same as `output_format="original"`.
        output_format: a registered format's name (`albert_tf.formats.names()`; default `albert_tf`).
        tokenizer: the tokenizer to ship instead of the one found.
        do_lower_case: overrides the found tokenizer's setting.
        notes: a list that receives what was zero-filled, left out or cannot be checked.

    Raises:
        CheckpointError: `output_dir` holds another model whose files would stay (nothing is written).
    """
    from albert_tf import formats  # Keras and TensorFlow load here, after the flags

    if to_original and output_format not in (None, "original"):
        raise formats.CheckpointError(f"--to_original contradicts --output_format={output_format}")
    output_format = output_format or ("original" if to_original else "albert_tf")
    if output_format not in formats.names():
        raise formats.CheckpointError(f"unknown output format {output_format!r}; one of {', '.join(formats.names())}")
    if config_path is not None:
        AlbertConfig.from_json_file(config_path)  # a bad config is the first error reported
    notes = [] if notes is None else notes
    loaded = formats.load(input_path, config_path, tokenizer, do_lower_case)
    notes += list(loaded.notes)
    notes += formats.unwritten(loaded.model, output_format)
    with OutputDirLock(output_dir), staged_files(output_dir) as staging:
        formats.save(loaded.model, staging, output_format, loaded.tokenizer)
        refuse_to_mix(output_dir, os.listdir(staging))
        written = [os.path.join(output_dir, name) for name in sorted(os.listdir(staging))]
    return written


def refuse_to_mix(output_dir: str, new_names) -> None:
    """Replacing a model there is fine only if every file of it is replaced: a mix loads as the old one."""
    from albert_tf import formats

    held = formats.detect(output_dir)
    if held is None:
        return
    kept = sorted(set(os.listdir(output_dir)) - set(new_names) - {SETTINGS_FILE})
    kept = [name for name in kept if not name.startswith(".")]  # the lock, the staging directory
    if kept:
        shown = ", ".join(kept[:6]) + (", …" if len(kept) > 6 else "")
        raise formats.CheckpointError(
            f"--output_dir {output_dir}: already holds another model ({held}); its {shown} would stay "
            "beside the new files and the two would mix. Give a new or empty directory"
        )


def main(argv):
    del argv
    notes = []
    settings = settings_from_flags(ConvertSettings, tokenizer=given_tokenizer())
    # The record is written with the conversion, under the same hold of the lock: a refused one (another
    # model there) leaves the directory's earlier settings.json as it was.
    with OutputDirLock(settings.output_dir):
        written = convert(
            settings.input,
            settings.albert_config_file,
            settings.output_dir,
            settings.to_original,
            settings.output_format,
            settings.tokenizer,
            notes,
            settings.do_lower_case,
        )
        write_settings(settings.output_dir)
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
