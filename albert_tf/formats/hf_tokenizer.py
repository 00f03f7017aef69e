"""HF's tokenizer files for our SentencePiece vocabulary: `AutoTokenizer` on an export gives our ids.

transformers builds its AlbertTokenizer from `spiece.model` with its own
pipeline, which differs from ours (and the original's): the user-defined
symbols (`.`, `-`, `(` ...) become added tokens split out before the `▁` is
placed, so `" ."` loses its `▁` (other ids on most English sentences); and
the original's digit-comma re-split (`▁1990,` → `▁1990` `,`) is missing. We
write a `tokenizer.json` for transformers' generic fast tokenizer
(`tokenizer_class: PreTrainedTokenizerFast`) that does what our
`SentencePieceTokenizer` does:

- normalizer: NFKD, accents stripped, lowercase (`preprocess_text`), then
  SentencePiece's own normaliser (NFKC and the model's precompiled charsmap);
- pre-tokenizer: split on whitespace, `▁` before every word;
- model: the Unigram pieces and scores of the `.model`, user-defined symbols
  as ordinary pieces, digit-comma pieces scored out of reach.

What remains different (README "HF transformers"): where two segmentations
of the same pieces in another order score exactly alike (runs such as `ㅜㅜㅜ`
or `~~~~`), SentencePiece and `tokenizers` break the tie differently; and
`[CLS]`, `[SEP]`, `[MASK]`, `<pad>`, `<unk>` typed in the text are special
tokens to transformers, pieces to us.
"""

import base64
from typing import Dict, List

from sentencepiece import sentencepiece_model_pb2

# sentencepiece ModelProto.SentencePiece.Type
_CONTROL, _USER_DEFINED, _BYTE = 3, 4, 6
# A digit-comma piece is re-split by the original's encode_pieces: never chosen here.
OUT_OF_REACH = -1e6
TOKENIZER_CLASS = "PreTrainedTokenizerFast"


def _is_digit_comma(piece: str) -> bool:
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def tokenizer_json(tokenizer) -> Dict:
    """The `tokenizers` serialization (HF `tokenizer.json`) of our SentencePiece `tokenizer`."""
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(tokenizer.model_proto)
    vocab = []
    for piece in proto.pieces:
        score = piece.score
        if piece.type == _USER_DEFINED:
            score = 0.0  # SentencePiece always takes a user-defined symbol whole
        elif _is_digit_comma(piece.piece):
            score = OUT_OF_REACH
        vocab.append([piece.piece, score])
    normalizers: List[Dict] = [{"type": "NFKD"}, {"type": "StripAccents"}]
    if tokenizer.do_lower_case:
        normalizers.append({"type": "Lowercase"})
    charsmap = proto.normalizer_spec.precompiled_charsmap
    if charsmap:  # SentencePiece's NFKC-based normaliser (it recomposes what NFKD split, Hangul included)
        normalizers += [
            {"type": "NFKC"},
            {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode("ascii")},
        ]
    prepend = "always" if proto.normalizer_spec.add_dummy_prefix else "never"
    metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": prepend, "split": True}
    special_pieces = [(i, p.piece) for i, p in enumerate(proto.pieces) if p.type == _CONTROL] + [
        (tokenizer.unk_id, proto.pieces[tokenizer.unk_id].piece)
    ]
    cls, sep = {"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": piece,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i, piece in sorted(set(special_pieces))
        ],
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, metaspace]},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [cls, {"Sequence": {"id": "A", "type_id": 0}}, sep],
            "pair": [
                cls,
                {"Sequence": {"id": "A", "type_id": 0}},
                sep,
                {"Sequence": {"id": "B", "type_id": 1}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 1}},
            ],
            "special_tokens": {
                name: {"id": name, "ids": [token_id], "tokens": [name]}
                for name, token_id in (("[CLS]", tokenizer.cls_id), ("[SEP]", tokenizer.sep_id))
            },
        },
        "decoder": dict(metaspace),
        "model": {
            "type": "Unigram",
            "unk_id": tokenizer.unk_id,
            "vocab": vocab,
            "byte_fallback": any(p.type == _BYTE for p in proto.pieces),
        },
    }
