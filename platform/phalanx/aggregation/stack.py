"""The ``(n, d)`` stack every rule takes: its checks at the edge, its host view, row sums."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

FloatArray = npt.NDArray[np.floating[Any]]


DIFF_BLOCK_ELEMENTS = 1 << 20
"""Elements (rows x columns) of one column block of an exact pass over the stack.

The non-finite scan here and the difference buffer of exact distances
(:mod:`~phalanx.aggregation.distances`) both use it."""


def validated_shape(updates: Tensor, f: int, rule: str) -> tuple[int, int]:
    """Check type, rank, size, dtype and ``f``; return ``(n, d)``."""
    if not isinstance(updates, Tensor):
        raise TypeError(
            f"{rule}: updates must be a torch.Tensor of shape (n, d), got "
            f"{type(updates).__name__}; stack them with torch.stack([...])"
        )
    if updates.ndim != 2:
        raise ValueError(
            f"{rule}: updates must be 2-D (n workers, d coordinates), got shape "
            f"{tuple(updates.shape)}; flatten each update and stack them with "
            "torch.stack([u.flatten() for u in updates])"
        )
    n, d = updates.shape
    if n == 0 or d == 0:
        raise ValueError(
            f"{rule}: updates is empty (shape {tuple(updates.shape)}); "
            "aggregate at least one update with at least one coordinate"
        )
    if not updates.is_floating_point():
        raise TypeError(
            f"{rule}: updates must be floating point, got {updates.dtype}; "
            "convert with updates.float()"
        )
    if isinstance(f, bool) or not isinstance(f, int) or f < 0:
        raise ValueError(f"{rule}: f must be a non-negative int, got {f!r}")
    return n, d


def require_minority(n: int, f: int, rule: str) -> None:
    """Rules whose guarantee needs a Byzantine minority: ``n > 2 f``."""
    if n <= 2 * f:
        raise ValueError(
            f"{rule} needs n > 2f updates, got n={n}, f={f}; "
            f"collect at least {2 * f + 1} updates or lower f to {(n - 1) // 2}"
        )


def _nonfinite_rows(updates: Tensor) -> list[int]:
    """Rows holding NaN or Inf (an exact scan, used only on the suspicious path)."""
    n, d = updates.shape
    width = min(d, DIFF_BLOCK_ELEMENTS // n + 1)
    bad = torch.zeros(n, dtype=torch.bool, device=updates.device)
    for start in range(0, d, width):
        bad |= ~torch.isfinite(updates[:, start : start + width]).all(dim=1)
    return [int(i) for i in torch.nonzero(bad).flatten().tolist()]


def raise_if_nonfinite(updates: Tensor, rule: str) -> None:
    """Raise a ``ValueError`` naming the rows that hold NaN or Inf, if there are any."""
    rows = _nonfinite_rows(updates)
    if rows:
        shown = ", ".join(str(r) for r in rows[:10]) + (", ..." if len(rows) > 10 else "")
        raise ValueError(
            f"{rule}: updates contain NaN or Inf in rows [{shown}]; "
            "reject those replies before aggregating (a reply with non-finite values "
            "is malformed, not an input to a robust rule)"
        )


def checked_result(result: Tensor, updates: Tensor, rule: str) -> Tensor:
    """Non-finite input always yields a non-finite result here, so check the cheap side.

    The sum of the result is non-finite whenever one of its entries is (and, rarely,
    when finite entries overflow, which the exact scan then clears).
    """
    if not math.isfinite(float(result.sum())):
        raise_if_nonfinite(updates, rule)
    return result


def host_array(updates: Tensor) -> FloatArray:
    """Return the stack as a float32 or float64 NumPy array on the host (a view if possible)."""
    host = updates.detach().cpu()
    if host.dtype not in (torch.float32, torch.float64):
        host = host.float()
    array: FloatArray = host.numpy()
    return array


def group_means(updates: Tensor, group_of: Tensor, n_groups: int) -> Tensor:
    """Mean of the rows of each group, in one pass (``index_add_``, no row copies)."""
    sizes = torch.bincount(group_of, minlength=n_groups).to(updates.dtype)
    sums = torch.zeros(n_groups, updates.shape[1], dtype=updates.dtype, device=updates.device)
    sums.index_add_(0, group_of, updates)
    return sums.div_(sizes[:, None])


def combine_rows(updates: Tensor, weights: Tensor) -> Tensor:
    """``sum_i weights_i x_i`` in one pass (a matrix-vector product, no row copies)."""
    return weights.to(updates.dtype) @ updates
