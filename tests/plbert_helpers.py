"""What the PL-BERT tests share: WikiText-2 paragraphs as a corpus file, and PL-BERT data made from it."""

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
