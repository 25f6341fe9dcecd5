"""Centered clipping: a robust step from a centre, outliers clipped to a radius."""

from __future__ import annotations

import torch
from torch import Tensor

from phalanx.aggregation.distances import distances_to
from phalanx.aggregation.stack import (
    combine_rows,
    raise_if_nonfinite,
    require_minority,
    validated_shape,
)


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
    n, d = validated_shape(updates, f, "centered_clipping")
    require_minority(n, f, "centered_clipping")
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
        raise_if_nonfinite(center[None, :], "centered_clipping")
        v = center.to(device=updates.device, dtype=updates.dtype)
    for _ in range(n_iter):
        to_v = distances_to(updates, v, "centered_clipping")
        clip = torch.where(to_v > tau, tau / to_v, torch.ones_like(to_v))
        v = v * (1.0 - float(clip.mean())) + combine_rows(updates, clip / n)
    return v
