"""What the PL-BERT tests share: WikiText-2 paragraphs as a corpus file, and PL-BERT data made from it."""

import os

import pytest

from command_helpers import run_command

COMMAND = "data_prep.create_pretraining_data"


def wikitext_corpus(real_data, path, lines: int):
    """The first `lines` lines of WikiText-2 test, each paragraph a document (blank-line separated), at `path`."""
    text = (real_data / "wikitext2" / "test.txt").read_text(encoding="utf-8").splitlines()[:lines]
    paragraphs = [line for line in text if line.strip() and not line.strip().startswith("=")]
    for marker, replacement in ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."), ("<unk>", "")):
        paragraphs = [p.replace(marker, replacement) for p in paragraphs]
    path.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    return path


def make_plbert_data(*argv):
    """`create_pretraining_data` with `argv` (PL-BERT's flags among them): the finished process."""
    return run_command(COMMAND, [str(a) for a in argv])


def load_the_way_styletts2_does(directory):
    """StyleTTS 2's `Utils/PLBERT/util.py` `load_plbert`, step by step (our code, its steps)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    yaml = pytest.importorskip("yaml")
    with open(os.path.join(directory, "config.yml")) as f:
        params = yaml.safe_load(f)["model_params"]
    encoder = transformers.AlbertModel(transformers.AlbertConfig(**params))
    steps = [int(name.split("_")[-1].split(".")[0]) for name in os.listdir(directory) if name.startswith("step_")]
    state = torch.load(os.path.join(directory, f"step_{max(steps)}.t7"), map_location="cpu")["net"]
    kept = {k[len("module.encoder.") :]: v for k, v in state.items() if k[len("module.") :].startswith("encoder.")}
    del kept["embeddings.position_ids"]  # StyleTTS 2 deletes it: it must be there
    missing, unexpected = encoder.load_state_dict(kept, strict=False)
    return encoder.eval(), missing, unexpected
