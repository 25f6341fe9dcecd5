"""Pre-aggregators: nearest-neighbour mixing and bucketing, a new stack for any rule."""

from __future__ import annotations

from typing import cast

import torch
from torch import Tensor

from phalanx.aggregation.distances import distances_from_gram, gram_matrix
from phalanx.aggregation.stack import checked_result, group_means, validated_shape


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
    n, _ = validated_shape(updates, f, "nnm")
    if f >= n:
        raise ValueError(f"nnm needs f < n, got n={n}, f={f}; lower f to {n - 1}")
    dist = distances_from_gram(gram_matrix(updates, "nnm"))
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
    n, _ = validated_shape(updates, f, "bucketing")
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
    return checked_result(group_means(updates, bucket_of, n_buckets), updates, "bucketing")
