"""Adaptive k-sync: wait for the fastest ``k`` workers, and raise ``k`` once progress stalls.

The rule is that of Hanna, Bitar, Parag, Dasari and El Rouayheb ("Adaptive
distributed stochastic gradient descent for minimizing delay in the presence of
stragglers", ICASSP 2020; extended as "Adaptive stochastic gradient descent for
fast and communication-efficient distributed learning", 2022): start at
``k0``; fastest-k SGD first descends fast and then hovers at an error floor
that shrinks as ``k`` grows, so once the floor is reached ``k`` goes up by a
step, up to every worker. The floor is detected, as they do, by a Pflug-type
stationarity test (Pflug 1990; in the form of Chee and Toulis, "Convergence
diagnostics for stochastic gradient descent with constant learning rate",
AISTATS 2018): after a burn-in of ``burn_in`` rounds since ``k`` last grew, sum
the inner products of successive global updates ``<u_t, u_{t-1}>``; while the
iterates still travel, successive updates point the same way and the sum grows,
and at the floor they oscillate and the sum turns negative. ``k`` grows when
it does, and the test starts afresh.

The caller feeds each round's inner product (:func:`advance_k`), or its own
plateau verdict, e.g. from the validation loss (:func:`grow_k`). The state is
three numbers, for checkpoints (:meth:`AdaptiveK.state`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class AdaptiveK:
    """State of adaptive k-sync.

    Parameters
    ----------
    k : int
        Workers the current round waits for.
    pflug_sum : float
        Sum of ``<u_t, u_{t-1}>`` over the rounds after the burn-in since ``k`` last grew.
    rounds : int
        Rounds observed since ``k`` last grew.
    """

    k: int
    pflug_sum: float = 0.0
    rounds: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"k must be an int >= 1, got {self.k!r}")
        if not math.isfinite(self.pflug_sum):
            raise ValueError(f"pflug_sum must be finite, got {self.pflug_sum!r}")
        if isinstance(self.rounds, bool) or not isinstance(self.rounds, int) or self.rounds < 0:
            raise ValueError(f"rounds must be an int >= 0, got {self.rounds!r}")

    def state(self) -> dict[str, float]:
        """Return the state as plain numbers, for a checkpoint."""
        return {"k": self.k, "pflug_sum": self.pflug_sum, "rounds": self.rounds}

    @classmethod
    def restore(cls, state: Mapping[str, float]) -> AdaptiveK:
        """Rebuild from :meth:`state`'s output."""
        k, rounds = state["k"], state["rounds"]
        if float(k) != int(k) or float(rounds) != int(rounds):
            raise ValueError(f"k and rounds must be whole numbers, got {k!r} and {rounds!r}")
        return cls(int(k), float(state["pflug_sum"]), int(rounds))


def grow_k(state: AdaptiveK, *, k_max: int, step: int = 1) -> AdaptiveK:
    """Raise ``k`` by ``step`` (at most to ``k_max``) and restart the stationarity test.

    Parameters
    ----------
    state : AdaptiveK
        The current state.
    k_max : int
        The most workers a round can wait for (the workers given work).
    step : int
        How much ``k`` grows, ``>= 1``.
    """
    if step < 1 or k_max < 1:
        raise ValueError(f"step and k_max must be >= 1, got step={step}, k_max={k_max}")
    return AdaptiveK(max(state.k, min(state.k + step, k_max)))


def advance_k(
    state: AdaptiveK,
    inner_product: float,
    *,
    k_max: int,
    step: int = 1,
    burn_in: int = 10,
) -> AdaptiveK:
    """Add one round's ``<u_t, u_{t-1}>`` to the test; grow ``k`` if it says stationary.

    Parameters
    ----------
    state : AdaptiveK
        The current state.
    inner_product : float
        Inner product of this round's global update with the previous round's.
    k_max : int
        The most workers a round can wait for.
    step : int
        How much ``k`` grows at the floor.
    burn_in : int
        Rounds after each growth before the sum starts (the transient phase,
        where successive updates agree, would otherwise only delay the test).

    Returns
    -------
    AdaptiveK
        The next state: ``k`` grown and the test restarted when the sum after
        the burn-in is negative, else the sum carried on.
    """
    if not math.isfinite(inner_product):
        raise ValueError(f"inner_product must be finite, got {inner_product!r}")
    if burn_in < 0:
        raise ValueError(f"burn_in must be >= 0, got {burn_in}")
    rounds = state.rounds + 1
    if rounds <= burn_in:
        return replace(state, rounds=rounds)
    total = state.pflug_sum + inner_product
    if total < 0:
        return grow_k(state, k_max=k_max, step=step)
    return AdaptiveK(state.k, total, rounds)
