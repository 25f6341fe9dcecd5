"""Distances between the rows of a stack: the Gram kernel, and exact distances to one point."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from phalanx.aggregation.stack import (
    DIFF_BLOCK_ELEMENTS,
    host_array,
    raise_if_nonfinite,
    validated_shape,
)

_GRAM_BLOCK = 1 << 16
"""Columns per float32 matrix product; partial Gram matrices add up in float64."""


def gram_matrix(updates: Tensor, rule: str) -> Tensor:
    """Float64 Gram matrix ``X X^T`` of the rows.

    Float32 products over column blocks, summed in float64. A non-finite entry
    triggers an exact scan: NaN or Inf in the input raises; otherwise a row too
    large for float32 squares overflowed, and the Gram matrix is recomputed in
    float64, where no finite float32 input can overflow.
    """
    gram = _gram_blocks(updates, updates.dtype)
    if not bool(torch.isfinite(gram).all()):
        raise_if_nonfinite(updates, rule)
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
    source = host_array(updates)
    np_dtype = np.float64 if dtype == torch.float64 else source.dtype
    total = np.zeros((n, n), dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected by the caller
        for start in range(0, d, _GRAM_BLOCK):
            columns = source[:, start : start + _GRAM_BLOCK].astype(np_dtype, copy=False)
            total += columns @ columns.T
    return torch.from_numpy(total)


def distances_from_gram(gram: Tensor) -> Tensor:
    """Squared distances between the rows from their Gram matrix: symmetric, zero diagonal, >= 0."""
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
    validated_shape(updates, 0, "pairwise_sq_distances")
    return distances_from_gram(gram_matrix(updates, "pairwise_sq_distances"))


def distances_to_combination(dist: Tensor, alpha: Tensor) -> Tensor:
    """``|x_i - z|`` for ``z = sum_j alpha_j x_j`` with ``sum_j alpha_j = 1``.

    Uses ``|x_i - z|^2 = sum_j alpha_j D_ij - 1/2 alpha^T D alpha`` with ``D`` the
    squared pairwise distances, so only relative positions enter.
    """
    pulled = dist @ alpha
    spread = 0.5 * torch.dot(alpha, pulled)
    return (pulled - spread).clamp_(min=0.0).sqrt_()


def distances_to(updates: Tensor, point: Tensor, rule: str) -> Tensor:
    """Exact ``|x_i - point|`` for every row, in float64, one column block at a time.

    Blocks are differenced and normed in the input's precision; if a row's squares
    overflow it (finite input only: NaN or Inf raises), the pass is repeated with
    float64 blocks.
    """
    sq = _sq_distances_blocks(updates, point, updates.dtype)
    if not bool(torch.isfinite(sq).all()):
        raise_if_nonfinite(updates, rule)
        sq = _sq_distances_blocks(updates, point, torch.float64)
    return sq.sqrt_()


def _sq_distances_blocks(updates: Tensor, point: Tensor, dtype: torch.dtype) -> Tensor:
    n, d = updates.shape
    width = min(d, DIFF_BLOCK_ELEMENTS // n + 1)
    buffer = torch.empty(n * width, dtype=dtype, device=updates.device)
    sq = torch.zeros(n, dtype=torch.float64, device=updates.device)
    for start in range(0, d, width):
        block = updates[:, start : start + width]
        diff = buffer[: block.numel()].view(block.shape)
        torch.sub(block.to(dtype), point[start : start + width].to(dtype), out=diff)
        sq += torch.linalg.vector_norm(diff, dim=1).to(torch.float64).square_()
    return sq
