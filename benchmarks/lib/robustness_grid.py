"""The grid of ``eval_robustness.py``: defences, attacks, settings, and one run config per case.

A :class:`Defence` is an assignment scheme with the robust rule that aggregates
its accepted files; a :class:`Case` is one cell of the grid (a defence under an
attack, a mode, ``q`` adversaries and a seed) and gives the run config it runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from phalanx.assignment import Assignment
from phalanx.attacks import distortion_plan
from phalanx.config import RunConfig, Scheme
from phalanx.detection import Replica, detect
from phalanx.plan import adversaries, base_assignment

K = 15
SEED = 2026
IN_PROCESS = "in-process (test double)"
FLOWER = "flower-simulation"
NO_ATTACK = "none"
Mode = Literal["weak", "strong", "none"]
Strategy = Literal["all", "only_majorities", "fixed_disagreement"]
STRONG_STRATEGIES: tuple[Strategy, ...] = ("only_majorities", "fixed_disagreement")


@dataclass(frozen=True)
class Defence:
    """An assignment scheme with the robust rule that aggregates its accepted files."""

    name: str
    scheme: Scheme
    r: int
    rule: str
    samples_per_file: int
    screening: bool = False
    trim: int = 0

    def f(self, q: int) -> int:
        """Byzantine inputs the rule is told to tolerate.

        With r = 1 every adversary sends one input: ``f = q``. With r = 3,
        detection runs first; the coordinate median never reads ``f`` except to
        check ``n > 2f``, so it keeps ``f = 0``, and the trimmed mean cuts ``trim``
        files at each end of every coordinate whatever q is.
        """
        return q if self.r == 1 else self.trim

    @property
    def label(self) -> str:
        """Short name used in run ids."""
        return f"{self.scheme}-{self.rule}{'-screened' if self.screening else ''}"


DEFENCES = (
    # The distinct samples per round stay comparable: 15 x 32 = 480, 5 x 96 = 480,
    # 25 x 20 = 500; Aspis's 455 files get 4 samples each (1,820 per round), since
    # the median of single-sample gradients would be a weak estimate of the mean.
    Defence("r=1 median", "none", 1, "median", 32),
    Defence("r=1 multi-krum", "none", 1, "multi_krum", 32),
    Defence("r=1 median + screening", "none", 1, "median", 32, screening=True),
    Defence("groups (DETOX)", "groups", 3, "median", 96),
    Defence("mols (ByzShield)", "mols", 3, "median", 20),
    # The median of 455 four-sample gradients is a poor estimate of their mean (20
    # rounds without attack: 71.0 % against the trimmed mean's 77.3 %); cutting 45
    # files (10 %) at each end of every coordinate still outvotes the few files whose
    # replicas are all adversarial.
    Defence("subsets (Aspis)", "subsets", 3, "trimmed_mean", 4, trim=45),
)
ATTACKS = ("alie", "ipm", "reversed_gradient", "constant")
QS = (0, 1, 3, 5)
MODES: tuple[Mode, ...] = ("weak", "strong")


@dataclass(frozen=True)
class Settings:
    """What every run of one invocation shares."""

    rounds: int
    model: Literal["cnn", "mlp"]
    eval_samples: int
    optimizer: Literal["sgd", "adam", "amsgrad"]
    server_lr: float
    seed: int = SEED


@dataclass(frozen=True)
class Case:
    """One cell of the grid."""

    defence: Defence
    attack: str
    mode: Mode
    q: int
    strategy: Strategy
    f: int
    seed: int = SEED
    rounds: int | None = None
    """Rounds of this case; ``None``: the grid's."""

    @property
    def run_id(self) -> str:
        """Run id (it also derives the simulated workers' keys)."""
        d = self.defence
        tail = "" if self.seed == SEED else f"-s{self.seed}"
        if self.rounds is not None:
            tail += f"-{self.rounds}r"
        return f"robustness-{d.label}-{self.attack}-{self.mode}-q{self.q}{tail}"

    def config(self, settings: Settings) -> RunConfig:
        """The run configuration of this case."""
        d = self.defence
        return RunConfig.model_validate(
            {
                "name": self.run_id,
                "seed": self.seed,
                "rounds": self.rounds or settings.rounds,
                "data": {
                    "dataset": "fashion-mnist",
                    "model": settings.model,
                    "samples_per_file": d.samples_per_file,
                    "eval_samples": settings.eval_samples,
                },
                # Strong adversaries were chosen against the assignment; relabelling
                # workers every round would hand them random files again.
                "assignment": {
                    "scheme": d.scheme,
                    "num_workers": K,
                    "r": d.r,
                    "relabel": self.mode != "strong",
                },
                # r = 1 without screening is the plain rule of the literature; the
                # screened row keeps the textbook cut-off its results were produced with.
                "detection": {
                    "mode": "auto",
                    "outlier_threshold": 3.5 if d.screening else None,
                },
                "aggregation": {"rule": d.rule, "f": self.f},
                "attack": {
                    "name": None if self.q == 0 else self.attack,
                    "q": self.q,
                    "selection": "strong" if self.mode == "strong" else "weak",
                    "strategy": self.strategy,
                },
                "training": {"optimizer": settings.optimizer, "server_lr": settings.server_lr},
            }
        )


