"""Low-rank coding of a matrix-shaped layer: two quantized factors whose product rebuilds it.

A fully connected layer's gradient over a file of ``B`` samples is a sum of
``B`` outer products (error signal times input activation), and nearly all of
its energy lies in a handful of directions: on the Fashion-MNIST CNN the top 8
singular values of ``classifier.1.weight``'s gradient (128 x 3136) hold 99 %
or more of it. Such a layer is sent as the top ``k`` singular directions, a
left factor ``(k, m)`` and a right factor ``(k, n)``, each quantized mid-tread
with one step for the whole factor; the receiver rebuilds
``sum_j outer(left[j], right[j])``: ``k (m + n)`` symbols instead of ``m n``.

The truncation is biased: the directions left out are lost, unless the worker
carries them into its next update (error feedback, ``r = 1`` only).

Determinism. :func:`code_factors` runs LAPACK and BLAS under a one-thread
limit, so honest replicas on one software stack compute the same factors and
send the same bytes. :func:`reconstruct_into` uses only elementwise ``float32``
multiplications and additions in a fixed order, so every IEEE 754 platform,
whatever its BLAS, rebuilds the layer bit for bit as the encoder did.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from threadpoolctl import ThreadpoolController

from .layers import FloatArray
from .quantizers import MAX_SYMBOL, quantize_uniform

Float64Array = npt.NDArray[np.float64]

RELATIVE_FLOOR = 1e-7
"""Directions with a singular value below this fraction of the largest are left out.

