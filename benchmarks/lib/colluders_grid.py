"""The colluders' rows of ``eval_robustness.py``: colluding strategies under relabelling.

q colluders, chosen to own the most file majorities of the base assignment
(``attack.selection = "strong"``), lie with ``only_majorities`` or
``fixed_disagreement`` while the workers are relabelled every round
(``assignment.relabel``, the default), so every round hands them new files and
new honest partners. Each cell runs at the default bound of the proof across
rounds (``detection.max_adversaries`` unset: ``(K - 1) // 2 = 7``) and at the
bound an operator who defends against ``Q_MAX`` colluders would state
(``max_adversaries = Q_MAX``): the tighter the bound, the sooner a colluder's
disputes prove it lies.

Which update attack the colluders send changes nothing that detection sees (any
value other than the honest one, identical among the colluders of a file, as
all the built-in update attacks are), only how far a distorted file that gets
through moves the model. So each strategy gets one attack (`STRATEGY_ATTACK`):

- ``only_majorities`` with ``reversed_gradient`` (``-100 x`` the honest
  update): the combination of issue 17's report, which took a digits model from
  96.7 % to 88.0 % with a handful of files per round getting through;
- ``fixed_disagreement`` with ``constant`` (``-100`` in every coordinate): the
  attack that cost ``subsets`` most under this strategy in the committed strong
  rows (``robustness.md``: 74.76 % against 77.25 % without attack at q = 5).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.lib.robustness_grid import (
    DEFENCES,
    NO_ATTACK,
    SEED,
    Defence,
    K,
    Settings,
    Strategy,
)
from phalanx.config import RunConfig

COLLUDERS = "colluders"
"""The ``table`` of a colluders' row in ``robustness.json`` (grid rows have none)."""

STRATEGY_ATTACK: dict[Strategy, str] = {
    "only_majorities": "reversed_gradient",
    "fixed_disagreement": "constant",
}
"""The update attack each colluding strategy sends (see the module docstring)."""

STRATEGIES: tuple[Strategy, ...] = ("only_majorities", "fixed_disagreement")
QS = (1, 2, 3, 4, 5)
Q_MAX = 5
"""The most colluders the grid defends against: the bound an operator would state."""
DEFAULT_BOUND = (K - 1) // 2
"""``detection.max_adversaries`` when unset: fewer than half the workers."""
DEADLINE = 10
"""Rounds within which every colluder should be flagged; distortion is counted after it."""
QUICK_QS = (2, 3)
QUICK_ROUNDS = 8
QUICK_DEADLINE = 4

COLLUDER_DEFENCES = (
    next(d for d in DEFENCES if d.scheme == "mols"),
    next(d for d in DEFENCES if d.scheme == "subsets"),
    # STS(15): 35 files; 14 samples each keeps about 480 distinct samples a round,
    # as the other r = 3 schemes (and eval_compression.py's bibd rows) do.
    Defence("bibd (STS(15))", "bibd", 3, "median", 14),
)
"""The r = 3 schemes of the colluders' rows, with the rules and file sizes of the grid."""


@dataclass(frozen=True)
class ColluderCase:
    """One run of the colluders' rows.

    ``strategy`` and ``attack`` are ``"-"`` and ``"none"`` without adversaries
    (``q = 0``); ``max_adversaries`` is ``None`` for the default bound.
    """

    defence: Defence
    strategy: str
    attack: str
    q: int
    max_adversaries: int | None
    seed: int
    rounds: int

    @property
    def bound(self) -> int:
        """The bound the proof across rounds assumes (``detection.max_adversaries``)."""
        return DEFAULT_BOUND if self.max_adversaries is None else self.max_adversaries

    @property
    def run_id(self) -> str:
        """Run id (it also derives the simulated workers' keys)."""
        name = f"{self.defence.scheme}-{self.strategy}-{self.attack}".replace("_", "")
        return f"colluders-{name}-q{self.q}-b{self.bound}-s{self.seed}-{self.rounds}r"

    def config(self, settings: Settings) -> RunConfig:
        """The run configuration: the grid's defence and training, relabelling on."""
        d = self.defence
        return RunConfig.model_validate(
            {
                "name": self.run_id,
                "seed": self.seed,
                "rounds": self.rounds,
                "data": {
                    "dataset": "fashion-mnist",
                    "model": settings.model,
                    "samples_per_file": d.samples_per_file,
                    "eval_samples": settings.eval_samples,
                },
                "assignment": {"scheme": d.scheme, "num_workers": K, "r": d.r, "relabel": True},
                "detection": {"mode": "auto", "max_adversaries": self.max_adversaries},
                "aggregation": {"rule": d.rule, "f": d.f(self.q)},
                "attack": {
                    "name": None if self.q == 0 else self.attack,
                    "q": self.q,
                    "selection": "strong",
                    "strategy": "all" if self.q == 0 else self.strategy,
                },
                "training": {"optimizer": settings.optimizer, "server_lr": settings.server_lr},
            }
        )


def colluder_grid(
    defences: Sequence[Defence],
    qs: Sequence[int],
    seeds: Sequence[int],
    rounds: int,
    bounds: Sequence[int | None] = (None, Q_MAX),
) -> list[ColluderCase]:
    """Every run: per defence and seed, one without attack, then strategy x q x bound.

    The run without attack is the same at every bound (honest replicas agree, so
    there is no dispute to count), so it runs once, at the default bound.
    """
    cases = []
    for d in defences:
        for seed in seeds:
            cases.append(ColluderCase(d, "-", NO_ATTACK, 0, None, seed, rounds))
            cases.extend(
                ColluderCase(d, s, STRATEGY_ATTACK[s], q, b, seed, rounds)
                for s in STRATEGIES
                for q in qs
                for b in bounds
            )
    return cases


def quick_grid(seed: int = SEED, rounds: int = QUICK_ROUNDS) -> list[ColluderCase]:
    """``--quick``: ``bibd`` only, q in `QUICK_QS`, one seed, `QUICK_ROUNDS` rounds."""
    bibd = [d for d in COLLUDER_DEFENCES if d.scheme == "bibd"]
    return colluder_grid(bibd, QUICK_QS, (seed,), rounds)
