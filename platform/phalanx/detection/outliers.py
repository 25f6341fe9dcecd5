"""Outlier scores, the only (weak) evidence when every file has a single replica (r = 1)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

DEFAULT_OUTLIER_THRESHOLD = 8.0
"""Robust z-score above which an r = 1 update counts as an outlier.

Iglewicz and Hoaglin's 3.5 assumes normal scores, but an honest update's distance
score follows its gradient norm, whose tail is heavy: at 3.5 one honest update in 30
to 35 was flagged in runs without any attack (Fashion-MNIST, 15 workers, 20 to 30
rounds; MLP and CNN), at 8 one in 450 or none, while the reversed gradient, IPM and
the constant attack scored far above 8 and were flagged in every round. Updates
between the honest spread and this cut-off still meet the robust rule.
"""

DEFAULT_OUTLIER_RATIO = 2.0
"""How many times the typical distance to the median update an outlier must also lie.

A robust z-score divides by the spread of the distances, which is noise with few
updates (the MAD of three distances is one of them) and small beside the tail when
clients' data differ; the ratio to the median distance needs no spread. On honest
Fashion-MNIST CNN updates (15 rounds of 20 clients, and 10 random draws of 3 to 10 of
them per round), the ratio never passed 1.46 on IID data, 2.36 under a Dirichlet
label partition with alpha 0.3 and 4.53 with alpha 0.1, while the z-score alone
flagged 2.4 to 5.7 % of honest updates among 3 clients and 3 % among 20 at alpha 0.1.
Updates scaled or reversed by 100 and IPM with epsilon 100 lie 26 to 92 times the
typical distance. 2 on assigned data (every worker's samples are drawn from one
dataset); :data:`LOCAL_OUTLIER_RATIO` where each client trains on its own data.
"""

LOCAL_OUTLIER_RATIO = 5.0
""":data:`DEFAULT_OUTLIER_RATIO` for clients training on their own (heterogeneous) data."""

_MAD_TO_SIGMA = 1.4826  # MAD of a normal distribution times this is its standard deviation

CHUNK_ELEMENTS = 1 << 18
"""Most elements of ``values`` read at once: the median goes over blocks of columns and
the distances over blocks of rows, so the extra memory stays ``O(n + d)`` plus one
block, never a copy of the whole ``(n, d)`` stack. A block's float64 copy (2 MB) stays
in cache: at K = 1,000 and d = 235,146 the distances took half the CPU time they took
with blocks of ``1 << 22`` elements, and the same values."""

CENTRE_BLOCK_COLUMNS = 256
"""Columns of ``values`` one step of :func:`robust_centre` selects in: 256 columns of
1,000 float32 updates are 1 MB, so the block stays in cache while it is partitioned."""

CENTRE_ROW_TILE = 512
"""Rows of a block :func:`robust_centre` copies at once into its column-major block: at
K = 3,000 and d = 235,146 the copies took 1.2 s of CPU, against 4.9 s copying each
block whole (super-linear in K: 0.4 s at K = 1,000)."""

_NUMPY_DTYPES = (torch.float32, torch.float64, torch.float16)


def robust_centre(values: Tensor) -> Tensor:
    """Coordinate-wise median of the rows of ``values`` (the lower middle one for even ``n``).

    Exactly ``values.median(dim=0).values`` for finite values (the rows are checked
    finite before detection), computed faster: each block of
    :data:`CENTRE_BLOCK_COLUMNS` columns is copied so that a column's ``n`` values are
    contiguous, and NumPy's introselect partitions them in place around the middle
    rank. ``torch.median`` along the rows of the ``(n, d)`` stack reads every column
    strided and sorts more than it needs: at K = 1,000 updates of the Fashion-MNIST
    MLP (d = 235,146) it took about 4.5 s of CPU, this about 1 s (tests check the equality,
    never the time). Dtypes NumPy lacks (bfloat16) and tensors off the CPU go through
    ``torch.median`` as before.

    Parameters
    ----------
    values : Tensor
        Shape ``(n, d)``, ``n >= 1``, finite.

    Returns
    -------
    Tensor
        Shape ``(d,)``, the dtype of ``values``.
    """
    n, d = values.shape
    if values.device.type != "cpu" or values.dtype not in _NUMPY_DTYPES:
        step = max(1, CHUNK_ELEMENTS // max(n, 1))
        blocks = [values[:, j : j + step].median(dim=0).values for j in range(0, d, step)]
        return torch.cat(blocks) if blocks else values.new_zeros(0)
    stack = values.detach().numpy()
    middle = (n - 1) // 2
    centre = np.empty(d, dtype=stack.dtype)
    buffer = np.empty((min(CENTRE_BLOCK_COLUMNS, d), n), dtype=stack.dtype)
    for j in range(0, d, CENTRE_BLOCK_COLUMNS):
        # Always a copy (C order): partitioning reorders it in place. Copied a tile of
        # rows at a time: NumPy's copy of the whole transposed block walks each column
        # down all n rows, a page apart, and at K = 3,000 that took 4.9 s of the 6 s.
        width = min(CENTRE_BLOCK_COLUMNS, d - j)
        block = buffer[:width]
        for i in range(0, n, CENTRE_ROW_TILE):
            block[:, i : i + CENTRE_ROW_TILE] = stack[i : i + CENTRE_ROW_TILE, j : j + width].T
        block.partition(middle, axis=1)
        centre[j : j + width] = block[:, middle]
    return torch.from_numpy(centre)


def centre_distances(values: Tensor, centre: Tensor) -> Tensor:
    """L2 distance of each row of ``values`` to ``centre``, summed in float64.

    Parameters
    ----------
    values : Tensor
        Shape ``(n, d)``.
    centre : Tensor
        Shape ``(d,)``.

    Returns
    -------
    Tensor
        Shape ``(n,)``, float64.
    """
    n, d = values.shape
    step = max(1, CHUNK_ELEMENTS // max(d, 1))
    centre64 = centre.to(torch.float64)
    distances = torch.empty(n, dtype=torch.float64)
    # One block buffer for every step: a fresh float64 block per step, freed between
    # small allocations, left the heap fragmented (at K = 1,000 the process grew by
    # 1.76 GB, nearly one block per row, until the distances were done).
    block = torch.empty((min(step, n), d), dtype=torch.float64)
    for i in range(0, n, step):
        rows = block[: min(step, n - i)]
        rows.copy_(values[i : i + step]).sub_(centre64)
        torch.linalg.vector_norm(rows, dim=1, out=distances[i : i + step])
    return distances


@dataclass(frozen=True)
class OutlierMeasures:
    """Two measures of how far each update lies from the coordinate-wise median one.

    Attributes
    ----------
    z : Tensor
        Robust z-scores of the distances (:func:`outlier_scores`), float64.
    ratio : Tensor
        Each distance over the median distance, float64; over the mean distance when
        more than half the updates sit on the median update (median distance 0), and 1
        for all when every update does.
    """

    z: Tensor
    ratio: Tensor

    def outlying(self, threshold: float, ratio: float) -> Tensor:
        """Return which updates score above ``threshold`` and lie ``ratio`` times out."""
        return (self.z > threshold) & (self.ratio > ratio)


def outlier_measures(values: Tensor, f: int) -> OutlierMeasures:
    """Return :func:`outlier_scores` and the distance ratios, from one median.

    Parameters
    ----------
    values : Tensor
        Shape ``(n, d)``, one update per row, ``n >= f + 3``.
    f : int
        Number of Byzantine updates to tolerate (see :func:`outlier_scores`).

    Returns
    -------
    OutlierMeasures
    """
    _check_scored(values, f)
    distances = centre_distances(values, robust_centre(values))
    # A majority on the median update leaves a median distance of 0, and one update far
    # off would be "1 times" it: it is then measured against the mean distance, as the
    # z-score falls back to the mean absolute deviation when the MAD is 0.
    typical = float(torch.quantile(distances, 0.5)) or float(distances.mean())
    ratio = distances / typical if typical > 0 else torch.ones_like(distances)
    return OutlierMeasures(z=robust_z_scores(distances), ratio=ratio)


def check_screening(threshold: float | None, ratio: float) -> None:
    """Refuse a z-score threshold or a distance ratio screening cannot use.

    An infinite one would turn screening off without a word, a string or a boolean
    would pass a comparison or fail inside a round.

    Parameters
    ----------
    threshold : float or None
        Robust z-score threshold, finite and positive (``None``: no screening).
    ratio : float
        Distance ratio, finite and at least 1.

    Raises
    ------
    ValueError
        Naming the value refused.
    """
    if threshold is not None and not (_real(threshold) and 0 < threshold < math.inf):
        raise ValueError(
            f"outlier_threshold must be positive and finite, or None (no detection), "
            f"got {threshold!r}"
        )
    if not (_real(ratio) and 1.0 <= ratio < math.inf):
        raise ValueError(f"outlier_ratio must be at least 1 and finite, got {ratio!r}")


def _real(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def outlier_scores(values: Tensor, f: int) -> Tensor:
    """Robust z-scores of each update's distance to a robust centre, for unreplicated updates.

    Each update's raw score is its L2 distance to the coordinate-wise median of all the
    updates, then centred on the raw scores' median and divided by ``1.4826 * MAD`` (the
    standard deviation, for normal data), so a score counts robust standard deviations
    beyond the typical update; a few extreme updates move neither median nor MAD.

    Why this centre. It takes ``O(n d)`` time and ``O(n + d)`` extra memory, where the
    Krum-style score it replaces (mean distance to the ``n - f - 2`` nearest other
    updates) built an ``n x n`` distance matrix. The coordinate-wise median stays among
    the honest updates while fewer than half the updates lie, whatever the liars send,
    so the separation does not depend on ``f``: colluders sending one identical update
    were each other's nearest neighbours under the old score and could hide when ``f``
    was below their number; here they are as far from the centre as each of them alone.
    And an honest update far out in the heavy tail of gradient norms scores lower: for
    updates spread around a centre at distances ``a_i`` (nearly orthogonal in high
    dimension), the mean distance to the others behaves like ``sqrt(a_i^2 + a^2)``,
    whose robust z-score grows up to ``sqrt(2)`` times faster than ``a_i``'s in the
    tail, so the old score pushed honest stragglers of the norm distribution past the
    threshold sooner, while attacks that move an update many spreads away (reversed
    gradient, IPM, constant) stay far above it (``benchmarks/eval_screening.py``
    compares both on the committed grids). ALIE, built to sit inside the coordinate-wise
    spread, passes both.

    Parameters
    ----------
    values : Tensor
        Shape ``(n, d)``, one update per row.
    f : int
        Number of Byzantine updates to tolerate; needs ``n >= f + 3`` (fewer updates
        are not scored, as before). The score itself does not depend on it.

    Returns
    -------
    Tensor
        Shape ``(n,)``, float64; large positive means far from the others.
    """
    _check_scored(values, f)
    return robust_z_scores(centre_distances(values, robust_centre(values)))


def _check_scored(values: Tensor, f: int) -> None:
    if values.ndim != 2:
        raise ValueError(f"outlier_scores needs a (n, d) tensor, got shape {tuple(values.shape)}")
    n = values.shape[0]
    if f < 0 or n < f + 3:
        raise ValueError(f"outlier_scores needs 0 <= f and n >= f + 3, got n={n}, f={f}")


def robust_z_scores(raw: Tensor) -> Tensor:
    """Scores centred on their median and divided by ``1.4826 * MAD``.

    When more than half the scores coincide (MAD 0), Iglewicz and Hoaglin's fallback
    divides by ``1.2533`` times the mean absolute deviation; scores that all coincide
    give zeros.

    Parameters
    ----------
    raw : Tensor
        Shape ``(n,)``, ``n >= 1``.

    Returns
    -------
    Tensor
        Shape ``(n,)``, the dtype of ``raw``.
    """
    median = torch.quantile(raw, 0.5)
    deviation = (raw - median).abs()
    scale = _MAD_TO_SIGMA * float(torch.quantile(deviation, 0.5))
    if scale == 0.0:
        scale = 1.2533 * float(deviation.mean())
    if scale == 0.0:
        return torch.zeros_like(raw)
    return (raw - median) / scale
