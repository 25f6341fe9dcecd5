"""Rules that select updates by their Krum scores: Krum, Multi-Krum and Bulyan."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from phalanx.aggregation.columns import column_statistic, mean_closest_to_middle
from phalanx.aggregation.distances import distances_from_gram, gram_matrix
from phalanx.aggregation.stack import FloatArray, combine_rows, validated_shape


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
    n, _ = validated_shape(updates, f, "krum")
    _require_krum(n, f, "krum")
    if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= n:
        raise ValueError(f"krum: m must be an int in [1, n={n}], got {m!r}")
    scores = krum_scores(distances_from_gram(gram_matrix(updates, "krum")), f=f)
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
    n, _ = validated_shape(updates, f, "multi_krum")
    m = n - f if m is None else m
    chosen = krum_selection(updates, f=f, m=m)
    weights = torch.zeros(n, dtype=torch.float64, device=updates.device)
    weights[chosen] = 1.0 / m
    return combine_rows(updates, weights)


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
    n, _ = validated_shape(updates, f, "bulyan")
    if n < 4 * f + 3:
        raise ValueError(
            f"bulyan needs n >= 4f + 3 updates, got n={n}, f={f}; "
            f"collect at least {4 * f + 3} updates or lower f to {max((n - 3) // 4, 0)}"
            + ("" if n >= 3 else " (and Bulyan needs at least 3 updates)")
        )
    theta = n - 2 * f
    beta = theta - 2 * f
    chosen = _bulyan_selection(distances_from_gram(gram_matrix(updates, "bulyan")), f, theta)

    def closest_to_median_mean(columns: FloatArray) -> FloatArray:
        return mean_closest_to_middle(columns, beta)

    return column_statistic(updates, closest_to_median_mean, "bulyan", rows=chosen)
