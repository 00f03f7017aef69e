"""StyleTTS 2's phoneme symbol table: the input vocabulary of PL-BERT (178 ids).

StyleTTS 2 and Kokoro read text through this table one character at a time, so a PL-BERT
pretrained on these ids drops into them as their text encoder. The table is the pad symbol
`$`, 16 punctuation marks (the space, the word separator, among them), the 52 ASCII letters and
109 IPA letters and marks. The apostrophe appears twice (ids 174 and 176); as in StyleTTS 2,
where a dict is filled in table order, the later id is the one text maps to. The pad symbol is no
phoneme: a `$` in phonemes is dropped as unknown (StyleTTS 2 would read it as padding).

Example:

>>> len(SYMBOLS), SYMBOLS[PAD_ID], SEPARATOR_ID
(178, '$', 16)
>>> symbol_ids("həlˈoʊ")
([50, 83, 54, 156, 57, 135], [])
>>> symbol_ids("a-b$")  # a symbol outside the table (or the pad) is dropped and returned
([43, 44], ['-', '$'])
"""

from typing import Dict, List, Tuple

_PAD = "$"
_PUNCTUATION = ';:,.!?¡¿—…"«»“” '
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_IPA = (
    "ɑɐɒæɓʙβɔɕçɗɖðʤəɘɚɛɜɝɞɟʄɡɠɢʛɦɧħɥʜɨɪʝɭɬɫɮʟɱɯɰŋɳɲɴøɵɸθœɶʘɹɺɾɻʀʁɽʂʃʈʧʉʊʋⱱʌɣɤʍχʎʏʑʐʒʔʡʕʢǀǁǂǃˈˌːˑʼʴʰʱʲʷˠˤ˞↓↑→↗↘'\u0329'ᵻ"
)

SYMBOLS: List[str] = [_PAD, *_PUNCTUATION, *_LETTERS, *_IPA]
# Filled in table order: a repeated symbol (the apostrophe) maps to its last id, as StyleTTS 2's dict does.
SYMBOL_IDS: Dict[str, int] = {symbol: index for index, symbol in enumerate(SYMBOLS)}
PAD_ID = 0
PUNCTUATION = _PUNCTUATION.strip()  # the marks that are symbols of their own (the space aside)
WORD_SEPARATOR = " "
SEPARATOR_ID = SYMBOL_IDS[WORD_SEPARATOR]
NUM_SYMBOLS = len(SYMBOLS)


def symbol_ids(phonemes: str) -> Tuple[List[int], List[str]]:
    """The ids of `phonemes`, one a character, and the characters outside the table (dropped)."""
    ids, unknown = [], []
    for char in phonemes:
        index = SYMBOL_IDS.get(char)
        if index is None or index == PAD_ID:
            unknown.append(char)
        else:
            ids.append(index)
    return ids, unknown
