"""Text → words → phonemes for PL-BERT data: light normalisation, word splitting, espeak-ng per word.

Normalisation (cheap, language-neutral parts of PL-BERT's `text_normalize.py`): Unicode NFKC, zero-width
characters removed, the typographic apostrophe made ASCII (so `don’t` stays one word). Numbers,
abbreviations and symbols are left to espeak-ng, which reads them in the language (`12.5` → twelve
point five); PL-BERT's English-only number/date/money converters are not reproduced.

Words: numbers with their decimal or thousands marks (`12.5`, `1,000`), runs of letters and digits
with inner apostrophes (`don't`, one word, where PL-BERT's BERT tokenizer splits it and patches the
pieces), and each other non-space character alone (punctuation). Punctuation is its own phoneme, as
in PL-BERT, where it is a symbol of the table (`, . ! ? ; : — … " « » “ ”` ...); other marks go to
espeak-ng, which reads some aloud (`$` dollar, `%` percent, `&` and) and leaves others (`(`) as they
are: a mark outside the table then leaves an empty word, which is dropped and counted.

Phonemes: espeak-ng through `phonemizer` (PL-BERT's settings: stress marks, punctuation kept,
language-switch flags removed), one word at a time as PL-BERT does, from the library and voice data
`espeakng-loader` ships (`pip install 'albert_tf[tts]'`; nothing is downloaded). Each worker caches
every distinct word it has phonemized and sends a document's new words to espeak-ng in one call.
One correction, as PL-BERT's: English "a" on its own is the letter name (/eɪ/) to espeak-ng, but in
running text the reduced /ɐ/.

Example:

>>> words("He didn’t pay $12.5 (twice).")
['He', "didn't", 'pay', '$', '12.5', '(', 'twice', ')', '.']
"""

import logging
import re
import unicodedata
from typing import Dict, Iterable, List

from albert_tf.tokenization.plbert_symbols import PUNCTUATION
from data_prep.errors import DataPrepError

_WORD = re.compile(r"\d+(?:[.,]\d+)+|\w+(?:'\w+)*|[^\w\s]")
_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))
# espeak-ng reads a word alone; where that differs from running text (the article "a" as the letter name).
_ALONE_DIFFERS = {"en": {"a": "ɐ"}}
MAX_CACHED_WORDS = 1_000_000  # ~200 MB of words and phonemes a worker
TTS_EXTRA = "pip install 'albert_tf[tts]' (phonemizer and espeakng-loader)"


def normalize(text: str) -> str:
    """`text` with NFKC, no zero-width characters and ASCII apostrophes.

    >>> normalize("ﬁne\u200b don’t")
    "fine don't"
    """
    return unicodedata.normalize("NFKC", text).translate(_ZERO_WIDTH).replace("\u2019", "'")


def words(text: str) -> List[str]:
    """The words of `text` (normalised first): numbers, letter runs with inner apostrophes, punctuation marks."""
    return _WORD.findall(normalize(text))


def _espeak():
    """phonemizer's EspeakBackend class, pointed at espeakng-loader's library and data."""
    try:
        import espeakng_loader
        from phonemizer.backend import EspeakBackend
        from phonemizer.backend.espeak.wrapper import EspeakWrapper
    except ImportError:
        raise DataPrepError(f"PL-BERT data from text needs espeak-ng: {TTS_EXTRA}") from None
    EspeakWrapper.set_library(espeakng_loader.get_library_path())
    EspeakWrapper.set_data_path(espeakng_loader.get_data_path())
    return EspeakBackend


def check_language(language: str) -> None:
    """Refuses a language espeak-ng does not have (before any work).

    Raises:
        DataPrepError: naming the language and a few that exist.
    """
    languages = _espeak().supported_languages()
    if language not in languages:
        near = sorted(code for code in languages if code.split("-")[0] == language.split("-")[0])
        hint = f" (this family: {', '.join(near)})" if near else " (e.g. en-us, en-gb, fr-fr, de, es, ja, cmn)"
        raise DataPrepError(f"--language {language}: espeak-ng has no such language{hint}")


class WordPhonemizer:
    """Phonemizes words with espeak-ng, caching each distinct word (one per Beam worker).

    Args:
        language: an espeak-ng language code (`en-us`, `fr-fr`, ...).
    """

    def __init__(self, language: str):
        # A word read as several ("1990s": nineteen hundred nineties) is expected here: not warned about.
        quiet = logging.getLogger("data_prep.phonemes.espeak")
        quiet.setLevel(logging.ERROR)
        self.backend = _espeak()(
            language, preserve_punctuation=True, with_stress=True, language_switch="remove-flags", logger=quiet
        )
        self.alone = _ALONE_DIFFERS.get(language.split("-")[0], {})
        self.cache: Dict[str, str] = {}

    def phonemes(self, batch: Iterable[str]) -> List[str]:
        """Each word's phonemes (the table's punctuation marks stay themselves); new words go to espeak-ng in
        one call."""
        batch = list(batch)
        if len(self.cache) > MAX_CACHED_WORDS:  # a web-scale corpus' long tail: memory stays bounded
            self.cache.clear()
        new = sorted({w for w in batch if w not in self.cache})
        spoken = [w for w in new if w not in PUNCTUATION and w.lower() not in self.alone]
        if spoken:
            said = self.backend.phonemize(spoken, strip=True)
            if len(said) != len(spoken):  # phonemizer drops lines it reads as empty: fall back to one a call
                said = [(self.backend.phonemize([w], strip=True) or [""])[0] for w in spoken]
            self.cache.update(zip(spoken, said))
        for word in new:
            if word not in self.cache:
                self.cache[word] = self.alone.get(word.lower(), word)
        return [self.cache[w] for w in batch]
