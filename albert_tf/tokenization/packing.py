"""`[CLS] a [SEP] (b [SEP])` packing with the original's truncation (Python side).

The original fine-tuning code trims a pair one token at a time from the end of
the longer segment (B on ties); the serving signature does the same in-graph
with tf-text's `RoundRobinTrimmer`, which ends at the same lengths.

Example:

>>> pack_segments([7, 8, 9], [5, 6], max_seq_length=6, cls_id=2, sep_id=3)
([2, 7, 8, 3, 5, 3], [0, 0, 0, 0, 1, 1])
"""

from typing import List, Optional, Sequence, Tuple


def truncated_lengths(len_a: int, len_b: int, budget: int) -> Tuple[int, int]:
    """Lengths after the original's `_truncate_seq_pair` (trim the longer; ties trim B)."""
    while len_a + len_b > budget:
        if len_a > len_b:
            len_a -= 1
        else:
            len_b -= 1
    return len_a, len_b


def pack_segments(
    ids_a: Sequence[int], ids_b: Optional[Sequence[int]], max_seq_length: int, cls_id: int, sep_id: int
) -> Tuple[List[int], List[int]]:
    """(input_ids, segment_ids) of `[CLS] a [SEP] (b [SEP])`, truncated to `max_seq_length`, unpadded."""
    if ids_b is None:
        ids_a = list(ids_a)[: max_seq_length - 2]
        return [cls_id] + ids_a + [sep_id], [0] * (len(ids_a) + 2)
    len_a, len_b = truncated_lengths(len(ids_a), len(ids_b), max_seq_length - 3)
    input_ids = [cls_id] + list(ids_a[:len_a]) + [sep_id] + list(ids_b[:len_b]) + [sep_id]
    return input_ids, [0] * (len_a + 2) + [1] * (len_b + 1)


def encode_with_masks(tokenizer, text: str, mask_text: str = "[MASK]", max_ids: Optional[int] = None) -> List[int]:
    """Ids of `text` where each literal `[MASK]` becomes the mask id (for the MLM model's text input).

    With `max_ids`, the first `max_ids` ids only (each part from bounded work, see `Tokenizer.encode`).
    """
    ids: List[int] = []
    for index, part in enumerate(text.split(mask_text)):
        if index:
            ids.append(tokenizer.mask_id)
        ids.extend(tokenizer.encode(part, max_ids=max_ids))
        if max_ids is not None and len(ids) >= max_ids:
            return ids[:max_ids]
    return ids
