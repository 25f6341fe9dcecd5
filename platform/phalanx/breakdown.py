"""Breakdown bounds: how many Byzantine inputs each robust rule tolerates for a number of inputs.

The field calls this a rule's breakdown point; :mod:`phalanx.detection`'s ``tolerance`` is
something else, a relative distance under which two replicas agree.

Kept free of torch so that the run configuration (and with it the API) can check
a rule's preconditions without importing the rules themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
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
# The option of a rule that fixes how many updates it needs at least.
_COUNT_OPTIONS: dict[str, str] = {"multi_krum": "m", "median_of_means": "groups"}


def min_inputs(name: str, f: int, options: Mapping[str, object] | None = None) -> int:
    """Fewest updates the rule ``name`` accepts when it must tolerate ``f`` of them.

    Parameters
    ----------
    name : str
        A key of :data:`AGGREGATORS`.
    f : int
        Byzantine updates tolerated.
    options : Mapping, optional
        The rule's keyword options; a count among them (Multi-Krum's ``m``, the
        median of means' ``groups``) needs at least that many updates.

    Returns
    -------
    int
        ``2 f + 3`` for Krum and Multi-Krum, ``4 f + 3`` for Bulyan, ``1`` for the mean,
        ``2 f + 1`` for the others; at least the count an option fixes.
    """
    _check(name)
    a, b = _INPUT_BOUNDS.get(name, _MINORITY)
    return max(a * f + b, _count_option(name, options))


def largest_f(name: str, n: int, options: Mapping[str, object] | None = None) -> int | None:
    """Largest ``f`` the rule ``name`` accepts with ``n`` updates (``None``: not even 0).

    Parameters
    ----------
    name : str
        A key of :data:`AGGREGATORS`.
    n : int
        Number of updates.
    options : Mapping, optional
        The rule's keyword options (see :func:`min_inputs`); the median of means
        also needs ``2 f < groups``.

    Returns
    -------
    int or None
        The largest ``f`` with ``min_inputs(name, f, options) <= n``; the mean, which
        ignores ``f``, accepts any. ``None`` when ``n`` is below
        ``min_inputs(name, 0, options)``.
    """
    _check(name)
    a, b = _INPUT_BOUNDS.get(name, _MINORITY)
    count = _count_option(name, options)
    if n < max(b, count):
        return None
    f = n if a == 0 else (n - b) // a
    if name == "median_of_means" and count:
        f = min(f, (count - 1) // 2)
    return f


def rule_inputs(
    n: int, pre: str | None = None, pre_options: Mapping[str, object] | None = None
) -> int:
    """Rows the rule receives from ``n`` updates after the pre-aggregator ``pre``.

    Bucketing averages buckets of ``s`` updates (2 by default), so the rule sees
    ``ceil(n / s)`` rows; nearest-neighbour mixing keeps ``n``.
    """
    if pre == "bucketing":
        s = (pre_options or {}).get("s", 2)
        if isinstance(s, int) and not isinstance(s, bool) and s >= 1:
            return -(-n // s)
    return n


def fitted_options(name: str, n: int, options: Mapping[str, object]) -> dict[str, object]:
    """Return the rule's options for ``n`` inputs: a count above ``n`` is lowered to ``n``.

    The counts are Multi-Krum's ``m`` and the median of means' ``groups``. As ``f`` is
    lowered when a round has fewer inputs than planned (lost, refused or
    flagged replies), so is a count the config fixed for a full round; a round is never
    refused for it.
    """
    fitted = dict(options)
    key = _COUNT_OPTIONS.get(name)
    if key is not None and 0 < n < _count_option(name, fitted):
        fitted[key] = n
    return fitted


def _count_option(name: str, options: Mapping[str, object] | None) -> int:
    """Return the number of updates an option of the rule fixes (0: none)."""
    key = _COUNT_OPTIONS.get(name)
    value = (options or {}).get(key) if key else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _check(name: str) -> None:
    if name not in RULES:
        raise ValueError(f"unknown aggregator {name!r}; choose one of {sorted(RULES)}")