def strongest_strategy(defence: Defence, q: int, seed: int) -> Strategy:
    """The strategy that gets the most distorted files past this defence's detection.

    Decided on one synthetic round of the assignment (random honest vectors,
    distorted ones reversed and scaled by -100), as ``eval_distortion.py`` does;
    a tie goes to the strategy that exposes fewer adversaries.
    """
    config = RunConfig.model_validate(
        {
            "seed": seed,
            "assignment": {"scheme": defence.scheme, "num_workers": K, "r": defence.r},
            "attack": {"name": "reversed_gradient", "q": q, "selection": "strong"},
        }
    )
    assignment, chosen = base_assignment(config), adversaries(config)

    def outcome(strategy: Strategy) -> tuple[int, int]:
        plan = distortion_plan(assignment, chosen, strategy=strategy, seed=seed)
        verdict = detect(assignment, _synthetic_replicas(assignment, plan, seed), f=defence.f(q))
        distorted = sum(f in plan.get(w, ()) for f, w in verdict.accepted_from.items())
        return distorted, -len(verdict.flagged & chosen)

    return max(STRONG_STRATEGIES, key=outcome)


def _synthetic_replicas(
    assignment: Assignment, plan: dict[int, frozenset[int]], seed: int
) -> list[Replica]:
    honest = torch.randn(assignment.num_files, 64, generator=torch.Generator().manual_seed(seed))
    replicas = []
    for f, workers in enumerate(assignment.files):
        for w in workers:
            value = -100.0 * honest[f] if f in plan.get(w, ()) else honest[f]
            digest = hashlib.sha256(value.numpy().tobytes()).hexdigest()
            replicas.append(Replica(worker=w, file=f, value=value, digest=digest))
    return replicas


def grid(
    defences: Sequence[Defence],
    attacks: Sequence[str],
    qs: Sequence[int],
    modes: Sequence[Mode],
    seed: int,
) -> list[Case]:
    """Every case: one unattacked run per defence, then attack x mode x q."""
    cases = []
    for d in defences:
        if 0 in qs:
            cases.append(Case(d, NO_ATTACK, "none", 0, "all", d.f(0), seed))
        for q in (q for q in qs if q > 0):
            for mode in modes:
                strategy = "all" if mode == "weak" else strongest_strategy(d, q, seed)
                cases.extend(Case(d, a, mode, q, strategy, d.f(q), seed) for a in attacks)
    return cases


def goal_replicas(cases: Sequence[Case], seeds: Sequence[int]) -> list[Case]:
    """The cases the goals compare, again under each of ``seeds``.

    One seed's final accuracy moves by a point or two with the training trajectory,
    the size of the effects the goals measure, so the goals average over seeds:
    ``subsets`` without attack, under the weak attack with q >= 3 (ALIE only: with
    every adversary flagged, the weak runs drop the same files whatever the attack,
    which the first seed shows attack by attack; with q < 3 no file has only
    adversarial replicas and the weak runs are the q = 0 run bit for bit) and under the
    strong attack at the largest q; the plain r = 1 median without attack and under
    the strong attack at that q.
    """
    top = max((c.q for c in cases), default=0)
    baseline = DEFENCES[0]

    def wanted(c: Case) -> bool:
        if c.defence.scheme == "subsets":
            weak = c.mode == "weak" and c.attack == "alie" and c.q >= 3
            return c.q == 0 or weak or (c.mode == "strong" and c.q == top)
        return c.defence == baseline and (c.q == 0 or (c.mode == "strong" and c.q == top))

    return [dataclasses.replace(c, seed=s) for s in seeds for c in cases if wanted(c)]


def long_runs(cases: Sequence[Case], seeds: Sequence[int], rounds: int) -> list[Case]:
    """The strong-attack goal's cells again with ``rounds`` rounds, under every seed.

    ``subsets`` and the plain r = 1 median, without attack and under the strong
    attack at the largest q of ``cases``.
    """
    top = max((c.q for c in cases), default=0)
    baseline = DEFENCES[0]

    def wanted(c: Case) -> bool:
        goal_cell = c.q == 0 or (c.mode == "strong" and c.q == top)
        return (c.defence.scheme == "subsets" or c.defence == baseline) and goal_cell

    return [
        dataclasses.replace(c, seed=s, rounds=rounds) for s in seeds for c in cases if wanted(c)
    ]


def flower_twins(cases: Sequence[Case], defences: Sequence[Defence]) -> list[Case]:
    """One case per defence for Flower: ALIE, strong, the largest q of the grid."""
    twins = []
    for d in defences:
        mine = [c for c in cases if c.defence == d and c.q > 0]
        pick = [c for c in mine if c.attack == "alie" and c.mode == "strong"] or mine
        if pick:
            twins.append(max(pick, key=lambda c: c.q))
    return twins
