"""The policies by name, and `collect` that closes a round by one of them.

Every policy is a close rule (:data:`CLOSE_RULES`): the earliest time its
condition holds over the pieces given, or ``None``. :func:`collect` closes the
round at that time, or at the deadline if that comes first or the condition
never holds, or (no deadline, condition unmet: a simulated round whose missing
pieces will never come) at the last arrival, and splits the pieces there.

The same rule drives a live round: after each arrival, call
:meth:`CollectionPolicy.closes_by` on the pieces so far; once it is true, close
with :meth:`CollectionPolicy.__call__` on the same pieces, and whatever arrives
afterwards is late.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any, Protocol

from phalanx.assignment import Assignment
from phalanx.collect.config import CollectConfig
from phalanx.collect.pieces import Collection, Piece, split
from phalanx.collect.quorum import fastest_replica_close, quorum_close
from phalanx.collect.waiting import everyone_arrived, kth_complete


class CloseRule(Protocol):
    """When a policy's condition first holds over ``pieces``, or ``None`` if never."""

    def __call__(
        self,
        assignment: Assignment,
        pieces: Iterable[Piece],
        /,
        *,
        dispatched: Set[int] | None = None,
        **options: Any,
    ) -> float | None:
        """Earliest close time, or ``None``."""
        ...


CLOSE_RULES: dict[str, Callable[..., float | None]] = {
    "all": everyone_arrived,
    "deadline": everyone_arrived,
    "fastest_k": kth_complete,
    "adaptive_k": kth_complete,
    "quorum": quorum_close,
    "group_fastest": fastest_replica_close,
    # The bandit decides who gets work (phalanx.collect.bandit); those chosen are waited for.
    "bandit": everyone_arrived,
}
"""Close rules by policy name."""


def _rule(policy: str) -> Callable[..., float | None]:
    try:
        return CLOSE_RULES[policy]
    except KeyError:
        known = ", ".join(sorted(CLOSE_RULES))
        raise ValueError(f"unknown collection policy {policy!r}; choose one of: {known}") from None


def close_time(
    policy: str,
    assignment: Assignment,
    pieces: Iterable[Piece],
    *,
    dispatched: Set[int] | None = None,
    **options: Any,
) -> float | None:
    """When ``policy``'s condition first holds over ``pieces``, or ``None`` if it never does.

    Parameters
    ----------
    policy : str
        A key of :data:`CLOSE_RULES`.
    assignment : Assignment
        The round's assignment.
    pieces : iterable of Piece
        What arrived (so far).
    dispatched : set of int, optional
        Workers sent work; ``None``: every worker with a file.
    **options
        The rule's own: ``k`` (fastest_k, adaptive_k), ``m`` (quorum), ``groups`` (group_fastest).
    """
    return _rule(policy)(assignment, pieces, dispatched=dispatched, **options)


def collect(
    policy: str,
    assignment: Assignment,
    pieces: Iterable[Piece],
    *,
    deadline_s: float | None = None,
    dispatched: Set[int] | None = None,
    **options: Any,
) -> Collection:
    """Close a round by ``policy`` and split its pieces into kept, late and missing.

    Parameters
    ----------
    policy : str
        A key of :data:`CLOSE_RULES`.
    assignment : Assignment
        The round's assignment.
    pieces : iterable of Piece
        Everything that arrived, in any order.
    deadline_s : float, optional
        Seconds after which the round closes whatever the condition.
    dispatched : set of int, optional
        Workers sent work; ``None``: every worker with a file.
    **options
        The rule's own (see :func:`close_time`).

    Returns
    -------
    Collection
    """
    arrived = tuple(pieces)
    met = close_time(policy, assignment, arrived, dispatched=dispatched, **options)
    if met is not None and (deadline_s is None or met <= deadline_s):
        return split(assignment, arrived, closed_at=met, closed_by="policy", dispatched=dispatched)
    if deadline_s is not None:
        return split(
            assignment, arrived, closed_at=deadline_s, closed_by="deadline", dispatched=dispatched
        )
    last = max((p.time for p in arrived), default=0.0)
    return split(
        assignment, arrived, closed_at=last, closed_by="last_arrival", dispatched=dispatched
    )


#: The config parameters that are options of each close rule.
_RULE_OPTIONS = {"fastest_k": ("k",), "adaptive_k": ("k",), "quorum": ("m",)}


@dataclass(frozen=True)
class CollectionPolicy:
    """A policy's settings, callable on a round's pieces.

    Parameters
    ----------
    name : str
        A key of :data:`CLOSE_RULES`.
    deadline_s : float, optional
        Seconds after which a round closes whatever the condition.
    options : Mapping
        The close rule's options (``k``, ``m``); a round may override them
        (adaptive_k's current ``k``) or add ``groups`` (group_fastest).
    """

    name: str
    deadline_s: float | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _rule(self.name)

    @classmethod
    def from_config(cls, config: CollectConfig) -> CollectionPolicy:
        """Build the policy a ``collect`` setting names (adaptive_k starts at its ``k``)."""
        chosen = config.parameters()
        options = {key: chosen[key] for key in _RULE_OPTIONS.get(config.policy, ())}
        return cls(config.policy, config.deadline_s, options)

    def close_time(
        self,
        assignment: Assignment,
        pieces: Iterable[Piece],
        *,
        dispatched: Set[int] | None = None,
        **round_options: Any,
    ) -> float | None:
        """When the condition first holds over ``pieces`` (deadline not counted), or ``None``."""
        options = {**self.options, **round_options}
        return close_time(self.name, assignment, pieces, dispatched=dispatched, **options)

    def closes_by(
        self,
        now: float,
        assignment: Assignment,
        pieces: Iterable[Piece],
        *,
        dispatched: Set[int] | None = None,
        **round_options: Any,
    ) -> bool:
        """Whether a live round with these pieces so far should be closed at ``now``."""
        if self.deadline_s is not None and now >= self.deadline_s:
            return True
        return (
            self.close_time(assignment, pieces, dispatched=dispatched, **round_options) is not None
        )

    def __call__(
        self,
        assignment: Assignment,
        pieces: Iterable[Piece],
        *,
        dispatched: Set[int] | None = None,
        **round_options: Any,
    ) -> Collection:
        """Close the round and split its pieces (see :func:`collect`)."""
        options = {**self.options, **round_options}
        return collect(
            self.name,
            assignment,
            pieces,
            deadline_s=self.deadline_s,
            dispatched=dispatched,
            **options,
        )
