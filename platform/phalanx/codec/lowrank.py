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

The decoder keeps the factors inside the layer's own buffer until it rebuilds
the layer there (:class:`FactorSlots`), with the same operations in the same
order, so a payload's factors cost it no memory beyond the layer's but a
``rank x rank`` corner.
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

BLOCK = 1 << 16
"""Values of the rebuilt layer computed at a time in place (their temporaries: 256 KiB)."""


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


class FactorSlots:
    """Where a low-rank layer's factors wait inside the layer's own buffer, and the rebuild there.

    With ``m`` rows, ``n`` columns, rank ``k`` and ``t = m - k`` (at least 1,
    since ``k (m + n) <= m n``): the right factor fills the last ``k`` rows
    (``right[j]`` is row ``t + j``); the left factor's first ``t`` columns
    fill ``[t n - t k, t n)`` transposed (column ``i`` is ``k`` consecutive
    values), and its last ``k`` columns, the ``k x k`` corner, a separate
    buffer. ``k m <= t n`` is ``k (m + n) <= m n``, so this fits.

    :meth:`rebuild` then writes rows ``0 .. t - 1`` in order, a block of rows
    at a time, each block's left columns read before the block is written;
    the block never reaches a column still to be read (its end, ``i n``, is at
    most ``t n - t k + i k``, where column ``i`` starts, because ``i <= t``
    and ``k <= n``). Then the last ``k`` rows, where the right factor is, a
    block of columns at a time: each block's right values are copied out, and
    the block is overwritten with ``corner.T @ those`` values.

    Parameters
    ----------
    layer : numpy.ndarray
        The layer's flat ``float32`` buffer (``m n`` values), overwritten.
    rows, cols : int
        ``m`` and ``n``.
    rank : int
        ``k``, ``1 <= k <= max_rank(m, n)``.
    """

    def __init__(self, layer: FloatArray, rows: int, cols: int, rank: int) -> None:
        if not 1 <= rank <= max_rank(rows, cols) or layer.shape != (rows * cols,):
            raise ValueError(f"rank {rank} does not fit a {rows} x {cols} layer in place")
        self.rank = rank
        self._top = rows - rank
        self._grid = layer.reshape(rows, cols)
        start = self._top * (cols - rank)
        self._left = layer[start : self._top * cols].reshape(self._top, rank)
        self.corner = np.empty((rank, rank), dtype=np.float32)
        self.right = layer[self._top * cols :]
        """Receives the right factor, ``k x n`` in row order."""

    def left(self) -> list[FloatArray]:
        """Return the views that receive the left factor (``k x m``, in row order) in turn."""
        parts: list[FloatArray] = []
        for j in range(self.rank):
            parts += [self._left[:, j], self.corner[j]]
        return parts

    def rebuild(self) -> None:
        """Overwrite the layer with its factors' product, as :func:`reconstruct_into` would."""
        k = self.rank
        right = self._grid[self._top :]
        cols = right.shape[1]
        term = np.empty(min(max(BLOCK, k), self._grid.size), dtype=np.float32)
        width = min(cols, BLOCK)
        height = max(BLOCK // width, 1)
        for first in range(0, self._top, height):
            last = min(first + height, self._top)
            left = self._left[first:last].copy()  # read before the rows overwrite it
            for start in range(0, cols, width):
                out = self._grid[first:last, start : start + width]
                _components(left.T, right[:, start : start + width], out, term)
        width = max(BLOCK // k, 1)
        for start in range(0, cols, width):
            block = right[:, start : start + width]
            _components(self.corner, block.copy(), block, term)


def _components(left: FloatArray, right: FloatArray, out: FloatArray, term: FloatArray) -> None:
    """``out = sum_j outer(left[j], right[j])``, components added in order; ``term`` is scratch."""
    np.multiply(left[0][:, None], right[0][None, :], out=out)
    scratch = term[: out.size].reshape(out.shape)
    for j in range(1, left.shape[0]):
        np.multiply(left[j][:, None], right[j][None, :], out=scratch)
        np.add(out, scratch, out=out)
