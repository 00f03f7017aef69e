"""Prints layers/sizes/sharing and parameter counts of every config in configs/.

    python -m albert_tf.param_table [--json] [--configs_dir DIR]

`--configs_dir` defaults to the released configs (`albert_tf.config.shipped_configs_dir`).

Counts come from building each model and summing its weights: `backbone` is
Google's `bert/*` (embeddings, projection, layers, pooler); `with_heads` adds
the MLM and SOP heads (the MLM decoder is tied, so it adds only its bias). The
model is built in a `keras.StatelessScope`, where a weight gets its shape but no
value: the same layers and shapes, counted without materialising xxlarge's
223M initialised parameters (about a second a config instead of up to 20 s).
"""

import dataclasses
import glob
import json
import os
from typing import Optional

from albert_tf.cli.app import run_cli
from albert_tf.cli.flags import define_option_flags, settings_from_flags
from albert_tf.config import AlbertConfig, ConfigError, shipped_configs_dir
from albert_tf.options import option


@dataclasses.dataclass(frozen=True)
class ParamTableSettings:
    """What `python -m albert_tf.param_table` is asked (its flags of the same names)."""

    json: bool = option(False, "Print JSON instead of a table.")
    configs_dir: Optional[str] = option(
        None,
        "Directory of *.json model configs (default: the released configs, the checkout's configs/ or "
        "the installed package's share/albert_tf/configs).",
    )


def define_flags():
    """Defined only when run as a program, so importing never clashes."""
    define_option_flags(ParamTableSettings)


def count_parameters(config):
    """{'backbone', 'backbone_without_pooler', 'with_heads'} for an AlbertConfig.

    The weights are created in a stateless scope, so their initialisers never run (Keras defers them,
    and `initialize_variables=False` keeps them deferred); `count_params` needs only their shapes.
    `clear_session` then drops the deferred weights from Keras's global list, so no later scope
    initialises them.
    """
    import keras  # here, not with the module: --help and flag mistakes need no Keras

    from albert_tf.models.backbone import AlbertBackbone
    from albert_tf.models.pretrainer import AlbertPretrainer

    try:
        with keras.StatelessScope(initialize_variables=False):
            backbone = AlbertBackbone.from_albert_config(config)
            pretrainer = AlbertPretrainer(backbone)
        return {
            "backbone": backbone.count_params(),
            "backbone_without_pooler": backbone.count_params() - backbone.pooler.count_params(),
            "with_heads": pretrainer.count_params(),
        }
    finally:
        keras.backend.clear_session()


def table_rows(configs_dir):
    """One row per `*.json` in `configs_dir`; raises ConfigError when there is none."""
    paths = sorted(glob.glob(os.path.join(glob.escape(configs_dir), "*.json")))
    if not paths:
        reason = "is not a directory" if not os.path.isdir(configs_dir) else "holds no *.json config"
        raise ConfigError(f"--configs_dir {configs_dir}: {reason}")
    rows = []
    for path in paths:
        config = AlbertConfig.from_json_file(path)
        row = {
            "config": os.path.splitext(os.path.basename(path))[0],
            "layers": config.num_hidden_layers,
            "hidden": config.hidden_size,
            "embedding": config.embedding_size,
            "groups": config.num_hidden_groups,
            "inner_groups": config.inner_group_num,
            "sharing": config.sharing,
            "activation": config.hidden_act,
        }
        row.update(count_parameters(config))
        rows.append(row)
    return rows


def format_table(rows):
    header = (
        f"{'config':<18}{'L':>4}{'H':>6}{'E':>6}{'G':>4}{'K':>3} {'sharing':<10}"
        f"{'backbone':>14}{'w/o pooler':>14}{'with heads':>14}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r['config']:<18}{r['layers']:>4}{r['hidden']:>6}{r['embedding']:>6}"
            f"{r['groups']:>4}{r['inner_groups']:>3} {r['sharing']:<10}"
            f"{r['backbone']:>14,}{r['backbone_without_pooler']:>14,}"
            f"{r['with_heads']:>14,}"
        )
    return "\n".join(lines)


def main(argv):
    del argv

    settings = settings_from_flags(ParamTableSettings)
    rows = table_rows(settings.configs_dir or shipped_configs_dir())
    print(json.dumps(rows, indent=2) if settings.json else format_table(rows))
    return 0


def cli():
    """The console-script entry point (`python -m` runs the same)."""
    run_cli(main, define_flags)


if __name__ == "__main__":
    cli()
