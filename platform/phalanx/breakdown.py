"""Breakdown bounds: how many Byzantine inputs each robust rule tolerates for a number of inputs.

The field calls this a rule's breakdown point; :mod:`phalanx.detection`'s ``tolerance`` is
something else, a relative distance under which two replicas agree.

Kept free of torch so that the run configuration (and with it the API) can check
a rule's preconditions without importing the rules themselves.
"""

from __future__ import annotations

from typing import Literal, get_args

Rule = Literal[
    "mean",
    "median",
    "trimmed_mean",
    "geometric_median",
    "krum",
    "multi_krum",
    "bulyan",
    "centered_clipping",
    "median_of_means",
]
"""A robust rule's name, as the run configuration spells it."""

RULES = frozenset(get_args(Rule))
"""Names of the rules of `phalanx.aggregation.AGGREGATORS`."""

# (a, b): the rule needs n >= a f + b inputs. Rules not listed need a Byzantine minority.
_INPUT_BOUNDS: dict[str, tuple[int, int]] = {
    "mean": (0, 1),
    "krum": (2, 3),
    "multi_krum": (2, 3),
    "bulyan": (4, 3),
}
_MINORITY = (2, 1)


def min_inputs(name: str, f: int) -> int:
    """Fewest updates the rule ``name`` accepts when it must tolerate ``f`` of them.

    Parameters
    ----------
    name : str
        A key of :data:`AGGREGATORS`.
    f : int
        Byzantine updates tolerated.

    Returns
    -------
    int
        ``2 f + 3`` for Krum and Multi-Krum, ``4 f + 3`` for Bulyan, ``1`` for the mean,
        ``2 f + 1`` for the others.
    """
    _check(name)
    a, b = _INPUT_BOUNDS.get(name, _MINORITY)
    return a * f + b


def largest_f(name: str, n: int) -> int | None:
    """Largest ``f`` the rule ``name`` accepts with ``n`` updates (``None``: not even 0).

    Parameters
    ----------
    name : str
        A key of :data:`AGGREGATORS`.
    n : int
        Number of updates.

    Returns
    -------
    int or None
        The largest ``f`` with ``min_inputs(name, f) <= n``; the mean, which ignores
        ``f``, accepts any. ``None`` when ``n`` is below ``min_inputs(name, 0)``.
    """
    _check(name)
    a, b = _INPUT_BOUNDS.get(name, _MINORITY)
    if n < b:
        return None
    return n if a == 0 else (n - b) // a


def _check(name: str) -> None:
    if name not in RULES:
        raise ValueError(f"unknown aggregator {name!r}; choose one of {sorted(RULES)}")
