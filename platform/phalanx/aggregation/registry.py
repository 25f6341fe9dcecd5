"""The rules and pre-aggregators by name, and `aggregate` that combines them from settings."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from torch import Tensor

from phalanx.aggregation.averages import coordinate_median, mean, median_of_means, trimmed_mean
from phalanx.aggregation.clipping import centered_clipping
from phalanx.aggregation.preaggregators import bucketing, nearest_neighbor_mixing
from phalanx.aggregation.selection import bulyan, krum, multi_krum
from phalanx.aggregation.weiszfeld import geometric_median


class Aggregator(Protocol):
    """A robust rule: ``(n, d)`` stack and Byzantine count ``f`` to one ``(d,)`` vector."""

    def __call__(self, updates: Tensor, /, *, f: int) -> Tensor:
        """Aggregate ``updates`` tolerating ``f`` Byzantine rows."""
        ...


class PreAggregator(Protocol):
    """A pre-aggregator: ``(n, d)`` stack to a new ``(n', d)`` stack."""

    def __call__(self, updates: Tensor, /, *, f: int) -> Tensor:
        """Transform ``updates`` before a robust rule aggregates them."""
        ...


AGGREGATORS: dict[str, Aggregator] = {
    "mean": mean,
    "median": coordinate_median,
    "trimmed_mean": trimmed_mean,
    "geometric_median": geometric_median,
    "krum": krum,
    "multi_krum": multi_krum,
    "bulyan": bulyan,
    "centered_clipping": centered_clipping,
    "median_of_means": median_of_means,
}
"""Robust rules by name."""

PRE_AGGREGATORS: dict[str, PreAggregator] = {
    "nnm": nearest_neighbor_mixing,
    "bucketing": bucketing,
}
"""Pre-aggregators by name."""


def _lookup(table: Mapping[str, Any], name: str, kind: str) -> Callable[..., Tensor]:
    try:
        return cast(Callable[..., Tensor], table[name])
    except KeyError:
        known = ", ".join(sorted(table))
        raise ValueError(f"unknown {kind} {name!r}; choose one of: {known}") from None


def aggregate(
    name: str,
    updates: Tensor,
    *,
    f: int,
    pre: str | None = None,
    pre_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> Tensor:
    """Aggregate ``updates`` with the rule ``name``, after the pre-aggregator ``pre`` if given.

    Parameters
    ----------
    name : str
        A key of :data:`AGGREGATORS`.
    updates : Tensor
        Shape ``(n, d)``, one row per worker.
    f : int
        Number of Byzantine rows tolerated, passed to both stages.
    pre : str, optional
        A key of :data:`PRE_AGGREGATORS`.
    pre_options : Mapping, optional
        Keyword options of the pre-aggregator (e.g. ``{"s": 2, "seed": 7}``).
    **options
        Keyword options of the rule (e.g. ``m=5`` for Multi-Krum).

    Returns
    -------
    Tensor
        Shape ``(d,)``.
    """
    rule = _lookup(AGGREGATORS, name, "aggregator")
    if pre is not None:
        updates = _lookup(PRE_AGGREGATORS, pre, "pre-aggregator")(
            updates, f=f, **dict(pre_options or {})
        )
    elif pre_options:
        raise ValueError("pre_options given without pre; name the pre-aggregator too")
    return rule(updates, f=f, **options)


@dataclass(frozen=True)
class RobustAggregator:
    """Settings of a robust aggregation, callable on a stack of updates.

    Parameters
    ----------
    rule : str
        A key of :data:`AGGREGATORS`.
    f : int
        Number of Byzantine rows tolerated.
    pre : str, optional
        A key of :data:`PRE_AGGREGATORS`.
    options : Mapping
        Keyword options of the rule.
    pre_options : Mapping
        Keyword options of the pre-aggregator.
    """

    rule: str
    f: int = 0
    pre: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    pre_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _lookup(AGGREGATORS, self.rule, "aggregator")
        if self.pre is not None:
            _lookup(PRE_AGGREGATORS, self.pre, "pre-aggregator")
        elif self.pre_options:
            raise ValueError("pre_options given without pre; name the pre-aggregator too")
        if isinstance(self.f, bool) or not isinstance(self.f, int) or self.f < 0:
            raise ValueError(f"f must be a non-negative int, got {self.f!r}")

    def __call__(self, updates: Tensor) -> Tensor:
        """Aggregate ``updates`` (shape ``(n, d)``) into one ``(d,)`` vector."""
        return aggregate(
            self.rule,
            updates,
            f=self.f,
            pre=self.pre,
            pre_options=self.pre_options or None,
            **self.options,
        )
