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

One rule family per module: :mod:`~phalanx.aggregation.averages` (mean, median,
trimmed mean, median of means), :mod:`~phalanx.aggregation.weiszfeld` (geometric
median), :mod:`~phalanx.aggregation.selection` (Krum, Multi-Krum, Bulyan),
:mod:`~phalanx.aggregation.clipping` (centered clipping),
:mod:`~phalanx.aggregation.weighting` (FedAvg's sample-weighted mean, and what
each rule does with weights),
:mod:`~phalanx.aggregation.preaggregators` (NNM, bucketing) and
:mod:`~phalanx.aggregation.registry` (the tables and `aggregate`); the kernels live in
:mod:`~phalanx.aggregation.distances` (Gram matrix, exact distances) and
:mod:`~phalanx.aggregation.columns` (column statistics), the checks of the input in
:mod:`~phalanx.aggregation.stack`. How many Byzantine inputs each rule tolerates is
:mod:`phalanx.breakdown` (torch-free, for the run config).
"""

from phalanx.aggregation.averages import coordinate_median, mean, median_of_means, trimmed_mean
from phalanx.aggregation.clipping import centered_clipping
from phalanx.aggregation.distances import pairwise_sq_distances
from phalanx.aggregation.preaggregators import bucketing, nearest_neighbor_mixing
from phalanx.aggregation.registry import (
    AGGREGATORS,
    PRE_AGGREGATORS,
    Aggregator,
    PreAggregator,
    RobustAggregator,
    aggregate,
)
from phalanx.aggregation.selection import bulyan, krum, krum_scores, krum_selection, multi_krum
from phalanx.aggregation.weighting import weighted_mean
from phalanx.aggregation.weiszfeld import geometric_median
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
    "weighted_mean",
]
