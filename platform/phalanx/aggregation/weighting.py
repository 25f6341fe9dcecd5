"""FedAvg's sample weighting, and what each robust rule does with weights.

In ``data.mode = "local"`` each client reports how many samples it trained on.
:func:`weighted_mean` is FedAvg's aggregate (McMahan et al., 2017): the updates
averaged with weights ``n_i / sum(n)``, so a client with twice the data counts
twice. It is the ``mean`` rule with weights; it tolerates no Byzantine input.

Sample counts are what clients *say*. In local mode nobody can check them, and a
single client claiming a huge count owns a weighted mean; ``max_count`` clips
every count to a bound the operator trusts (in simulation, the largest partition).

The robust rules of this package take no weights: every row counts once,
whatever its sample count.

==================  ===================================================================
rule                with sample weights
==================  ===================================================================
mean                :func:`weighted_mean` is its weighted form (FedAvg).
median              ignores them; a coordinate-wise *weighted* median (each value
                    counted by its weight) could use them.
trimmed_mean        ignores them; a weighted trimmed mean (trim by weight mass, then
                    the weighted mean of the rest) could use them.
median_of_means     ignores them; the means of its groups could be weighted.
geometric_median    ignores them; it could use them most naturally: RFA (Pillutla et
                    al., 2022) defines the weighted geometric median with weights
                    ``n_i / sum(n)``, a Weiszfeld iteration with the weights folded in.
krum, multi_krum    ignore them: selection is by distances alone; Multi-Krum could
                    weight the mean of the rows it selects.
bulyan              ignores them (Krum selection, then a coordinate-wise trimmed mean).
centered_clipping   ignores them; the mean of the clipped differences could be weighted.
nnm, bucketing      ignore them: NNM replaces each row by the plain mean of its
                    ``n - f`` nearest rows, bucketing averages buckets of rows equally.
==================  ===================================================================

Every weighted form above inherits the caveat of the counts: a bound on them
(``max_count``) has to come first.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from phalanx.aggregation.stack import checked_result, combine_rows, validated_shape

MAX_COUNT = 2**53
"""Largest sample count accepted: every count up to it is exact in float64."""


def weighted_mean(
    updates: Tensor, counts: Sequence[int] | Tensor, *, max_count: int | None = None
) -> Tensor:
    """FedAvg's mean: ``sum_i n_i x_i / sum_i n_i``, with each ``n_i`` clipped to ``max_count``.

    Parameters
    ----------
    updates : Tensor
        Shape ``(n, d)``, floating point, one row per client.
    counts : sequence of int or Tensor
        ``n`` sample counts, each in ``0 ..`` :data:`MAX_COUNT`, not all zero.
    max_count : int, optional
        Clip every count to at most this (``>= 1``) before weighting.

    Returns
    -------
    Tensor
        Shape ``(d,)``, the dtype of ``updates``; weights are formed in float64.

    Raises
    ------
    ValueError
        On a malformed stack or count, counts that sum to zero, or NaN / Inf in the
        rows that carry weight.
    """
    n, _ = validated_shape(updates, 0, "weighted_mean")
    weights = _weights(counts, n, max_count)
    carried = weights > 0
    # A row of weight zero takes no part: its values must not reach the result as 0 * Inf.
    rows = updates if bool(carried.all()) else updates[carried.to(updates.device)]
    result = combine_rows(rows, weights[carried].to(updates.device))
    return checked_result(result, rows, "weighted_mean")


def _weights(counts: Sequence[int] | Tensor, n: int, max_count: int | None) -> Tensor:
    if isinstance(counts, str | bytes) or not isinstance(counts, Sequence | Tensor):
        raise TypeError(f"counts must be a sequence of ints, got {type(counts).__name__}")
    values = counts.tolist() if isinstance(counts, Tensor) else list(counts)
    if len(values) != n:
        raise ValueError(f"weighted_mean: {n} updates but {len(values)} counts")
    if not all(_is_count(c) for c in values):
        shown = [c for c in values if not _is_count(c)][:5]
        raise ValueError(
            f"weighted_mean: every count must be a whole number in 0..2**53, got {shown}"
        )
    if max_count is not None:
        if isinstance(max_count, bool) or not isinstance(max_count, int) or max_count < 1:
            raise ValueError(f"weighted_mean: max_count must be an int >= 1, got {max_count!r}")
        values = [min(c, max_count) for c in values]
    total = sum(values)
    if total == 0:
        raise ValueError("weighted_mean: the counts sum to zero; no update carries weight")
    return torch.tensor(values, dtype=torch.float64) / float(total)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT
