"""Coordinate-wise rules: the mean, the median, the trimmed mean and the median of means."""

from __future__ import annotations

import torch
from torch import Tensor

from phalanx.aggregation.columns import column_statistic, middle
from phalanx.aggregation.stack import (
    FloatArray,
    checked_result,
    group_means,
    require_minority,
    validated_shape,
)


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
    validated_shape(updates, f, "mean")
    return checked_result(updates.mean(dim=0), updates, "mean")


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
    n, _ = validated_shape(updates, f, "median")
    require_minority(n, f, "median")
    return column_statistic(updates, middle, "median")


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
    n, _ = validated_shape(updates, f, "trimmed_mean")
    require_minority(n, f, "trimmed_mean")

    def central_mean(columns: FloatArray) -> FloatArray:
        result: FloatArray = columns[:, f : n - f].mean(axis=1, dtype=columns.dtype)
        return result

    return column_statistic(updates, central_mean, "trimmed_mean")


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
    n, _ = validated_shape(updates, f, "median_of_means")
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
    means = checked_result(group_means(updates, group_of, groups), updates, "median_of_means")
    return column_statistic(means, middle, "median_of_means")