The Gram matrix squares the singular values, so below about ``sqrt(eps)`` of the
largest its eigenvectors are rounding noise (and dividing by them would amplify it).
"""

MAX_FACTOR = 1e30
"""Largest factor magnitude the encoder sends; beyond it the layer takes another quantizer."""


@functools.cache
def _controller() -> ThreadpoolController:
    # Scanning the loaded libraries costs about a millisecond: do it once per process.
    return ThreadpoolController()


def one_thread() -> AbstractContextManager[Any]:
    """Limit BLAS to one thread for the block, so its results do not depend on a thread count."""
    limit: AbstractContextManager[Any] = _controller().limit(limits=1, user_api="blas")
    return limit


def matrix_shape(shape: Sequence[int]) -> tuple[int, int] | None:
    """Return the ``(rows, columns)`` of a layer that low-rank coding may send, else ``None``.

    Only 2-D layers (fully connected weights) qualify, and only when some
    rank of at least 1 costs fewer symbols than the layer itself.
    """
    if len(shape) != 2:
        return None
    rows, cols = int(shape[0]), int(shape[1])
    return (rows, cols) if max_rank(rows, cols) >= 1 else None


def max_rank(rows: int, cols: int) -> int:
    """Return the largest rank whose factors fit in the matrix: ``k (rows + cols) <= rows cols``.

    Also at most ``min(rows, cols)``. The decoder refuses a larger rank, so a
    payload never makes it allocate more than the layer's size.
    """
    if rows < 1 or cols < 1:
        return 0
    return min(rows, cols, rows * cols // (rows + cols))


def top_factors(matrix: FloatArray, rank: int) -> tuple[Float64Array, Float64Array]:
    """Factor the best rank-``rank`` approximation of ``matrix``, ``sqrt(sigma)`` on each side.

    Parameters
    ----------
    matrix : numpy.ndarray
        ``(m, n)``, finite.
    rank : int
        ``k >= 1``; directions with a zero singular value are left out, so
        fewer may come back.

    Returns
    -------
    left, right : numpy.ndarray
        ``float64``, shapes ``(k', m)`` and ``(k', n)`` with ``k' <= k``,
        strongest direction first, such that
        ``matrix ~= left.T @ right`` (component ``j`` is
        ``sqrt(sigma_j) u_j`` and ``sqrt(sigma_j) v_j``).

    Notes
    -----
    Eigenvectors of the smaller Gram matrix (``m x m`` or ``n x n``), in
    ``float64``, under a one-thread BLAS limit (see the module docstring).
    """
    if rank < 1:
        raise ValueError(f"rank must be >= 1, got {rank}")
    a = np.asarray(matrix, dtype=np.float64)
    rows, cols = a.shape
    transposed = rows > cols
    if transposed:
        a = a.T
    with one_thread():
        eigenvalues, vectors = np.linalg.eigh(a @ a.T)
        order = np.argsort(eigenvalues)[::-1][: min(rank, a.shape[0])]
        sigma = np.sqrt(np.maximum(eigenvalues[order], 0.0))
        keep = sigma > (sigma[0] if sigma.size else 0.0) * RELATIVE_FLOOR
        u = vectors[:, order[keep]]
        sigma = sigma[keep]
        v = (a.T @ u) / sigma  # unit columns: A^T u_j = sigma_j v_j
    root = np.sqrt(sigma)
    small, large = (u * root).T, (v * root).T
    return (large, small) if transposed else (small, large)


@dataclass(frozen=True)
class Factor:
    """One quantized factor: ``symbols * step`` are its values.

    Parameters
    ----------
    symbols : numpy.ndarray
        ``float32`` integers, shape ``(k, length)``, within :data:`MAX_SYMBOL`.
    step : numpy.float32
        Positive.
    values : numpy.ndarray
        ``symbols * step`` in ``float32``, as the decoder computes them.
    """

    symbols: FloatArray
    step: np.float32
    values: FloatArray


def quantize_factor(factor: Float64Array, step_multiplier: float) -> Factor:
    """Round a factor to multiples of ``step_multiplier`` times its RMS (grown to fit the alphabet).

    Parameters
    ----------
    factor : numpy.ndarray
        ``(k, length)``, finite, not all zero.
    step_multiplier : float
        Step in multiples of the factor's RMS.
    """
    values = np.asarray(factor, dtype=np.float32)
    peak = float(np.max(np.abs(values)))
    rms = float(np.sqrt(np.mean(np.square(factor))))
    step = np.float32(step_multiplier * rms)
    if not step > 0:  # an RMS that underflows float32
        step = np.float32(peak) if peak > 0 else np.float32(1.0)
    if peak / float(step) > MAX_SYMBOL - 1:
        step = np.float32(peak / (MAX_SYMBOL - 1))
        while peak / float(step) > MAX_SYMBOL - 1:
            step = np.nextafter(step, np.float32(np.inf))
    symbols = quantize_uniform(values, step)
    return Factor(symbols, step, np.multiply(symbols, step, dtype=np.float32))


def code_factors(
    matrix: FloatArray, rank: int, step_multiplier: float
) -> tuple[Factor, Factor] | None:
    """Factor ``matrix`` at ``rank`` and quantize both factors, the right one refitted to the left.

    After the left factor is rounded, the right one is the least-squares fit
    to the matrix given the rounded left factor, so it absorbs part of the
    left factor's rounding error, and is then rounded itself.

    Parameters
    ----------
    matrix : numpy.ndarray
        ``float32``, ``(m, n)``, finite.
    rank : int
        ``k >= 1``.
    step_multiplier : float
        Each factor's step in multiples of its RMS.

    Returns
    -------
    tuple of Factor, or None
        ``(left, right)`` with shapes ``(k', m)`` and ``(k', n)``; ``None`` for
        an all-zero matrix, or when a factor would exceed :data:`MAX_FACTOR`.
    """
    left, _ = top_factors(matrix, rank)
    if left.shape[0] == 0 or not np.abs(left).max() <= MAX_FACTOR:
        return None
    coded_left = quantize_factor(left, step_multiplier)
    basis = coded_left.values.astype(np.float64)
    with one_thread():
        # min ||basis.T @ X - matrix||: X = (B B^T)^+ B matrix, B = basis (k x m).
        gram = basis @ basis.T
        refit = np.linalg.pinv(gram, hermitian=True) @ (basis @ np.asarray(matrix, np.float64))
    if not np.any(refit) or not np.abs(refit).max() <= MAX_FACTOR:  # also catches NaN
        return None
    return coded_left, quantize_factor(refit, step_multiplier)


def reconstruct_into(left: FloatArray, right: FloatArray, out: FloatArray) -> None:
    """Write ``sum_j outer(left[j], right[j])`` into ``out``, bit-identically on every platform.

    Parameters
    ----------
    left : numpy.ndarray
        ``float32``, ``(k, m)`` with ``k >= 1``.
    right : numpy.ndarray
        ``float32``, ``(k, n)``.
    out : numpy.ndarray
        ``float32``, ``m * n`` values (flat or ``(m, n)``), overwritten.

    Notes
    -----
    Each product and each sum is one ``float32`` operation, components added
    in order ``0, 1, ..., k - 1`` (no BLAS, no fused multiply-add).
    """
    k, rows = left.shape
    cols = right.shape[1]
    view = out.reshape(rows, cols)
    np.multiply(left[0][:, None], right[0][None, :], out=view)
    if k > 1:
        term = np.empty((rows, cols), dtype=np.float32)
        for j in range(1, k):
            np.multiply(left[j][:, None], right[j][None, :], out=term)
            np.add(view, term, out=view)


def product_bound(left_peak: float, right_peak: float, rank: int) -> float:
    """Largest magnitude the rebuilt layer can reach: ``rank * max|left| * max|right|``."""
    return float(rank) * left_peak * right_peak
