"""Robust aggregation of a stack of update vectors.

Every rule is a pure function ``(updates, *, f, ...) -> Tensor`` over a
``(n, d)`` stack, one row per worker (or per accepted file), and returns one
``(d,)`` vector. Pre-aggregators (nearest-neighbour mixing, bucketing) return a
new ``(n', d)`` stack that any rule can then aggregate. ``AGGREGATORS`` and
``PRE_AGGREGATORS`` map names to functions; :func:`aggregate` and
:class:`RobustAggregator` combine the two from plain settings.

Three kernels carry the heavy lifting, so that no rule loops over coordinates
or materialises an ``(n, n, d)`` tensor:

* The Gram matrix ``X X^T``, computed once per call by float32 products over
  column blocks (NumPy's ``b @ b.T``, which BLAS runs as ``syrk``, one
  triangle) whose partial sums are accumulated in float64. Squared distances
  follow as ``|a|^2 + |b|^2 - 2 a.b`` (clamped at 0). Krum, Multi-Krum,
  Bulyan's selection and NNM read it directly; the geometric median runs all its
  Weiszfeld iterations on it, because every iterate is a convex combination of
  the rows whose distances to the rows follow from the pairwise distances, and
  then reads the stack once more to form the result. Like every Gram-matrix
  method (Flower's and ByzFL's Krum included), distances between rows that are
  much closer to each other than to the origin lose relative precision; the
  float64 block accumulation keeps that loss from growing with ``d``.
* Exact distances to one point (centered clipping): the stack is differenced
  against the point one cache-sized column block at a time into a reused buffer.
* Column statistics (median, trimmed mean, Bulyan's coordinate phase,
  median-of-means): blocks of columns are transposed into cache-sized contiguous
  ``(c, n)`` buffers and sorted along their rows with NumPy's SIMD sort, on as
  many threads as ``torch.get_num_threads()``. This is several times faster
  than ``torch.sort``, ``torch.median`` or ``torch.kthvalue`` along dimension 0,
  which walk each column with a stride of ``d``. Tensors on other devices are
  moved to the CPU for these rules.

Inputs are validated at the edge: a 2-D floating tensor with at least one row
and one column, finite entries, and enough rows for ``f``. The finiteness check
rides on work the rule does anyway (the Gram diagonal, the sorted extremes, or
the result), and only a suspicious value triggers an exact scan, so clean
inputs pay nothing for it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from phalanx.breakdown import largest_f, min_inputs

__all__ = [
    "AGGREGATORS",
    "PRE_AGGREGATORS",
    "Aggregator",
    "PreAggregator",
    "RobustAggregator",
    "aggregate",
    "bucketing",
    "bulyan",
    "centered_clipping",
    "coordinate_median",
    "geometric_median",
    "krum",
    "krum_scores",
    "krum_selection",
    "largest_f",
    "mean",
    "median_of_means",
    "min_inputs",
    "multi_krum",
    "nearest_neighbor_mixing",
    "pairwise_sq_distances",
    "trimmed_mean",
]

FloatArray = npt.NDArray[np.floating[Any]]

_GRAM_BLOCK = 1 << 16
"""Columns per float32 matrix product; partial Gram matrices add up in float64."""

_DIFF_BLOCK_ELEMENTS = 1 << 20
"""Elements (rows x columns) of the difference buffer of exact distance passes."""

_SORT_BLOCK_ELEMENTS = 1 << 18
"""Elements (columns x rows) per transposed block of the column-statistics kernel."""


class Aggregator(Protocol):
    """A robust rule: ``(n, d)`` stack and Byzantine count ``f`` to one ``(d,)`` vector."""

    def __call__(self, updates: Tensor, /, *, f: int) -> Tensor:
        """Aggregate ``updates`` tolerating ``f`` Byzantine rows."""
        ...


class PreAggregator(Protocol):
    """A pre-aggregator: ``(n, d)`` stack to a new ``(n', d)`` stack."""

    def __call__(self, updates: Tensor, /, *, f: int) -> Tensor:
        """Transform ``updates`` before a robust rule aggregates them."""
        ...


# --------------------------------------------------------------------------- validation


def _validated_shape(updates: Tensor, f: int, rule: str) -> tuple[int, int]:
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


def _require_minority(n: int, f: int, rule: str) -> None:
    """Rules whose guarantee needs a Byzantine minority: ``n > 2 f``."""
    if n <= 2 * f:
        raise ValueError(
            f"{rule} needs n > 2f updates, got n={n}, f={f}; "
            f"collect at least {2 * f + 1} updates or lower f to {(n - 1) // 2}"
        )


def _nonfinite_rows(updates: Tensor) -> list[int]:
    """Rows holding NaN or Inf (an exact scan, used only on the suspicious path)."""
    n, d = updates.shape
    width = min(d, _DIFF_BLOCK_ELEMENTS // n + 1)
    bad = torch.zeros(n, dtype=torch.bool, device=updates.device)
    for start in range(0, d, width):
        bad |= ~torch.isfinite(updates[:, start : start + width]).all(dim=1)
    return [int(i) for i in torch.nonzero(bad).flatten().tolist()]


def _raise_if_nonfinite(updates: Tensor, rule: str) -> None:
    rows = _nonfinite_rows(updates)
    if rows:
        shown = ", ".join(str(r) for r in rows[:10]) + (", ..." if len(rows) > 10 else "")
        raise ValueError(
            f"{rule}: updates contain NaN or Inf in rows [{shown}]; "
            "reject those replies before aggregating (a reply with non-finite values "
            "is malformed, not an input to a robust rule)"
        )


def _checked_result(result: Tensor, updates: Tensor, rule: str) -> Tensor:
    """Non-finite input always yields a non-finite result here, so check the cheap side.

    The sum of the result is non-finite whenever one of its entries is (and, rarely,
    when finite entries overflow, which the exact scan then clears).
    """
    if not math.isfinite(float(result.sum())):
        _raise_if_nonfinite(updates, rule)
    return result


# --------------------------------------------------------------------------- Gram kernel


def _gram(updates: Tensor, rule: str) -> Tensor:
    """Float64 Gram matrix ``X X^T`` of the rows.

    Float32 products over column blocks, summed in float64. A non-finite entry
    triggers an exact scan: NaN or Inf in the input raises; otherwise a row too
    large for float32 squares overflowed, and the Gram matrix is recomputed in
    float64, where no finite float32 input can overflow.
    """
    gram = _gram_blocks(updates, updates.dtype)
    if not bool(torch.isfinite(gram).all()):
        _raise_if_nonfinite(updates, rule)
        gram = _gram_blocks(updates, torch.float64)
    return gram


def _gram_blocks(updates: Tensor, dtype: torch.dtype) -> Tensor:
    n, d = updates.shape
    if updates.device.type != "cpu":
        gram = torch.zeros(n, n, dtype=torch.float64, device=updates.device)
        for start in range(0, d, _GRAM_BLOCK):
            block = updates[:, start : start + _GRAM_BLOCK].to(dtype)
            gram += block @ block.T
        return gram
    # On the CPU, NumPy's ``b @ b.T`` recognises the transpose and calls BLAS ``syrk``,
    # which computes one triangle: about 20-30 % less time than torch.mm here.
    source = _host_array(updates)
    np_dtype = np.float64 if dtype == torch.float64 else source.dtype
    total = np.zeros((n, n), dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected by the caller
        for start in range(0, d, _GRAM_BLOCK):
            columns = source[:, start : start + _GRAM_BLOCK].astype(np_dtype, copy=False)
            total += columns @ columns.T
    return torch.from_numpy(total)


def _host_array(updates: Tensor) -> FloatArray:
    """Return the stack as a float32 or float64 NumPy array on the host (a view if possible)."""
    host = updates.detach().cpu()
    if host.dtype not in (torch.float32, torch.float64):
        host = host.float()
    array: FloatArray = host.numpy()
    return array


def _distances_from_gram(gram: Tensor) -> Tensor:
    # Exact symmetry makes equal scores (e.g. two mutual nearest neighbours) tie exactly,
    # so that ties go to the lower index rather than to rounding noise.
    gram = 0.5 * (gram + gram.T)
    sq_norms = gram.diagonal()
    dist = (sq_norms[:, None] + sq_norms[None, :] - 2.0 * gram).clamp_(min=0.0)
    dist.fill_diagonal_(0.0)
    # A row whose float64 square overflowed is infinitely far from the others.
    return torch.nan_to_num_(dist, nan=math.inf)


def pairwise_sq_distances(updates: Tensor) -> Tensor:
    """Squared Euclidean distances between all rows, via the Gram matrix.

    Parameters
    ----------
    updates : Tensor
        Shape ``(n, d)``, finite.

    Returns
    -------
    Tensor
        Shape ``(n, n)``, float64, symmetric, zero diagonal, non-negative.
    """
    _validated_shape(updates, 0, "pairwise_sq_distances")
    return _distances_from_gram(_gram(updates, "pairwise_sq_distances"))


def _distances_to_combination(dist: Tensor, alpha: Tensor) -> Tensor:
    """``|x_i - z|`` for ``z = sum_j alpha_j x_j`` with ``sum_j alpha_j = 1``.

    Uses ``|x_i - z|^2 = sum_j alpha_j D_ij - 1/2 alpha^T D alpha`` with ``D`` the
    squared pairwise distances, so only relative positions enter.
    """
    pulled = dist @ alpha
    spread = 0.5 * torch.dot(alpha, pulled)
    return (pulled - spread).clamp_(min=0.0).sqrt_()


def _group_means(updates: Tensor, group_of: Tensor, n_groups: int) -> Tensor:
    """Mean of the rows of each group, in one pass (``index_add_``, no row copies)."""
    sizes = torch.bincount(group_of, minlength=n_groups).to(updates.dtype)
    sums = torch.zeros(n_groups, updates.shape[1], dtype=updates.dtype, device=updates.device)
    sums.index_add_(0, group_of, updates)
    return sums.div_(sizes[:, None])


def _distances_to(updates: Tensor, point: Tensor, rule: str) -> Tensor:
    """Exact ``|x_i - point|`` for every row, in float64, one column block at a time.

    Blocks are differenced and normed in the input's precision; if a row's squares
    overflow it (finite input only: NaN or Inf raises), the pass is repeated with
    float64 blocks.
    """
    sq = _sq_distances_blocks(updates, point, updates.dtype)
    if not bool(torch.isfinite(sq).all()):
        _raise_if_nonfinite(updates, rule)
        sq = _sq_distances_blocks(updates, point, torch.float64)
    return sq.sqrt_()


def _sq_distances_blocks(updates: Tensor, point: Tensor, dtype: torch.dtype) -> Tensor:
    n, d = updates.shape
    width = min(d, _DIFF_BLOCK_ELEMENTS // n + 1)
    buffer = torch.empty(n * width, dtype=dtype, device=updates.device)
    sq = torch.zeros(n, dtype=torch.float64, device=updates.device)
    for start in range(0, d, width):
        block = updates[:, start : start + width]
        diff = buffer[: block.numel()].view(block.shape)
        torch.sub(block.to(dtype), point[start : start + width].to(dtype), out=diff)
        sq += torch.linalg.vector_norm(diff, dim=1).to(torch.float64).square_()
    return sq


def _combine_rows(updates: Tensor, weights: Tensor) -> Tensor:
    """``sum_i weights_i x_i`` in one pass (a matrix-vector product, no row copies)."""
    return weights.to(updates.dtype) @ updates


# --------------------------------------------------------------------------- column kernel


def _column_statistic(
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
    source = _host_array(updates)
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
        _raise_if_nonfinite(updates if rows is None else updates[rows], rule)
    return torch.from_numpy(out).to(device=device, dtype=dtype)


def _middle(columns: FloatArray) -> FloatArray:
    """Median of each sorted row: the middle value, or the mean of the two middle ones."""
    k = columns.shape[1]
    low, high = columns[:, (k - 1) // 2], columns[:, k // 2]
    result: FloatArray = low * 0.5 + high * 0.5
    return result


def _mean_closest_to_middle(columns: FloatArray, width: int) -> FloatArray:
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
    center = _middle(columns)
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


# --------------------------------------------------------------------------- rules


def mean(updates: Tensor, *, f: int = 0) -> Tensor:
    """Coordinate-wise mean (not robust; the baseline).

    Parameters
    ----------
    updates : Tensor
        Shape ``(n, d)``, one row per worker.
    f : int
        Accepted for a uniform signature; the mean tolerates no Byzantine row.

    Returns
    -------
    Tensor
        Shape ``(d,)``.
    """
    _validated_shape(updates, f, "mean")
    return _checked_result(updates.mean(dim=0), updates, "mean")


def coordinate_median(updates: Tensor, *, f: int = 0) -> Tensor:
    """Coordinate-wise median (Yin et al., 2018).

    For an even number of rows the two middle values are averaged, as in
    ``numpy.median``.

    Parameters
    ----------
    updates : Tensor
        Shape ``(n, d)``, one row per worker.
    f : int
        Number of Byzantine rows tolerated; needs ``n > 2 f``.

    Returns
    -------
    Tensor
        Shape ``(d,)``.
    """
    n, _ = _validated_shape(updates, f, "median")
    _require_minority(n, f, "median")
    return _column_statistic(updates, _middle, "median")


def trimmed_mean(updates: Tensor, *, f: int) -> Tensor:
    """Coordinate-wise trimmed mean: drop the ``f`` largest and ``f`` smallest values.

    Parameters
    ----------
    updates : Tensor
        Shape ``(n, d)``, one row per worker.
    f : int
        Values trimmed from each end of every coordinate; needs ``n > 2 f``.

    Returns
    -------
    Tensor
        Shape ``(d,)``, the mean of the ``n - 2 f`` central values per coordinate.
    """
    n, _ = _validated_shape(updates, f, "trimmed_mean")
    _require_minority(n, f, "trimmed_mean")

    def central_mean(columns: FloatArray) -> FloatArray:
        result: FloatArray = columns[:, f : n - f].mean(axis=1, dtype=columns.dtype)
        return result

    return _column_statistic(updates, central_mean, "trimmed_mean")


def geometric_median(
    updates: Tensor,
    *,
    f: int = 0,
    nu: float = 1e-6,
    max_iter: int = 100,
    eps: float = 1e-6,
) -> Tensor:
    """Geometric median by the smoothed Weiszfeld algorithm (Pillutla et al., RFA).

    Starts at the mean and repeats ``z <- sum_i b_i x_i / sum_i b_i`` with
    ``b_i = 1 / max(nu, |x_i - z|)`` until the objective ``sum_i |x_i - z|``
    changes by at most ``eps`` relative, or ``max_iter`` updates were made. The
    iterations run on the Gram matrix (every iterate is a convex combination of
    the rows); the stack is read twice in all.

    Parameters
    ----------
    updates : Tensor
        Shape ``(n, d)``, one row per worker.
    f : int
        Number of Byzantine rows tolerated; needs ``n > 2 f`` (breakdown point 1/2).
    nu : float
        Smoothing: distances below ``nu`` count as ``nu``. Must be positive.
    max_iter : int
        Largest number of Weiszfeld updates.
    eps : float
        Relative change of the objective at which to stop; ``0`` runs ``max_iter``.

    Returns
    -------
    Tensor
        Shape ``(d,)``.
    """
    n, _ = _validated_shape(updates, f, "geometric_median")
    _require_minority(n, f, "geometric_median")
    if not nu > 0.0:
        raise ValueError(f"geometric_median: nu must be positive, got {nu}")
    if max_iter < 0 or eps < 0.0:
        raise ValueError(
            f"geometric_median: max_iter and eps must be non-negative, got {max_iter}, {eps}"
        )
    dist = _distances_from_gram(_gram(updates, "geometric_median"))
    alpha = torch.full((n,), 1.0 / n, dtype=torch.float64, device=dist.device)
    previous = math.inf
    for _ in range(max_iter):
        to_z = _distances_to_combination(dist, alpha)
        objective = float(to_z.sum())
        if abs(previous - objective) <= eps * objective:
            break
        previous = objective
        weights = 1.0 / to_z.clamp(min=nu)
        weights = torch.nan_to_num_(weights, nan=0.0)  # rows at infinite distance
        alpha = weights / weights.sum()
    return _combine_rows(updates, alpha)


def _krum_neighbours(n: int, f: int) -> int:
    return n - f - 2


def krum_scores(dist: Tensor, *, f: int) -> Tensor:
    """Krum score of every row: the sum of its ``n - f - 2`` smallest distances to others.

    Parameters
    ----------
    dist : Tensor
        Shape ``(n, n)``, squared pairwise distances (see :func:`pairwise_sq_distances`).
    f : int
        Number of Byzantine rows tolerated.

    Returns
    -------
    Tensor
        Shape ``(n,)``, lower is more central.
    """
    n = dist.shape[0]
    k = min(max(_krum_neighbours(n, f), 1), n - 1)
    if k == 0:
        return torch.zeros(n, dtype=dist.dtype, device=dist.device)
    others = dist.clone()
    others.fill_diagonal_(math.inf)
    # Summing the sorted distances makes rows with equal neighbourhoods score equally.
    return others.topk(k, dim=1, largest=False, sorted=True).values.sum(dim=1)


def _require_krum(n: int, f: int, rule: str) -> None:
    if n < 2 * f + 3:
        raise ValueError(
            f"{rule} needs n >= 2f + 3 updates, got n={n}, f={f}; "
            f"collect at least {2 * f + 3} updates or lower f to {max((n - 3) // 2, 0)}"
            + ("" if n >= 3 else " (and Krum needs at least 3 updates)")
        )


def krum_selection(updates: Tensor, *, f: int, m: int = 1) -> Tensor:
    """Select the ``m`` updates with the lowest Krum scores, best first.

    This is the selection step of Krum and Multi-Krum, exposed so that a caller
    can record which workers were left out.

    Parameters
    ----------
    updates : Tensor
        Shape ``(n, d)``, one row per worker.
    f : int
        Number of Byzantine rows tolerated; needs ``n >= 2 f + 3``.
    m : int
        Number of rows selected, ``1 <= m <= n``.

    Returns
    -------
    Tensor
        Shape ``(m,)``, int64 row indices in increasing order of score; equal
        scores are ordered by index.
    """
    n, _ = _validated_shape(updates, f, "krum")
    _require_krum(n, f, "krum")
    if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= n:
        raise ValueError(f"krum: m must be an int in [1, n={n}], got {m!r}")
    scores = krum_scores(_distances_from_gram(_gram(updates, "krum")), f=f)
    return torch.sort(scores, stable=True).indices[:m]


def krum(updates: Tensor, *, f: int) -> Tensor:
    """Select the update closest to its ``n - f - 2`` nearest neighbours (Blanchard et al.).

    Parameters
    ----------
    updates : Tensor
        Shape ``(n, d)``, one row per worker.
    f : int
        Number of Byzantine rows tolerated; needs ``n >= 2 f + 3``.

    Returns
    -------
    Tensor
        Shape ``(d,)``: the selected row itself, a view into ``updates`` (no
        copy, as the other rules' peers return it); clone it to keep it
        without keeping the whole stack alive.
    """
    best = krum_selection(updates, f=f, m=1)
    return updates[int(best[0])]


def multi_krum(updates: Tensor, *, f: int, m: int | None = None) -> Tensor:
    """Mean of the ``m`` updates with the lowest Krum scores (El Mhamdi et al., 2018).

    Parameters
    ----------
    updates : Tensor
        Shape ``(n, d)``, one row per worker.
    f : int
        Number of Byzantine rows tolerated; needs ``n >= 2 f + 3``.
    m : int, optional
        Number of updates averaged, ``1 <= m <= n``; defaults to ``n - f``.
        ``m = 1`` is Krum.

    Returns
    -------
    Tensor
        Shape ``(d,)``.
    """
    n, _ = _validated_shape(updates, f, "multi_krum")
    m = n - f if m is None else m
    chosen = krum_selection(updates, f=f, m=m)
    weights = torch.zeros(n, dtype=torch.float64, device=updates.device)
    weights[chosen] = 1.0 / m
    return _combine_rows(updates, weights)


def _bulyan_selection(dist: Tensor, f: int, count: int) -> Tensor:
    """Pick ``count`` rows by Krum, one at a time, each removed before the next pick."""
    n = dist.shape[0]
    others = dist.clone()
    others.fill_diagonal_(math.inf)
    remaining = torch.ones(n, dtype=torch.bool, device=dist.device)
    chosen: list[int] = []
    for _ in range(count):
        size = int(remaining.sum())
        k = min(max(_krum_neighbours(size, f), 1), size - 1)
        if k == 0:
            best = int(torch.nonzero(remaining)[0])
        else:
            scores = others.topk(k, dim=1, largest=False, sorted=True).values.sum(dim=1)
            scores[~remaining] = math.inf
            best = int(torch.argmin(scores))
        chosen.append(best)
        remaining[best] = False
        others[:, best] = math.inf
    return torch.tensor(chosen, dtype=torch.long)


def bulyan(updates: Tensor, *, f: int) -> Tensor:
    """Bulyan (El Mhamdi et al., 2018) over Krum.

    Krum picks ``theta = n - 2 f`` updates one at a time, each removed before the
    next pick; then every coordinate averages the ``beta = theta - 2 f`` picked
    values closest to their median. The pairwise distances are computed once and
    reused by every pick.

    Parameters
    ----------
    updates : Tensor
        Shape ``(n, d)``, one row per worker.
    f : int
        Number of Byzantine rows tolerated; needs ``n >= 4 f + 3``.

    Returns
    -------
    Tensor
        Shape ``(d,)``.
    """
    n, _ = _validated_shape(updates, f, "bulyan")
    if n < 4 * f + 3:
        raise ValueError(
            f"bulyan needs n >= 4f + 3 updates, got n={n}, f={f}; "
            f"collect at least {4 * f + 3} updates or lower f to {max((n - 3) // 4, 0)}"
            + ("" if n >= 3 else " (and Bulyan needs at least 3 updates)")
        )
    theta = n - 2 * f
    beta = theta - 2 * f
    chosen = _bulyan_selection(_distances_from_gram(_gram(updates, "bulyan")), f, theta)

    def closest_to_median_mean(columns: FloatArray) -> FloatArray:
        return _mean_closest_to_middle(columns, beta)

    return _column_statistic(updates, closest_to_median_mean, "bulyan", rows=chosen)


def centered_clipping(
    updates: Tensor,
    *,
    f: int = 0,
    tau: float = 100.0,
    n_iter: int = 1,
    center: Tensor | None = None,
) -> Tensor:
    """Centered clipping (Karimireddy, He and Jaggi, 2021).

    Repeats ``v <- v + mean_i (x_i - v) min(1, tau / |x_i - v|)`` ``n_iter``
    times from ``center`` (the previous aggregate or momentum; zero if absent).
    Each iteration reads the stack twice: once for the exact distances
    ``|x_i - v|`` (column block by column block, no ``(n, d)`` temporary) and
    once for the weighted sum.

    Parameters
    ----------
    updates : Tensor
        Shape ``(n, d)``, one row per worker.
    f : int
        Number of Byzantine rows tolerated; needs ``n > 2 f``.
    tau : float
        Clipping radius, positive.
    n_iter : int
        Number of clipping iterations, at least 1.
    center : Tensor, optional
        Shape ``(d,)``, the starting point.

    Returns
    -------
    Tensor
        Shape ``(d,)``.
    """
    n, d = _validated_shape(updates, f, "centered_clipping")
    _require_minority(n, f, "centered_clipping")
    if not tau > 0.0 or n_iter < 1:
        raise ValueError(
            f"centered_clipping: tau must be positive and n_iter >= 1, got {tau}, {n_iter}"
        )
    if center is not None and tuple(center.shape) != (d,):
        raise ValueError(
            f"centered_clipping: center must have shape ({d},), got {tuple(center.shape)}"
        )
    if center is None:
        v = torch.zeros(d, dtype=updates.dtype, device=updates.device)
    else:
        _raise_if_nonfinite(center[None, :], "centered_clipping")
        v = center.to(device=updates.device, dtype=updates.dtype)
    for _ in range(n_iter):
        to_v = _distances_to(updates, v, "centered_clipping")
        clip = torch.where(to_v > tau, tau / to_v, torch.ones_like(to_v))
        v = v * (1.0 - float(clip.mean())) + _combine_rows(updates, clip / n)
    return v


def median_of_means(updates: Tensor, *, f: int, groups: int | None = None) -> Tensor:
    """Coordinate-wise median of group means, as DETOX applies after its vote.

    Rows are split in order into ``groups`` consecutive groups whose sizes differ
    by at most one, the larger ones first, as ``numpy.array_split`` does (shuffle
    the rows first for random groups).

    Parameters
    ----------
    updates : Tensor
        Shape ``(n, d)``, one row per worker or per voted group.
    f : int
        Number of Byzantine rows tolerated; each can spoil one group, so
        ``groups > 2 f`` is needed.
    groups : int, optional
        Number of groups, ``2 f < groups <= n``; defaults to ``2 f + 1``.

    Returns
    -------
    Tensor
        Shape ``(d,)``.
    """
    n, _ = _validated_shape(updates, f, "median_of_means")
    groups = 2 * f + 1 if groups is None else groups
    if not 2 * f < groups <= n:
        fix = (
            f"use groups in [{2 * f + 1}, {n}]"
            if n > 2 * f
            else f"collect at least {2 * f + 1} updates or lower f to {(n - 1) // 2}"
        )
        raise ValueError(
            f"median_of_means needs 2f < groups <= n, got groups={groups}, f={f}, n={n}; {fix}"
        )
    size, larger = divmod(n, groups)
    row = torch.arange(n, device=updates.device)
    boundary = larger * (size + 1)
    group_of = torch.where(row < boundary, row // (size + 1), larger + (row - boundary) // size)
    group_means = _checked_result(
        _group_means(updates, group_of, groups), updates, "median_of_means"
    )
    return _column_statistic(group_means, _middle, "median_of_means")


# --------------------------------------------------------------------------- pre-aggregators


def nearest_neighbor_mixing(updates: Tensor, *, f: int) -> Tensor:
    """Nearest-neighbour mixing (Allouah et al., 2023).

    Every row is replaced by the mean of its ``n - f`` nearest rows, itself included.

    Parameters
    ----------
    updates : Tensor
        Shape ``(n, d)``, one row per worker.
    f : int
        Number of Byzantine rows tolerated; needs ``f < n``.

    Returns
    -------
    Tensor
        Shape ``(n, d)``.
    """
    n, _ = _validated_shape(updates, f, "nnm")
    if f >= n:
        raise ValueError(f"nnm needs f < n, got n={n}, f={f}; lower f to {n - 1}")
    dist = _distances_from_gram(_gram(updates, "nnm"))
    nearest = dist.topk(n - f, dim=1, largest=False, sorted=False).indices
    mixing = torch.zeros(n, n, dtype=updates.dtype, device=updates.device)
    mixing.scatter_(1, nearest, 1.0 / (n - f))
    return mixing @ updates


def bucketing(
    updates: Tensor,
    *,
    f: int = 0,
    s: int = 2,
    seed: int | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Bucketing (Karimireddy, He and Jaggi, 2022): shuffle, then average buckets of ``s``.

    The last bucket holds the ``n mod s`` leftover rows when ``s`` does not divide ``n``.

    Parameters
    ----------
    updates : Tensor
        Shape ``(n, d)``, one row per worker.
    f : int
        Accepted for a uniform signature (``f`` Byzantine rows spoil at most ``f``
        buckets, so the rule that follows keeps the same ``f``).
    s : int
        Bucket size, at least 1.
    seed : int, optional
        Seed of the shuffle. Give exactly one of ``seed`` and ``generator``.
    generator : torch.Generator, optional
        Source of the shuffle.

    Returns
    -------
    Tensor
        Shape ``(ceil(n / s), d)``.
    """
    n, _ = _validated_shape(updates, f, "bucketing")
    if isinstance(s, bool) or not isinstance(s, int) or s < 1:
        raise ValueError(f"bucketing: bucket size s must be a positive int, got {s!r}")
    if (seed is None) == (generator is None):
        raise ValueError(
            "bucketing: give exactly one of seed=... or generator=... "
            "(the shuffle must be reproducible)"
        )
    if generator is None:
        generator = torch.Generator().manual_seed(cast(int, seed))
    permutation = torch.randperm(n, generator=generator).to(updates.device)
    bucket_of = torch.empty(n, dtype=torch.long, device=updates.device)
    bucket_of[permutation] = torch.arange(n, device=updates.device) // s
    n_buckets = -(-n // s)
    return _checked_result(_group_means(updates, bucket_of, n_buckets), updates, "bucketing")


# --------------------------------------------------------------------------- registry


AGGREGATORS: dict[str, Aggregator] = {
    "mean": mean,
    "median": coordinate_median,
    "trimmed_mean": trimmed_mean,
    "geometric_median": geometric_median,
    "krum": krum,
    "multi_krum": multi_krum,
    "bulyan": bulyan,
    "centered_clipping": centered_clipping,
    "median_of_means": median_of_means,
}
"""Robust rules by name."""

PRE_AGGREGATORS: dict[str, PreAggregator] = {
    "nnm": nearest_neighbor_mixing,
    "bucketing": bucketing,
}
"""Pre-aggregators by name."""


def _lookup(table: Mapping[str, Any], name: str, kind: str) -> Callable[..., Tensor]:
    try:
        return cast(Callable[..., Tensor], table[name])
    except KeyError:
        known = ", ".join(sorted(table))
        raise ValueError(f"unknown {kind} {name!r}; choose one of: {known}") from None


def aggregate(
    name: str,
    updates: Tensor,
    *,
    f: int,
    pre: str | None = None,
    pre_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> Tensor:
    """Aggregate ``updates`` with the rule ``name``, after the pre-aggregator ``pre`` if given.

    Parameters
    ----------
    name : str
        A key of :data:`AGGREGATORS`.
    updates : Tensor
        Shape ``(n, d)``, one row per worker.
    f : int
        Number of Byzantine rows tolerated, passed to both stages.
    pre : str, optional
        A key of :data:`PRE_AGGREGATORS`.
    pre_options : Mapping, optional
        Keyword options of the pre-aggregator (e.g. ``{"s": 2, "seed": 7}``).
    **options
        Keyword options of the rule (e.g. ``m=5`` for Multi-Krum).

    Returns
    -------
    Tensor
        Shape ``(d,)``.
    """
    rule = _lookup(AGGREGATORS, name, "aggregator")
    if pre is not None:
        updates = _lookup(PRE_AGGREGATORS, pre, "pre-aggregator")(
            updates, f=f, **dict(pre_options or {})
        )
    elif pre_options:
        raise ValueError("pre_options given without pre; name the pre-aggregator too")
    return rule(updates, f=f, **options)


@dataclass(frozen=True)
class RobustAggregator:
    """Settings of a robust aggregation, callable on a stack of updates.

    Parameters
    ----------
    rule : str
        A key of :data:`AGGREGATORS`.
    f : int
        Number of Byzantine rows tolerated.
    pre : str, optional
        A key of :data:`PRE_AGGREGATORS`.
    options : Mapping
        Keyword options of the rule.
    pre_options : Mapping
        Keyword options of the pre-aggregator.
    """

    rule: str
    f: int = 0
    pre: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    pre_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _lookup(AGGREGATORS, self.rule, "aggregator")
        if self.pre is not None:
            _lookup(PRE_AGGREGATORS, self.pre, "pre-aggregator")
        elif self.pre_options:
            raise ValueError("pre_options given without pre; name the pre-aggregator too")
        if isinstance(self.f, bool) or not isinstance(self.f, int) or self.f < 0:
            raise ValueError(f"f must be a non-negative int, got {self.f!r}")

    def __call__(self, updates: Tensor) -> Tensor:
        """Aggregate ``updates`` (shape ``(n, d)``) into one ``(d,)`` vector."""
        return aggregate(
            self.rule,
            updates,
            f=self.f,
            pre=self.pre,
            pre_options=self.pre_options or None,
            **self.options,
        )
