"""Several instances to a row: best-fit-decreasing bin packing, deterministic.

The original's generator keeps a document's instances to that document and makes
`short_seq_prob` of them short on purpose, so short documents pad heavily (about half of
a 512-token row on WikiText). A row of `max_seq_length` tokens here holds up to
`max_instances_per_row` whole instances, each with its own `[CLS] A [SEP] B [SEP]`,
segment ids, SOP label and masked positions; the model keeps them apart
(`albert_tf.layers.packed_rows`: block-diagonal attention, positions restarting at 0).

Best fit decreasing: instances longest first (ties: their order in the shard), each into
the open row with the least room that still fits it (ties: the row opened first), a new
row when none does; a row is closed when it is full or holds `max_instances_per_row`.
Rows then follow the shard place of their earliest instance (the shard's hash order), so
the shuffle is kept.

Example:

>>> pack_rows([5, 3, 4, 2], capacity=8, max_per_row=2)
[[0, 1], [2, 3]]
>>> pack_rows([5, 3, 4, 2], capacity=8, max_per_row=1)
[[0], [1], [2], [3]]
"""

import bisect
import heapq
import math
from typing import Dict, List, Sequence

from data_prep.errors import DataPrepError

# The shortest instance: [CLS] a [SEP] b [SEP], one token a segment (`instances.InstanceBuilder` makes no shorter).
MIN_INSTANCE_TOKENS = 5


def max_instances_in_row(max_seq_length: int) -> int:
    """The most instances a row of `max_seq_length` tokens can hold.

    >>> max_instances_in_row(64), max_instances_in_row(512)
    (12, 102)
    """
    return max_seq_length // MIN_INSTANCE_TOKENS


def prediction_slots(max_seq_length: int, max_predictions_per_seq: int, max_instances_per_row: int, prob: float) -> int:
    """Masked-position slots a row needs: the most its instances can hold together.

    An instance of L tokens masks min(P, max(1, round(L·prob))) ≤ L·prob + 1 (`masking.NgramMasker`), so
    instances of at most S tokens together mask at most ⌊S·prob⌋ + K: at length 128, 19 + 3 slots instead of
    3 × 20, each a row of masked-LM logits.

    >>> prediction_slots(128, 20, 3, 0.15), prediction_slots(512, 20, 3, 0.15), prediction_slots(128, 20, 1, 0.15)
    (22, 60, 20)
    """
    if max_instances_per_row == 1:
        return max_predictions_per_seq
    return min(
        max_instances_per_row * max_predictions_per_seq, math.floor(max_seq_length * prob) + max_instances_per_row
    )


def pack_rows(lengths: Sequence[int], capacity: int, max_per_row: int) -> List[List[int]]:
    """Indices of `lengths` grouped into rows of at most `capacity` tokens and `max_per_row` items.

    Raises:
        DataPrepError: an item longer than `capacity`, or `max_per_row` < 1.
    """
    if max_per_row < 1:
        raise DataPrepError(f"max_per_row must be at least 1, got {max_per_row}")
    too_long = [length for length in lengths if length > capacity]
    if too_long:
        raise DataPrepError(f"an instance of {too_long[0]} tokens does not fit a row of {capacity}")
    rows: List[List[int]] = []
    room: List[int] = []
    open_rows: Dict[int, list] = {}  # room left -> heap of the open rows with that room
    rooms: List[int] = []  # the keys of open_rows, sorted

    def reopen(row: int):
        if len(rows[row]) >= max_per_row or room[row] == 0:
            return
        if room[row] not in open_rows:
            open_rows[room[row]] = []
            bisect.insort(rooms, room[row])
        heapq.heappush(open_rows[room[row]], row)

    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        length = lengths[index]
        at = bisect.bisect_left(rooms, length)
        if at == len(rooms):
            row = len(rows)
            rows.append([])
            room.append(capacity)
        else:
            key = rooms[at]
            row = heapq.heappop(open_rows[key])
            if not open_rows[key]:
                del open_rows[key]
                rooms.pop(at)
        rows[row].append(index)
        room[row] -= length
        reopen(row)
    return sorted(rows, key=lambda members: min(members))
