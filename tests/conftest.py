"""Shared pytest set-up: backend, quiet TF logs, real-data location, tiny configs."""

import json
import os
import pathlib

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import pytest  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parent.parent
CONFIGS = REPO / "configs"


def shared_data_dir():
    """`$ALBERT_TF_DATA`, else `../shared/data` beside the repository."""
    return pathlib.Path(os.environ.get("ALBERT_TF_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def real_data():
    """The real public data sets; tests using it carry the `realdata` mark."""
    root = shared_data_dir()
    if not root.is_dir():
        pytest.skip(
            f"real data not found at {root}: set ALBERT_TF_DATA to the shared/data "
            "folder (CI checks it is present, so this never skips there)"
        )
    return root


@pytest.fixture
def tiny_config_dict():
    with open(CONFIGS / "albert_tiny.json") as f:
        return json.load(f)


def require_real_data():
    root = shared_data_dir()
    if not root.is_dir():
        pytest.skip(f"real data not found at {root}: set ALBERT_TF_DATA to the shared/data folder")
    return root


@pytest.fixture(scope="session")
def wikitext_spm(tmp_path_factory):
    """A 4,000-piece ALBERT SentencePiece model trained on WikiText-2 valid."""
    from data_prep.train_sentencepiece import corpus_sentences, train_sentencepiece

    root = require_real_data()
    prefix = tmp_path_factory.mktemp("spm") / "wikitext4k"
    return train_sentencepiece(
        corpus_sentences([str(root / "wikitext2" / "valid.txt")], "wikitext", lower=True),
        str(prefix), vocab_size=4000)


@pytest.fixture(scope="session")
def korean_reviews():
    """NSMC movie reviews: one list of review texts per movie file."""
    root = require_real_data()
    movies = []
    for path in sorted((root / "nsmc" / "raw").glob("*.json"))[:40]:
        reviews = [r["review"].strip() for r in json.loads(path.read_text(encoding="utf-8"))]
        reviews = [r for r in reviews if r]
        if reviews:
            movies.append(reviews)
    return movies


@pytest.fixture(scope="session")
def korean_spm(tmp_path_factory, korean_reviews):
    from data_prep.train_sentencepiece import train_sentencepiece
    from albert_tf.tokenization import preprocess_text

    prefix = tmp_path_factory.mktemp("spm") / "nsmc"
    sentences = [preprocess_text(r) for movie in korean_reviews for r in movie]
    return train_sentencepiece(sentences, str(prefix), vocab_size=2000, character_coverage=0.9995)
