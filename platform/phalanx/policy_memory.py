"""What a collection policy carries from one round to the next.

Three policies learn as a run goes on. ``adaptive_k`` waits for ``k`` workers and
raises ``k`` when the global updates stop travelling (:mod:`~phalanx.collect.adaptive`):
it needs this round's update beside the previous one. ``bandit`` gives work only
to the ``k`` workers it expects to be fastest and learns their response times
(:mod:`~phalanx.collect.bandit`). ``group_fastest`` with ``group_selection =
"lazy"`` (G-CADA) gives work only to the groups CADA's rule selects and aggregates
the others' last accepted updates in their place (:mod:`~phalanx.group_memory`).
DropCompute's automatic compute budget is
chosen from the compute times of the first rounds
(:mod:`~phalanx.collect.dropcompute`). Every other policy decides each round from
that round's arrivals alone.

:class:`PolicyMemory` holds that state, says who gets work and with which options
the round closes, learns from the round, and writes and restores itself for a
checkpoint, so a resumed run decides exactly as the run it continues would have.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from phalanx.assignment import Assignment
from phalanx.collect.adaptive import AdaptiveK, advance_k
from phalanx.collect.bandit import BanditState, observe_times, select_workers
from phalanx.collect.config import CollectConfig
from phalanx.collect.dropcompute import best_threshold, completion_median
from phalanx.collect.pieces import Collection
from phalanx.faults import describe
from phalanx.finite import all_finite
from phalanx.group_memory import LazyGroups


def response_times(collection: Collection, dispatched: Set[int]) -> dict[int, float]:
    """Return each dispatched worker's response time as a bandit observes it.

    A worker's time is its last piece's arrival, kept or late; a worker that sent
    nothing is observed at the round's close, a lower bound on its true time.
    """
    times = {w: collection.closed_at for w in dispatched}
    arrived: dict[int, float] = {}
    for piece in (*collection.kept, *collection.late):
        if piece.worker in times:
            arrived[piece.worker] = max(arrived.get(piece.worker, 0.0), piece.time)
    return {**times, **arrived}


@dataclass
class PolicyMemory:
    """A run's collection policy with its state across rounds.

    Parameters
    ----------
    config : CollectConfig
        The policy and its parameters.
    num_workers : int
        Workers of the run.
    adaptive : AdaptiveK, optional
        adaptive_k's state (``None`` for other policies).
    bandit : BanditState, optional
        The bandit's learned response times (``None`` for other policies).
    last_update : Tensor, optional
        adaptive_k: the last global update applied, for the next round's inner product.
    budget_s : float, optional
        DropCompute's compute budget, once set or chosen.
    measured : list
        DropCompute's warm-up: per round measured, each worker's cumulative compute
        times of its files, and the round's mean seconds outside compute.
    lazy : LazyGroups, optional
        G-CADA's memory of the groups (``None`` unless lazy ``group_fastest``).
    dim : int
        Parameters of the model (lazy groups' updates have as many).
    selected : tuple of int, optional
        The groups this round waits for (lazy ``group_fastest``), once dispatched.
    claimed : bool
        Whether DropCompute's compute times are the workers' own claims (a deployment):
        the budget is then chosen no lower than the time by which half of the measured
        workers finished every file (:func:`~phalanx.collect.dropcompute.completion_median`).
    """

    config: CollectConfig
    num_workers: int
    adaptive: AdaptiveK | None = None
    bandit: BanditState | None = None
    last_update: Tensor | None = None
    budget_s: float | None = None
    measured: list[tuple[list[list[float]], float]] = field(default_factory=list)
    lazy: LazyGroups | None = None
    dim: int = 0
    selected: tuple[int, ...] | None = None
    claimed: bool = False

    @classmethod
    def start(
        cls,
        config: CollectConfig,
        num_workers: int,
        *,
        num_groups: int = 0,
        dim: int = 0,
        claimed: bool = False,
    ) -> PolicyMemory:
        """Return the memory of a run that has not begun (``num_groups``: its files)."""
        chosen = config.parameters()
        adaptive = AdaptiveK(int(chosen["k"])) if config.policy == "adaptive_k" else None
        bandit = BanditState.fresh(num_workers) if config.policy == "bandit" else None
        lazy = LazyGroups.fresh(num_groups) if chosen.get("group_selection") == "lazy" else None
        return cls(
            config,
            num_workers,
            adaptive,
            bandit,
            budget_s=config.compute_budget_s,
            lazy=lazy,
            dim=dim,
            claimed=claimed,
        )

    @property
    def follows_updates(self) -> bool:
        """Whether :meth:`observe` wants the round's global update (adaptive_k, lazy groups)."""
        return self.adaptive is not None or self.lazy is not None

    def dispatch(
        self, candidates: Iterable[int], assignment: Assignment | None = None
    ) -> frozenset[int]:
        """Return the workers given work this round, among ``candidates``.

        Lazy groups need the round's ``assignment``: the workers of each selected file.
        """
        pool = frozenset(candidates)
        if self.lazy is not None:
            if assignment is None:
                raise ValueError("lazy group selection needs the round's assignment")
            chosen = self.config.parameters()
            self.selected = self.lazy.select(
                c=float(chosen["lazy_c"]), max_staleness=int(chosen["max_staleness"])
            )
            waited = {w for g in self.selected for w in assignment.workers_of(g)}
            return pool & waited
        if self.bandit is None or not pool:
            return pool
        chosen = self.config.parameters()
        return frozenset(
            select_workers(
                self.bandit,
                int(chosen["k"]),
                exploration=float(chosen["exploration"]),
                available=pool,
            )
        )

    def round_options(self) -> dict[str, Any]:
        """Return the options this round's close rule takes from the state.

        adaptive_k's ``k``; lazy groups' ``groups`` (after :meth:`dispatch`).
        """
        if self.lazy is not None and self.selected is not None:
            return {"groups": self.selected}
        return {} if self.adaptive is None else {"k": self.adaptive.k}

    def fill(self, accepted: Mapping[int, Tensor]) -> dict[int, Tensor]:
        """Return the updates the round aggregates: ``accepted``, and lazy groups' stale ones.

        A group lazy ``group_fastest`` did not select computed nothing this round; its
        last accepted update stands in for it, as CADA aggregates every latest upload.
        """
        if self.lazy is None or self.selected is None:
            return dict(accepted)
        return self.lazy.fill(accepted, self.selected)

    def forget(self, flagged: Iterable[int]) -> None:
        """Stop standing in with lazy groups' updates that only ``flagged`` workers vouched for."""
        if self.lazy is not None:
            self.lazy.forget(flagged)

    def metrics(self) -> dict[str, float]:
        """Return what the state decided this round, for the round's report.

        ``compute_budget_s`` is -1 while DropCompute still measures its warm-up rounds.
        """
        decided: dict[str, float] = {}
        if self.adaptive is not None:
            decided["collect_k"] = float(self.adaptive.k)
        if self.config.drop_compute:
            decided["compute_budget_s"] = -1.0 if self.budget_s is None else self.budget_s
        if self.lazy is not None and self.selected is not None:
            decided["lazy_groups_selected"] = float(len(self.selected))
        return decided

    def measure(self, compute_s: Sequence[Sequence[float]], overhead_s: float) -> None:
        """Take in one round's compute times for DropCompute's automatic budget.

        Parameters
        ----------
        compute_s : sequence of sequence of float
            Per worker that replied, the compute time at which each of its files was
            finished (as it measures them).
        overhead_s : float
            The round's mean seconds outside compute.
        """
        if not self.config.drop_compute or self.budget_s is not None:
            return
        self.measured.append(([list(w) for w in compute_s if w], overhead_s))
        if len(self.measured) >= self.config.warmup:
            rounds = [r for r, _ in self.measured]
            overhead = sum(o for _, o in self.measured) / len(self.measured)
            if any(rounds):
                floor = completion_median(rounds) if self.claimed else 0.0
                budget = best_threshold(rounds, overhead, at_least=floor)
                # Every measured file done at 0 s (deployed: claims of no compute, the
                # only ones heard) is no budget to send: a task cannot carry 0 s, so
                # the warm-up goes on rather than the run failing.
                self.budget_s = budget if budget > 0 else None
            self.measured = []

    def observe(
        self,
        collection: Collection,
        dispatched: Set[int],
        update: Tensor | None,
        accepted: Mapping[int, Tensor] | None = None,
        supporters: Mapping[int, Iterable[int]] | None = None,
    ) -> None:
        """Learn from a closed round.

        Parameters
        ----------
        collection : Collection
            How the round closed.
        dispatched : set of int
            Workers given work.
        update : Tensor, optional
            The global update the round applied; ``None`` when it applied none
            (adaptive_k then waits for a round that moves the model).
        accepted : mapping of int to Tensor, optional
            The files (groups) accepted this round, fresh, for lazy groups.
        supporters : mapping of int to iterable of int, optional
            Per accepted file, the workers whose replicas agreed with it (lazy groups
            forget it once they are all flagged, :meth:`forget`).
        """
        if self.bandit is not None and dispatched:
            self.bandit = observe_times(self.bandit, response_times(collection, dispatched))
        if self.lazy is not None:
            move = 0.0 if update is None else float(torch.sum(update.to(torch.float64) ** 2))
            self.lazy.learn(accepted or {}, move, supporters)
        if self.adaptive is None or update is None:
            return
        flat = update.detach().reshape(-1).to(torch.float64)
        if self.last_update is not None:
            chosen = self.config.parameters()
            inner = float(torch.dot(flat, self.last_update))
            self.adaptive = advance_k(
                self.adaptive,
                inner,
                k_max=self.num_workers,
                step=int(chosen["k_step"]),
                burn_in=int(chosen["burn_in"]),
            )
        self.last_update = flat.clone()

    def state(self) -> dict[str, Any]:
        """Return the state for a checkpoint: numbers, lists and tensors."""
        state: dict[str, Any] = {}
        if self.lazy is not None:
            state["lazy"] = self.lazy.state()
        if self.adaptive is not None:
            state["adaptive"] = self.adaptive.state()
            if self.last_update is not None:
                state["last_update"] = self.last_update
        if self.bandit is not None:
            state["bandit"] = self.bandit.state()
        if self.config.drop_compute:
            state["drop_compute"] = {
                "budget_s": self.budget_s,
                "measured": [[r, o] for r, o in self.measured],
            }
        return state

    def restore(self, state: Mapping[str, Any]) -> None:
        """Take up a checkpoint's state (what :meth:`state` wrote; empty: as at the start).

        Raises
        ------
        ValueError
            When the checkpoint's state does not fit this policy or this run's workers,
            or is not what :meth:`state` writes: a field missing or of another type, an
            update, a time or a budget that is not finite (or a budget not above 0).
        """
        try:
            self._restore(state)
        except (KeyError, TypeError, AttributeError, OverflowError, ValueError) as exc:
            raise ValueError(
                f"the checkpoint's collect state cannot be restored: {describe(exc)}"
            ) from exc

    def _restore(self, state: Mapping[str, Any]) -> None:
        """Take up ``state``; what a malformed one raises, :meth:`restore` words."""
        if self.lazy is not None and "lazy" in state:
            self.lazy = LazyGroups.restore(state["lazy"], len(self.lazy.last), self.dim)
        if self.adaptive is not None and "adaptive" in state:
            self.adaptive = AdaptiveK.restore(state["adaptive"])
            last = state.get("last_update")
            self.last_update = None if last is None else last.to(torch.float64)
            if self.last_update is not None and not all_finite(self.last_update):
                raise ValueError("the checkpoint's last global update is not finite")
        if self.bandit is not None and "bandit" in state:
            learned = BanditState.restore(state["bandit"])
            if len(learned.counts) != self.num_workers:
                raise ValueError(
                    f"the checkpoint's bandit knows {len(learned.counts)} workers, "
                    f"the run has {self.num_workers}"
                )
            self.bandit = learned
        if self.config.drop_compute and "drop_compute" in state:
            saved = state["drop_compute"]
            budget = saved["budget_s"]
            self.budget_s = None if budget is None else float(budget)
            self.measured = [
                ([[float(t) for t in w] for w in r], float(o)) for r, o in saved["measured"]
            ]
            if self.budget_s is not None and not (
                math.isfinite(self.budget_s) and self.budget_s > 0
            ):
                raise ValueError(f"the checkpoint's compute budget is {self.budget_s!r}")
            times = [t for r, o in self.measured for w in r for t in (*w, o)]
            if any(not math.isfinite(t) or t < 0 for t in times):
                raise ValueError("the checkpoint's measured times are not all finite and >= 0")
