"""Which ``k`` workers get work: a combinatorial UCB bandit that learns response times.

Each worker is an arm whose cost is its response time. Every round the ``k``
arms with the lowest optimistic cost are played (CUCB: Chen, Wang and Yuan,
"Combinatorial multi-armed bandit: general framework and applications", ICML
2013; applied to client scheduling in federated learning by Xia, Simeone et
al., "Multi-armed bandit-based client scheduling for federated learning", IEEE
TWC 2020). A worker's optimistic cost is its mean response time, scaled by the
largest time seen so far into ``[0, 1]``, minus ``sqrt(exploration * ln t /
n_i)`` (``t`` rounds observed, ``n_i`` replies of worker ``i``); a worker
never observed comes first. Ties go to the lower worker id; nothing is drawn
at random, so the choice is the same on every replay of a run.

A selected worker that never replied is observed at the time the round closed
(a lower bound on its true time), so a vanished worker soon stops being chosen.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BanditState:
    """What the bandit has learned: per worker, replies seen and mean response time.

    Parameters
    ----------
    counts : tuple of int
        Response times observed per worker.
    means : tuple of float
        Mean response time per worker, in seconds (0.0 while unobserved).
    rounds : int
        Rounds observed.
    scale : float
        The largest response time observed, in seconds (0.0 before any).
    """

    counts: tuple[int, ...]
    means: tuple[float, ...]
    rounds: int = 0
    scale: float = 0.0

    def __post_init__(self) -> None:
        if len(self.counts) != len(self.means):
            raise ValueError(f"{len(self.counts)} counts for {len(self.means)} means")
        if any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in self.counts):
            raise ValueError("counts must be ints >= 0")
        if any(not math.isfinite(x) or x < 0 for x in (*self.means, self.scale)):
            raise ValueError("means and scale must be finite and >= 0")
        if isinstance(self.rounds, bool) or not isinstance(self.rounds, int) or self.rounds < 0:
            raise ValueError(f"rounds must be an int >= 0, got {self.rounds!r}")

    @classmethod
    def fresh(cls, num_workers: int) -> BanditState:
        """Return a bandit that has seen nothing yet."""
        return cls((0,) * num_workers, (0.0,) * num_workers)

    def state(self) -> dict[str, Any]:
        """Plain lists and numbers, for a checkpoint (JSON-safe)."""
        return {
            "counts": list(self.counts),
            "means": list(self.means),
            "rounds": self.rounds,
            "scale": self.scale,
        }

    @classmethod
    def restore(cls, state: Mapping[str, Any]) -> BanditState:
        """Rebuild from :meth:`state`'s output."""
        return cls(
            tuple(state["counts"]),
            tuple(float(x) for x in state["means"]),
            state["rounds"],
            float(state["scale"]),
        )


def optimistic_cost(state: BanditState, worker: int, *, exploration: float) -> float:
    """Scaled mean response time minus the exploration bonus (``-inf`` if unobserved)."""
    n = state.counts[worker]
    if n == 0:
        return -math.inf
    mean = state.means[worker] / state.scale if state.scale > 0 else 0.0
    return mean - math.sqrt(exploration * math.log(max(state.rounds, 1)) / n)


def select_workers(
    state: BanditState,
    k: int,
    *,
    exploration: float = 1.5,
    available: Iterable[int] | None = None,
) -> tuple[int, ...]:
    """Return the ``k`` available workers with the lowest optimistic cost, sorted.

    Parameters
    ----------
    state : BanditState
        What the bandit has learned.
    k : int
        Workers to choose, ``>= 1``; all available ones if fewer.
    exploration : float
        Weight of the bonus, ``>= 0`` (1.5 is CUCB's ``3/2``); 0 is greedy.
    available : iterable of int, optional
        Workers that may be chosen (e.g. not benched); ``None``: all.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    if not math.isfinite(exploration) or exploration < 0:
        raise ValueError(f"exploration must be finite and >= 0, got {exploration!r}")
    pool = range(len(state.counts)) if available is None else sorted(set(available))
    ranked = sorted(pool, key=lambda w: (optimistic_cost(state, w, exploration=exploration), w))
    return tuple(sorted(ranked[:k]))


def observe_times(state: BanditState, times: Mapping[int, float]) -> BanditState:
    """Return the state after one round's response times (one per worker chosen).

    Parameters
    ----------
    state : BanditState
        What the bandit had learned.
    times : mapping of int to float
        Response time of each chosen worker, in seconds; for one that never
        replied, the time the round closed.
    """
    counts, means = list(state.counts), list(state.means)
    for worker, seconds in times.items():
        if not 0 <= worker < len(counts):
            raise ValueError(f"worker {worker} is outside 0..{len(counts) - 1}")
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"worker {worker}'s response time must be finite and >= 0")
        counts[worker] += 1
        means[worker] += (seconds - means[worker]) / counts[worker]
    scale = max([state.scale, *times.values()])
    return BanditState(tuple(counts), tuple(means), state.rounds + 1, scale)


@dataclass
class ResponseTimeBandit:
    """Settings and the learned state; each round ``select`` then ``observe``.

    Parameters
    ----------
    learned : BanditState
        What it has learned (:meth:`BanditState.fresh` at the start of a run).
    k : int
        Workers given work each round.
    exploration : float
        Weight of the exploration bonus.
    """

    learned: BanditState
    k: int
    exploration: float = 1.5

    def select(self, available: Iterable[int] | None = None) -> tuple[int, ...]:
        """Return the workers to give work to this round."""
        return select_workers(
            self.learned, self.k, exploration=self.exploration, available=available
        )

    def observe(self, times: Mapping[int, float]) -> None:
        """Learn this round's response times."""
        self.learned = observe_times(self.learned, times)

    def state(self) -> dict[str, Any]:
        """Return the learned state as plain lists and numbers (settings: the config's)."""
        return self.learned.state()

    def restore(self, state: Mapping[str, Any]) -> None:
        """Take up the learned state of a checkpoint."""
        self.learned = BanditState.restore(state)
