"""Column statistics of a stack: blocks of columns transposed, sorted and reduced in threads."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from torch import Tensor

from phalanx.aggregation.stack import FloatArray, host_array, raise_if_nonfinite

_SORT_BLOCK_ELEMENTS = 1 << 18
"""Elements (columns x rows) per transposed block of the column-statistics kernel."""


def column_statistic(
    updates: Tensor,
    reduce: Callable[[FloatArray], FloatArray],
    rule: str,
    rows: Tensor | None = None,
) -> Tensor:
    """Apply ``reduce`` to every column of ``updates[rows]``, sorted in ascending order.

    ``reduce`` receives a C-contiguous ``(c, k)`` block whose rows are the sorted
    values of ``c`` columns and returns their ``(c,)`` statistics.
    """
    device, dtype = updates.device, updates.dtype
    source = host_array(updates)
    row_index = None if rows is None else rows.cpu().numpy()
    k = source.shape[0] if row_index is None else len(row_index)
    d = source.shape[1]
    out = np.empty(d, dtype=source.dtype)
    width = max(256, _SORT_BLOCK_ELEMENTS // k)
    starts = range(0, d, width)

    def process(start: int) -> bool:
        stop = min(start + width, d)
        block = source[:, start:stop] if row_index is None else source[row_index, start:stop]
        columns = np.ascontiguousarray(block.T)
        columns.sort(axis=1)
        # NaN sorts last, -Inf first, +Inf last: the extremes reveal any non-finite value.
        if not (np.isfinite(columns[:, 0]).all() and np.isfinite(columns[:, -1]).all()):
            return False
        out[start:stop] = reduce(columns)
        return True

    workers = min(torch.get_num_threads(), len(starts))
    if workers > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            finite = all(list(pool.map(process, starts)))
    else:
        finite = all([process(start) for start in starts])
    if not finite:
        raise_if_nonfinite(updates if rows is None else updates[rows], rule)
    return torch.from_numpy(out).to(device=device, dtype=dtype)


def middle(columns: FloatArray) -> FloatArray:
    """Median of each sorted row: the middle value, or the mean of the two middle ones."""
    k = columns.shape[1]
    low, high = columns[:, (k - 1) // 2], columns[:, k // 2]
    result: FloatArray = low * 0.5 + high * 0.5
    return result


def mean_closest_to_middle(columns: FloatArray, width: int) -> FloatArray:
    """Mean of the ``width`` values of each sorted row that lie closest to its median.

    Those values form a window ``[j, j + width)`` of the sorted row. Shifting the
    window right trades ``s_j`` for ``s_(j + width)`` and pays while ``s_j`` is the
    farther from the median ``m``, that is while ``m > s_j / 2 + s_(j + width) / 2``
    (halves first, so that nothing overflows). The test is monotone in ``j``, so
    the start is found by bisection, a few gathers of one value per row.
    """
    rows, k = columns.shape
    slack = k - width
    if slack == 0:
        whole: FloatArray = columns.mean(axis=1, dtype=columns.dtype)
        return whole
    center = middle(columns)
    flat = columns.ravel()
    row_start = np.arange(rows) * k
    low = np.zeros(rows, dtype=np.intp)
    high = np.full(rows, slack, dtype=np.intp)
    for _ in range(slack.bit_length()):
        mid = np.minimum((low + high) // 2, slack - 1)
        active = low < high
        at = row_start + mid
        shift = center > np.take(flat, at) * 0.5 + np.take(flat, at + width) * 0.5
        low = np.where(active & shift, mid + 1, low)
        high = np.where(active & ~shift, mid, high)
    # One gather per window position: faster than fancy-indexing (rows, width) at once.
    window_start = row_start + low
    total = np.take(flat, window_start)
    for offset in range(1, width):
        total += np.take(flat, window_start + offset)
    result: FloatArray = total / columns.dtype.type(width)
    return result
