"""G-CADA's memory across rounds: each group's last accepted updates, staleness, model moves.

CADA's rule (:func:`phalanx.collect.groups.lazy_groups`) decides from numbers; this
module keeps the tensors they come from, and the updates that stand in for the groups
a round does not wait for.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from phalanx.collect.groups import lazy_groups, next_staleness

MOVES_WINDOW = 10
"""CADA's ``d_max``: the last rounds whose model moves set the threshold.

The CADA paper leaves it to the user; 10 averages over enough rounds that one
large step does not open every group at once, and still follows the learning
rate's decay within a few rounds.
"""


@dataclass
class LazyGroups:
    """G-CADA's memory: each group's last two accepted updates and rounds since it uploaded.

    A group not selected in a round computes nothing: the round aggregates its last
    accepted update in its place (CADA aggregates every worker's latest upload,
    fresh or stale). Its innovation is estimated from its last two accepted updates;
    a group with fewer than two is always selected. A last update stands in only while
    some worker that vouched for it (a supporter: its replica agreed with it) has not
    been flagged since: once all have, the group's updates are forgotten.

    Parameters
    ----------
    last, previous : list of Tensor or None
        Each group's latest and second latest accepted update.
    staleness : list of int
        Rounds since each group last uploaded.
    moves : list of float
        ``||theta_{t+1} - theta_t||^2`` of the last ``MOVES_WINDOW`` rounds.
    vouched : list of frozenset of int
        Each group's supporters of its last update not flagged since (empty: unknown).
    """

    last: list[Tensor | None]
    previous: list[Tensor | None]
    staleness: list[int]
    moves: list[float] = field(default_factory=list)
    vouched: list[frozenset[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.vouched:
            self.vouched = [frozenset()] * len(self.last)

    @classmethod
    def fresh(cls, num_groups: int) -> LazyGroups:
        """Return the memory of a run that has not begun."""
        return cls([None] * num_groups, [None] * num_groups, [1] * num_groups)

    def select(self, *, c: float, max_staleness: int) -> tuple[int, ...]:
        """Return the groups this round waits for, sorted (see :func:`lazy_groups`)."""
        known = [
            float(torch.sum((a - b) ** 2)) if a is not None and b is not None else 0.0
            for a, b in zip(self.last, self.previous, strict=True)
        ]
        unknown = {g for g, b in enumerate(self.previous) if b is None}
        chosen = lazy_groups(known, self.staleness, self.moves, c=c, max_staleness=max_staleness)
        return tuple(sorted(unknown.union(chosen)))

    def fill(self, accepted: Mapping[int, Tensor], selected: Iterable[int]) -> dict[int, Tensor]:
        """Return ``accepted`` with the last update of every group not selected this round."""
        waited = set(selected)
        stale = {
            g: update
            for g, update in enumerate(self.last)
            if g not in waited and update is not None and g not in accepted
        }
        return {**stale, **accepted}

    def learn(
        self,
        accepted: Mapping[int, Tensor],
        move: float | None,
        supporters: Mapping[int, Iterable[int]] | None = None,
    ) -> None:
        """Take in a round: the groups' accepted (fresh) updates and the model's squared move.

        ``supporters`` names, per accepted group, the workers whose replicas agreed
        with its update (:attr:`phalanx.detection.Verdict.supporters`).
        """
        vouching = supporters or {}
        for g, update in accepted.items():
            if 0 <= g < len(self.last):
                self.previous[g] = self.last[g]
                self.last[g] = update.detach().to(torch.float32).clone()
                self.vouched[g] = frozenset(vouching.get(g, ()))
        self.staleness = list(next_staleness(self.staleness, list(accepted)))
        if move is not None:
            self.moves = [*self.moves, move][-MOVES_WINDOW:]

    def forget(self, flagged: Iterable[int]) -> None:
        """Forget the updates of every group whose supporters are now all ``flagged``.

        A value is a lie only if all who agreed with it lie; once every one of them
        is flagged, it no longer stands in, and the group is waited for again.
        """
        caught = set(flagged)
        for g, vouching in enumerate(self.vouched):
            if not vouching:
                continue
            left = vouching - caught
            self.vouched[g] = left
            if not left:
                self.last[g] = self.previous[g] = None

    def state(self) -> dict[str, Any]:
        """Return the memory for a checkpoint: lists, and the updates as one stacked tensor."""
        rows = [u for pair in zip(self.last, self.previous, strict=True) for u in pair]
        present = [u is not None for u in rows]
        stacked = torch.stack([u for u in rows if u is not None]) if any(present) else None
        return {
            "staleness": list(self.staleness),
            "moves": list(self.moves),
            "present": present,
            "updates": stacked,
            "vouched": [sorted(v) for v in self.vouched],
        }

    @classmethod
    def restore(cls, state: Mapping[str, Any], num_groups: int, dim: int) -> LazyGroups:
        """Take up what :meth:`state` wrote, for ``num_groups`` groups of ``dim`` parameters.

        Raises
        ------
        ValueError
            When it does not fit the groups or the model, lists updates it does not
            hold, or holds a value that is not finite or a staleness below 1.
        """
        staleness = [int(s) for s in state["staleness"]]
        moves = [float(m) for m in state["moves"]]
        present = [bool(p) for p in state["present"]]
        if len(staleness) != num_groups or len(present) != 2 * num_groups:
            raise ValueError(
                f"the checkpoint's lazy groups are {len(staleness)}, the run has {num_groups}"
            )
        if any(s < 1 for s in staleness) or any(not math.isfinite(m) or m < 0 for m in moves):
            raise ValueError("the checkpoint's staleness or model moves are out of range")
        stacked = state["updates"]
        rows = [] if stacked is None else list(stacked.to(torch.float32))
        if len(rows) != sum(present) or any(r.shape != (dim,) for r in rows):
            raise ValueError(
                f"the checkpoint's group updates are not the {sum(present)} of {dim} "
                "parameters it lists"
            )
        if not all(bool(torch.isfinite(r).all()) for r in rows):
            raise ValueError("the checkpoint's group updates are not finite")
        found = iter(rows)
        updates = [next(found) if p else None for p in present]
        vouched = _vouched(state.get("vouched", [[]] * num_groups), num_groups)
        return cls(updates[0::2], updates[1::2], staleness, moves[-MOVES_WINDOW:], vouched)


def _vouched(saved: Any, num_groups: int) -> list[frozenset[int]]:
    """Read a checkpoint's supporters per group (none: a checkpoint from before them)."""
    if not isinstance(saved, list) or len(saved) != num_groups:
        raise ValueError(
            f"the checkpoint's lazy supporters are not one list per group of {num_groups}"
        )
    vouched = []
    for workers in saved:
        if not isinstance(workers, list) or any(
            isinstance(w, bool) or not isinstance(w, int) or w < 0 for w in workers
        ):
            raise ValueError("the checkpoint's lazy supporters are not lists of workers")
        vouched.append(frozenset(workers))
    return vouched
