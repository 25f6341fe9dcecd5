"""The geometric median, by the smoothed Weiszfeld algorithm on the Gram matrix."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from phalanx.aggregation.distances import (
    distances_from_gram,
    distances_to_combination,
    gram_matrix,
)
from phalanx.aggregation.stack import combine_rows, require_minority, validated_shape


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
    n, _ = validated_shape(updates, f, "geometric_median")
    require_minority(n, f, "geometric_median")
    if not nu > 0.0:
        raise ValueError(f"geometric_median: nu must be positive, got {nu}")
    if max_iter < 0 or eps < 0.0:
        raise ValueError(
            f"geometric_median: max_iter and eps must be non-negative, got {max_iter}, {eps}"
        )
    dist = distances_from_gram(gram_matrix(updates, "geometric_median"))
    alpha = torch.full((n,), 1.0 / n, dtype=torch.float64, device=dist.device)
    previous = math.inf
    for _ in range(max_iter):
        to_z = distances_to_combination(dist, alpha)
        objective = float(to_z.sum())
        if abs(previous - objective) <= eps * objective:
            break
        previous = objective
        weights = 1.0 / to_z.clamp(min=nu)
        weights = torch.nan_to_num_(weights, nan=0.0)  # rows at infinite distance
        alpha = weights / weights.sum()
    return combine_rows(updates, alpha)
