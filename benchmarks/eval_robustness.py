"""Robustness of each defence under attack: accuracy, who is flagged, what gets through.

Fashion-MNIST, K = 15 workers, q in {0, 1, 3, 5} adversaries, the attacks ALIE,
IPM, reversed gradient and constant, each in a weak mode (random adversaries,
every adversary distorts every file) and a strong mode (omniscient adversaries
chosen to own the most file majorities, distorting with the strategy that gets
the most files through this defence). Defences: r = 1 with the coordinate
median and r = 1 with Multi-Krum (the plain rules, as in the literature), r = 1
with the median after Phalanx's outlier screening, ``groups`` (DETOX) and
``mols`` (ByzShield) with r = 3 and the coordinate median, and ``subsets``
(Aspis) with r = 3 and the coordinate trimmed mean.

Every run is a real federated run of Phalanx's coordinator and workers. The grid
runs on the in-process transport (``phalanx_clients.inprocess``, a test double of
Flower's runtime: the same coordinator, workers and training code in one
process); one case per defence also runs through Flower's simulation engine and
the two must agree bit for bit (same flagged workers every round, same final
model digest).

The distorted fraction of a round is the share of its files whose accepted value
is a distorted one. It is derived from the round report (flagged workers,
dropped files) and the attack's distortion plan: honest replicas of a file are
bit-identical and colluding adversaries send identical vectors, so a file keeps a
distorted value exactly when its unflagged replicas are all distorted (Phalanx's
default when largest agreeing groups tie, ``detection.on_tie = "drop_disputed"``,
drops a file whose unflagged replicas disagree; with a unique largest group the
unflagged replicas never disagree), checked against the report's dropped files.

The cells the strong-attack goal compares (``subsets`` and the plain r = 1
median, without attack and under the strong attack at the largest q) also run
for longer (``--long-rounds``, 80 by default): at 20 rounds every model is still
far from trained, and an attack that only slows training shows little there.
``--long-only`` runs just those and merges them into the existing results.

Writes ``benchmarks/results/robustness.json`` and ``robustness.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import math
import multiprocessing
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor

from phalanx.assignment import Assignment
from phalanx.attacks import ALittleIsEnough, Attack, AttackContext, distortion_plan
from phalanx.config import RunConfig, Scheme
from phalanx.data import ImageDataset, load_dataset
from phalanx.detection import Replica, detect
from phalanx.plan import adversaries, base_assignment, round_assignment
from phalanx.reports import RoundReport
from phalanx.roster import simulated_roster
from phalanx.runs import execute_run, summarize
from phalanx_clients.behaviour import RedTeam
from phalanx_clients.inprocess import InProcessTransport
from phalanx_clients.worker import Worker

if not __package__:  # run as `python benchmarks/NAME.py`: import `benchmarks` from this checkout
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.lib.inprocess_sharing import ReportSink, SharedUpdates, SharingWorker

RESULTS = Path(__file__).parent / "results"
K = 15
SEED = 2026
IN_PROCESS = "in-process (test double)"
FLOWER = "flower-simulation"
NO_ATTACK = "none"
Mode = Literal["weak", "strong", "none"]
Strategy = Literal["all", "only_majorities", "fixed_disagreement"]
STRONG_STRATEGIES: tuple[Strategy, ...] = ("only_majorities", "fixed_disagreement")


# --------------------------------------------------------------------------- the grid


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


# --------------------------------------------------------------------------- running a case


class PerRoundAttack:
    """ALIE computed once per round and sent by every colluder for every file.

    ALIE's vector is ``mean + z * std`` of ``ctx.honest_updates``, the reference
    stack that every adversary of a round holds identically; it reads neither the
    file nor the adversary's own update (beyond its shape). ``torch.std_mean``
    over that stack costs about 0.1 s on one core, and the weak attack on
    ``subsets`` calls it q x 91 times a round, so the test double computes it
    once. The Flower rows call it per adversary and file and must agree.
    """

    def __init__(self, inner: Attack) -> None:
        self.inner = inner
        self.name = inner.name
        self._round: int | None = None
        self._vector: Tensor | None = None

    def __call__(self, honest: Tensor, ctx: AttackContext) -> Tensor:
        """The round's ALIE vector."""
        if self._vector is None or ctx.round != self._round:
            self._round, self._vector = ctx.round, self.inner(honest, ctx)
        return self._vector


@functools.lru_cache(maxsize=1)
def _train_set(name: str) -> ImageDataset:
    return load_dataset(name, "train")


def in_process_transport(config: RunConfig, run_id: str) -> InProcessTransport:
    """The in-process test double, with the red team the config describes."""
    train = _train_set(config.data.dataset)
    team = RedTeam.from_config(config)
    if team is not None and isinstance(team.attack, ALittleIsEnough):
        team = dataclasses.replace(team, attack=PerRoundAttack(team.attack))
    shared = SharedUpdates()
    workers: dict[int, Worker] = {
        ident.worker: SharingWorker(
            config=config,
            train_set=train,
            client_id=ident.client_id,
            private_key=ident.private_key,
            behaviour=team.behaviour_of(ident.worker) if team else None,
            shared=shared,
        )
        for ident in simulated_roster(run_id, config.assignment.num_workers)
    }
    return InProcessTransport(workers)


def round_distortion(config: RunConfig, report: RoundReport) -> tuple[float, bool]:
    """Distorted fraction of one round, and whether the predicted drops match the report.

    Returns
    -------
    tuple of (float, bool)
        Files whose accepted value is distorted / files of the round; ``True``
        when the files this model of the verdict drops are the reported ones.
    """
    assignment = round_assignment(config, report.round)
    chosen = adversaries(config)
    plan = (
        distortion_plan(assignment, chosen, strategy=config.attack.strategy, seed=config.seed)
        if chosen
        else {}
    )
    excluded = set(report.flagged) | set(report.rejected)
    distorted, dropped = 0, []
    for f, workers in enumerate(assignment.files):
        voters = [w for w in workers if w not in excluded]
        bad = sum(f in plan.get(w, ()) for w in voters)
        if config.detection.on_tie == "majority":
            keeps_bad, drops = 2 * bad > len(voters), 2 * bad == len(voters)
        else:
            keeps_bad, drops = bool(voters) and bad == len(voters), 0 < bad < len(voters)
        if keeps_bad:
            distorted += 1
        elif drops or not voters:
            dropped.append(f)
    return distorted / assignment.num_files, tuple(dropped) == tuple(report.dropped_files)


@dataclass(frozen=True)
class Row:
    """One line of robustness.json (the first ten keys are the documented ones).

    A run that failed has ``None`` metrics and its error in ``error``.
    """

    scheme: str
    aggregator: str
    attack: str
    mode: str
    q: int
    final_accuracy: float | None
    precision: float | None
    recall: float | None
    distorted_fraction: float | None
    transport: str
    defence: str
    strategy: str
    f: int
    samples_per_file: int
    rounds: int
    adversaries: list[int]
    flagged: list[int]
    flagged_by_round: list[list[int]]
    drops_consistent: bool
    model_digest: str
    seconds: float
    error: str | None = None
    note: str | None = None
    seed: int = SEED


def run_case(case: Case, settings: Settings, transport: str) -> Row:
    """Run one case end to end on the named transport; a failure becomes a row too."""
    torch.set_num_threads(1)  # as the ClientApp does: one thread, so replicas agree bit for bit
    config = case.config(settings)
    sink = ReportSink()
    started = time.perf_counter()
    common: dict[str, Any] = {
        "scheme": case.defence.scheme,
        "aggregator": case.defence.rule,
        "attack": case.attack,
        "mode": case.mode,
        "q": case.q,
        "transport": transport,
        "defence": case.defence.name,
        "strategy": case.strategy if case.q else "-",
        "f": case.f,
        "samples_per_file": case.defence.samples_per_file,
        "adversaries": sorted(adversaries(config)),
        "seed": case.seed,
    }
    try:
        if transport == IN_PROCESS:
            local = in_process_transport(config, case.run_id)
            execute_run(config, run_id=case.run_id, sink=sink, transport=local)
        else:
            execute_run(config, run_id=case.run_id, sink=sink)
    except Exception as exc:  # the grid goes on; the row says what failed
        return Row(
            **common,
            final_accuracy=None,
            precision=None,
            recall=None,
            distorted_fraction=None,
            rounds=len(sink.reports),
            flagged=sorted({w for r in sink.reports for w in r.flagged}),
            flagged_by_round=[list(r.flagged) for r in sink.reports],
            drops_consistent=True,
            model_digest="",
            seconds=round(time.perf_counter() - started, 2),
            error=f"round {len(sink.reports) + 1}: {type(exc).__name__}: {exc}",
        )
    seconds = time.perf_counter() - started
    reports = sink.reports
    summary = summarize(config, case.run_id, reports)
    distortion = [round_distortion(config, r) for r in reports]
    return Row(
        **common,
        final_accuracy=summary.final_accuracy,
        precision=summary.precision,
        recall=summary.recall,
        distorted_fraction=sum(d for d, _ in distortion) / len(distortion),
        rounds=len(reports),
        flagged=sorted({w for r in reports for w in r.flagged}),
        flagged_by_round=[list(r.flagged) for r in reports],
        drops_consistent=all(ok for _, ok in distortion),
        model_digest=summary.model_digest,
        seconds=round(seconds, 2),
    )


def _run_in_process(job: tuple[Case, Settings]) -> Row:
    return run_case(job[0], job[1], IN_PROCESS)


def _cost(case: Case) -> int:
    """Rough work of a case: replicas per round (the subsets runs dominate), times rounds."""
    per_round = {"subsets": 1365, "mols": 75}.get(case.defence.scheme, 15)
    return per_round * (case.rounds or 20)


def run_grid(
    cases: Sequence[Case], settings: Settings, jobs: int, log: Callable[[Row], None]
) -> list[Row]:
    """Run every case on the in-process transport, ``jobs`` processes at a time."""
    if jobs <= 1:
        rows = []
        for case in cases:
            rows.append(_run_in_process((case, settings)))
            log(rows[-1])
        return rows
    done: dict[Case, Row] = {}
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {
            pool.submit(_run_in_process, (case, settings)): case
            for case in sorted(cases, key=_cost, reverse=True)
        }
        for future in as_completed(futures):
            done[futures[future]] = future.result()
            log(done[futures[future]])
    return [done[case] for case in cases]


# --------------------------------------------------------------------------- reporting


def _key(row: Row) -> tuple[str, str, str, int, int, int]:
    return (row.defence, row.attack, row.mode, row.q, row.seed, row.rounds)


def grid_rounds(rows: Sequence[Row]) -> int:
    """Rounds of the grid: the most common among the rows (the long runs are few)."""
    counts: dict[int, int] = {}
    for r in rows:
        counts[r.rounds] = counts.get(r.rounds, 0) + 1
    return max(counts, key=lambda n: (counts[n], -n))


def merge(old: Sequence[Row], new: Sequence[Row]) -> list[Row]:
    """``old`` with each row of the same case and transport as a new row replaced.

    New rows of cases ``old`` does not have are appended.
    """

    def case_of(r: Row) -> tuple[object, ...]:
        return (*_key(r), r.transport)

    fresh = {case_of(r): r for r in new}
    merged = [fresh.pop(case_of(r), r) for r in old]
    return [*merged, *fresh.values()]


@dataclass(frozen=True)
class Agreement:
    """An in-process row and its Flower twin."""

    inprocess: Row
    flower: Row

    @property
    def same_flagged(self) -> bool:
        """Same flagged workers in every round."""
        return self.inprocess.flagged_by_round == self.flower.flagged_by_round

    @property
    def same_digest(self) -> bool:
        """Same final model, bit for bit."""
        return bool(self.inprocess.model_digest) and (
            self.inprocess.model_digest == self.flower.model_digest
        )

    @property
    def accuracy_gap(self) -> float | None:
        """Absolute difference of the final accuracies."""
        a, b = self.inprocess.final_accuracy, self.flower.final_accuracy
        return None if a is None or b is None else abs(a - b)

    @property
    def agree(self) -> bool:
        """The two transports produced the same run."""
        gap = self.accuracy_gap
        return self.same_flagged and (self.same_digest or (gap is not None and gap <= 1e-6))


def agreements(rows: Sequence[Row]) -> list[Agreement]:
    """Pair every Flower row with the in-process row of the same case."""
    local = {_key(r): r for r in rows if r.transport == IN_PROCESS}
    return [
        Agreement(local[_key(r)], r) for r in rows if r.transport == FLOWER and _key(r) in local
    ]


@dataclass(frozen=True)
class Goal:
    """One goal of the issue, checked against the rows."""

    text: str
    met: bool
    detail: str


def _acc(row: Row | None) -> float:
    return math.nan if row is None or row.final_accuracy is None else row.final_accuracy


def _mean_accuracy(rows: Sequence[Row]) -> float:
    accs = [_acc(r) for r in rows]
    return sum(accs) / len(accs) if accs else math.nan


def _by_seed(rows: Sequence[Row]) -> str:
    return ", ".join(f"{_pct(r.final_accuracy)} (seed {r.seed})" for r in rows)


def paired(a: Sequence[Row], b: Sequence[Row]) -> tuple[list[Row], list[Row]]:
    """The rows of ``a`` and of ``b`` whose seeds both have, each sorted by seed."""
    seeds = {r.seed for r in a} & {r.seed for r in b}
    return sorted((r for r in a if r.seed in seeds), key=lambda r: r.seed), sorted(
        (r for r in b if r.seed in seeds), key=lambda r: r.seed
    )


def goals(rows: Sequence[Row]) -> list[Goal]:
    """The issue's goals for ``subsets`` under the weak and the strong attack.

    Accuracies are averaged over the seeds each cell ran with (`goal_replicas`), and
    a difference is taken between cells of the same seeds. The weak-attack goals
    read the grid's runs; the strong-attack goal is checked at every length the
    strong cells ran with (the grid's, and `long_runs`).
    """
    local = [r for r in rows if r.transport == IN_PROCESS]
    main = grid_rounds(local) if local else 0
    aspis = [r for r in local if r.scheme == "subsets" and r.rounds == main]
    cells: dict[tuple[str, str, str, int, int], list[Row]] = {}
    for r in local:
        cells.setdefault((r.defence, r.attack, r.mode, r.q, r.rounds), []).append(r)

    out = []
    weak = [r for r in aspis if r.mode == "weak"]
    if weak:
        caught = [r for r in weak if r.recall == 1.0 and r.precision == 1.0]
        out.append(
            Goal(
                "subsets, weak attack: every adversary flagged and no honest worker flagged",
                len(caught) == len(weak),
                f"{len(caught)} of {len(weak)} runs (every seed)",
            )
        )
    aspis_name = aspis[0].defence if aspis else ""
    clean = cells.get((aspis_name, NO_ATTACK, "none", 0, main), [])
    if weak and clean:
        details, met = [], True
        for key in sorted({(r.attack, r.q) for r in weak}, key=lambda k: (k[1], k[0])):
            attacked, base = paired(cells[(aspis_name, key[0], "weak", key[1], main)], clean)
            drop = _mean_accuracy(base) - _mean_accuracy(attacked)
            met = met and drop <= 0.01
            details.append(f"{key[0]} q = {key[1]}: {100 * drop:+.2f} ({len(attacked)} seeds)")
        same = [r for r in weak if any(r.model_digest == c.model_digest for c in clean)]
        out.append(
            Goal(
                f"subsets, weak attack: final accuracy within 1 point of q = 0 "
                f"(mean over seeds; q = 0: {_by_seed(clean)}); points lost",
                met,
                "; ".join(details) + f". {len(same)} of {len(weak)} weak runs end with their "
                "q = 0 model bit for bit",
            )
        )
    top = max((r.q for r in aspis), default=0)
    baseline = DEFENCES[0].name
    lengths = sorted({r.rounds for r in local if r.scheme == "subsets" and r.mode == "strong"})
    for rounds in lengths:
        strong = _strong_pairs(cells, aspis_name, baseline, top, rounds)
        if strong:
            clean = cells.get((aspis_name, NO_ATTACK, "none", 0, rounds), [])
            out.append(_strong_goal(strong, clean, baseline, top, rounds))
            out.append(_strongest_attack_goal(strong, baseline, top, rounds))
    return out


StrongPair = tuple[str, list[Row], list[Row]]


def _strong_pairs(
    cells: dict[tuple[str, str, str, int, int], list[Row]],
    aspis_name: str,
    baseline: str,
    top: int,
    rounds: int,
) -> list[StrongPair]:
    """(attack, subsets' rows, the baseline's rows) under the strong attack, same seeds."""
    out = []
    for attack in ATTACKS:
        mine = cells.get((aspis_name, attack, "strong", top, rounds), [])
        theirs = cells.get((baseline, attack, "strong", top, rounds), [])
        if mine and theirs:
            out.append((attack, *paired(mine, theirs)))
    return out


def _strong_goal(
    strong: Sequence[StrongPair], clean: Sequence[Row], baseline: str, top: int, rounds: int
) -> Goal:
    gaps = [(a, _mean_accuracy(m) - _mean_accuracy(t), m, t) for a, m, t in strong]
    # No defence beats its own unattacked accuracy (give or take noise), so an attack
    # that costs the baseline less than 10 points leaves no room for a 10-point gap.
    room = {}
    for attack, _, _, theirs in gaps:
        base, own = paired(theirs, clean)
        room[attack] = _mean_accuracy(own) - _mean_accuracy(base) if own else math.nan
    return Goal(
        f"subsets, strong attack, q = {top}, {rounds} rounds: at least 10 points "
        f"above {baseline} "
        "(mean over seeds; points: subsets minus r = 1 median; *room*: subsets' "
        "own q = 0 accuracy minus the r = 1 median under the attack, the largest "
        "gap a defence could show)",
        all(g >= 0.10 for _, g, _, _ in gaps),
        "; ".join(
            f"{a} {100 * g:+.2f}, room {100 * room[a]:+.2f} (subsets {_by_seed(m)}; "
            f"r = 1 median {_by_seed(t)})"
            for a, g, m, t in gaps
        ),
    )


def _strongest_attack_goal(
    strong: Sequence[StrongPair], baseline: str, top: int, rounds: int
) -> Goal:
    """The strong-attack goal read as ByzShield states its claim ("under the strongest attacks").

    Each defence is judged under the attack that costs it most (its lowest mean
    accuracy over the attacks both defences ran with the same seeds), not attack
    by attack.
    """

    def lowest(accuracy: float) -> float:  # a failed run is the worst outcome, never skipped
        return -math.inf if math.isnan(accuracy) else accuracy

    mine_attack, mine, _ = min(strong, key=lambda s: lowest(_mean_accuracy(s[1])))
    base_attack, _, theirs = min(strong, key=lambda s: lowest(_mean_accuracy(s[2])))
    gap = _mean_accuracy(mine) - _mean_accuracy(theirs)
    return Goal(
        f"subsets, strong attack, q = {top}, {rounds} rounds, each defence under the attack "
        "that costs it most (as ByzShield states its claim, 'under the strongest attacks'): "
        f"at least 10 points above {baseline} (mean over seeds)",
        gap >= 0.10,
        f"{100 * gap:+.2f}: subsets under {mine_attack} {_by_seed(mine)}; "
        f"r = 1 median under {base_attack} {_by_seed(theirs)}",
    )


def _pct(x: float | None) -> str:
    return "failed" if x is None else f"{100 * x:.2f}"


def _cell(row: Row | None) -> str:
    return "—" if row is None else _pct(row.final_accuracy)


def _num(x: float | None, digits: int) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def markdown(rows: Sequence[Row], notes: Sequence[str]) -> str:
    """robustness.md: settings, goals, transport agreement, a summary and every run."""
    lines = ["# Robustness under attack (Fashion-MNIST, K = 15)", "", *notes, "", "## Goals", ""]
    for g in goals(rows):
        lines.append(f"- **{'met' if g.met else 'NOT met'}**: {g.text}: {g.detail}.")
    lines += [
        "",
        "## In-process test double vs Flower's simulation engine",
        "",
        "The same case on both transports: flagged workers compared round by round, final "
        "model compared by its SHA-256 digest.",
        "",
        "| defence | attack | mode | q | accuracy, in-process | accuracy, Flower "
        "| same flagged every round | same final model | seconds, in-process | seconds, Flower |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in agreements(rows):
        a, b = p.inprocess, p.flower
        lines.append(
            f"| {a.defence} | {a.attack} | {a.mode} | {a.q} | {_pct(a.final_accuracy)} "
            f"| {_pct(b.final_accuracy)} | {'yes' if p.same_flagged else 'NO'} "
            f"| {'yes' if p.same_digest else 'NO'} | {a.seconds:.0f} | {b.seconds:.0f} |"
        )
    local = {_key(r): r for r in rows if r.transport == IN_PROCESS}
    q = max(r.q for r in rows)
    main = grid_rounds(rows)
    lines += [
        "",
        f"## Final accuracy (%) at q = {q}, and without attack",
        "",
        "| defence | q = 0 | " + " | ".join(f"{a}, {m}" for a in ATTACKS for m in MODES) + " |",
        "|---|---|" + "---|" * (len(ATTACKS) * len(MODES)),
    ]
    for d in DEFENCES:
        cells = [_cell(local.get((d.name, NO_ATTACK, "none", 0, SEED, main)))]
        cells += [_cell(local.get((d.name, a, m, q, SEED, main))) for a in ATTACKS for m in MODES]
        if any(r.defence == d.name for r in rows):
            lines.append(f"| {d.name} | " + " | ".join(cells) + " |")
    lines += _long_table(rows, main, q)
    lines += [
        "",
        "## Every run",
        "",
        "| defence | aggregator | attack | mode | strategy | q | seed | rounds "
        "| final accuracy (%) | precision | recall | distorted fraction | transport |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes_below = []
    for r in rows:
        mark = ""
        if r.note or r.error:
            notes_below.append(r.note or r.error or "")
            mark = f" [{len(notes_below)}]"
        lines.append(
            f"| {r.defence} | {r.aggregator} (f = {r.f}){mark} | {r.attack} | {r.mode} "
            f"| {r.strategy} | {r.q} | {r.seed} | {r.rounds} | {_pct(r.final_accuracy)} "
            f"| {_num(r.precision, 2)} "
            f"| {_num(r.recall, 2)} | {_num(r.distorted_fraction, 3)} | {r.transport} |"
        )
    if notes_below:
        lines += ["", *(f"[{i}] {text}" for i, text in enumerate(notes_below, 1))]
    return "\n".join(lines) + "\n"


def _long_table(rows: Sequence[Row], main: int, q: int) -> list[str]:
    """Mean final accuracy of the longer runs, per defence, without attack and strong at q."""
    long = [r for r in rows if r.transport == IN_PROCESS and r.rounds != main]
    lines = []
    for rounds in sorted({r.rounds for r in long}):
        at = [r for r in long if r.rounds == rounds]
        columns = [(NO_ATTACK, "none", 0), *((a, "strong", q) for a in ATTACKS)]
        lines += [
            "",
            f"## Longer training: {rounds} rounds (mean final accuracy % over seeds "
            f"{', '.join(str(s) for s in sorted({r.seed for r in at}))})",
            "",
            "| defence | q = 0 | " + " | ".join(f"{a}, strong, q = {q}" for a in ATTACKS) + " |",
            "|---|---|" + "---|" * len(ATTACKS),
        ]
        for d in DEFENCES:
            mine = [r for r in at if r.defence == d.name]
            if mine:
                cells = [
                    [r for r in mine if (r.attack, r.mode, r.q) == column] for column in columns
                ]
                text = [f"{100 * _mean_accuracy(c):.2f}" if c else "—" for c in cells]
                lines.append(f"| {d.name} | " + " | ".join(text) + " |")
    return lines


def describe(
    settings: Settings, rows: Sequence[Row], jobs: int, minutes: float, quick: bool
) -> list[str]:
    """The paragraphs above the tables: what ran, with which settings, and the definitions."""
    inproc = [r for r in rows if r.transport == IN_PROCESS]
    flower = [r for r in rows if r.transport == FLOWER]
    consistent = sum(r.drops_consistent for r in rows if r.error is None)
    finished = sum(r.error is None for r in rows)
    longer = [r for r in inproc if r.rounds != settings.rounds]
    lengths = " and ".join(str(n) for n in sorted({r.rounds for r in longer}))
    return [
        f"{'Quick grid (`--quick`): ' if quick else ''}{len(inproc) - len(longer)} runs on the "
        f"in-process transport (`phalanx_clients.inprocess`, a test double of Flower's "
        f"runtime) and {len(flower)} through Flower's simulation engine, {settings.rounds} "
        "rounds each"
        + (
            f", and {len(longer)} in-process runs of {lengths} rounds (the strong-attack "
            "goal's cells trained for longer)"
            if longer
            else ""
        )
        + "; "
        f"{minutes:.0f} min in all ({sum(r.seconds for r in inproc) / 60:.0f} min of "
        f"in-process runs on {jobs} process(es), {sum(r.seconds for r in flower) / 60:.0f} "
        f"min through Flower) on {os.cpu_count()} cores shared with other work; torch "
        f"{torch.__version__} on one thread per process, {platform.machine()}.",
        "",
        f"**Settings.** The `{settings.model}` of `phalanx.nets` (the CNN costs 3 to 6 times "
        "more per file update, too much for the 455-file Aspis runs of this grid on two "
        f"cores); workers send gradients (local_steps = 1); the server applies "
        f"{settings.optimizer} with lr {settings.server_lr}. "
        + (
            "Three rounds only check that every path runs. "
            if quick
            else f"{settings.rounds} rounds (not 30 or more: a 455-file Aspis round costs 3 s "
            "to 25 s here, depending on the other work on the machine, and the grid has 25 "
            "of those runs). "
        )
        + (
            f"At {settings.rounds} rounds every model is still far from trained, and an attack "
            "that slows training more than it derails it shows little, so the cells of the "
            f"strong-attack goal also ran for {lengths} rounds (`--long-rounds`), under every "
            "seed. "
            if longer
            else ""
        )
        + "Accuracy is measured on the first "
        f"{settings.eval_samples} test samples after every round and on all 10,000 after the "
        f"last round (*final accuracy*). Seed {settings.seed} everywhere: same initial model, "
        "same data, same weak adversaries.",
        "",
        "**Defences** (files per round x samples per file): `r=1 median` and `r=1 "
        "multi-krum` (scheme `none`, 15 x 32, f = q) are the plain rules of the literature, "
        "with Phalanx's r = 1 outlier screening off (`detection.outlier_threshold = null`); "
        "`r=1 median + screening` is the same median after that screening at robust z-score "
        "3.5 (Iglewicz and Hoaglin's cut-off; Phalanx's default is 8, which flags fewer "
        "honest workers and still every IPM, reversed-gradient and constant update); "
        "`groups` (DETOX, r = 3, 5 x 96) and `mols` (ByzShield, r = 3, "
        "25 x 20) aggregate the accepted files with the coordinate median (f = 0: detection "
        "runs first, and the median reads f only to check n > 2f); `subsets` (Aspis, r = 3, "
        "455 x 4: four samples per file so that each file's gradient means something; the "
        "others see about 480 distinct samples a round, Aspis 1,820) with the coordinate "
        "trimmed mean cutting 45 of the 455 files at each end of every coordinate, since the "
        "median of 455 four-sample gradients is a poor estimate of their mean. When flagged "
        "workers leave fewer inputs than f needs, the coordinator lowers f to the largest the "
        "rule accepts (reported per round as `f_used`). Largest agreeing groups that tie "
        'leave disputed files out (`detection.on_tie = "drop_disputed"`, the default).',
        "",
        "**Attacks.** *weak*: q random adversaries, each distorting every file it computes "
        "(strategy `all`), workers relabelled every round. *strong*: the q workers owning "
        "the most file majorities (`select_adversaries(mode='strong')`), no relabelling (so "
        "they keep them), distorting with the strategy (`only_majorities` or "
        "`fixed_disagreement`) that gets the most distorted files past this defence's "
        "detection in a synthetic round. With r = 1 every strategy distorts every file, so "
        "strong and weak differ only in which workers attack.",
        "",
        "**Columns.** *precision* and *recall*: of the set of workers flagged in any round, "
        "against the true adversaries (1.00 by convention for an empty set). *distorted "
        "fraction*: files whose accepted value came from a distorting adversary / files, "
        "averaged over rounds. The round report does not carry the verdict's "
        "`accepted_from`, so it is derived from each round's flagged workers and the "
        "distortion plan (see the module docstring); the files this derivation drops "
        f"matched the report's dropped files in {consistent} of {finished} finished runs.",
        "",
        "**In-process shortcuts** (checked by the Flower rows, which take neither): workers "
        "share the round's honest file updates (a pure function of model, round and file) "
        "instead of computing each replica, and ALIE's vector (a function of the round's "
        "shared reference updates only) is computed once per round.",
        "",
        "**Reading the table.** The plain r = 1 rules take every update; with screening, "
        "IPM, the reversed gradient and the constant attack are flagged and left out before "
        "the median sees them (honest workers are sometimes flagged too: precision below 1, "
        "also at q = 0), and only ALIE, built to stay inside the honest spread, gets "
        "through. With `groups`, workers of different groups share no file, so the honest "
        "workers are not the largest agreeing group whenever two adversaries sit in one "
        "group: the unique maximum clique then contains the adversaries and flags the "
        "honest third worker of that group (precision 0 under the strong attack). Under the "
        "strong attack on `subsets` and `mols`, q colluders who disagree only with q chosen "
        "honest workers are, in the agreement graph, indistinguishable from those honest "
        "workers: the largest groups tie, nobody can be flagged (recall 0), and the disputed "
        "files are dropped, so only files whose replicas are all adversarial keep a "
        "distorted value. A final accuracy is one evaluation of one run: runs whose models "
        "differ by a few files a round follow different trajectories and end a point or two "
        "apart in either direction, so the goals average the cells they compare over "
        f"{len({r.seed for r in rows})} seeds (`goal_replicas`); the tables below show seed "
        f"{SEED}.",
    ]


# --------------------------------------------------------------------------- main


def _log(row: Row) -> None:
    sys.stderr.write(
        f"{'flower' if row.transport == FLOWER else 'local':<6} {row.defence:<18} "
        f"{row.attack:<17} {row.mode:<6} q={row.q} acc={_pct(row.final_accuracy)} "
        f"P={_num(row.precision, 2)} R={_num(row.recall, 2)} "
        f"dist={_num(row.distorted_fraction, 3)} {row.seconds:.0f}s"
        f"{' ' + (row.note or row.error or '') if row.note or row.error else ''}\n"
    )


def flower_twins(cases: Sequence[Case], defences: Sequence[Defence]) -> list[Case]:
    """One case per defence for Flower: ALIE, strong, the largest q of the grid."""
    twins = []
    for d in defences:
        mine = [c for c in cases if c.defence == d and c.q > 0]
        pick = [c for c in mine if c.attack == "alie" and c.mode == "strong"] or mine
        if pick:
            twins.append(max(pick, key=lambda c: c.q))
    return twins


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="reduced grid, under five minutes")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per run")
    parser.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    parser.add_argument("--eval-samples", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=1, help="in-process runs at a time")
    parser.add_argument("--no-flower", action="store_true", help="skip the Flower rows")
    parser.add_argument("--schemes", default=None, help="only these schemes, e.g. none,subsets")
    parser.add_argument(
        "--extra-seeds",
        default=None,
        help="seeds the goal cells run again with (default 2027,2028; none with --quick)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--long-rounds",
        type=int,
        default=None,
        help="rounds of the strong-attack goal's longer runs (default 80; 0 or --quick: none)",
    )
    parser.add_argument(
        "--long-only",
        action="store_true",
        help="run only the longer runs and merge them into robustness.json",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite robustness.md from robustness.json"
    )
    args = parser.parse_args(argv)

    settings = Settings(
        rounds=args.rounds or (3 if args.quick else 20),
        model=args.model,
        eval_samples=args.eval_samples,
        optimizer="adam",
        server_lr=0.005,
    )
    wanted = None if args.schemes is None else set(args.schemes.split(","))
    defences = [d for d in DEFENCES if wanted is None or d.scheme in wanted]
    if args.quick:
        cases = grid(defences, ("alie",), (0, 3), MODES, settings.seed)
        twins = flower_twins(cases, defences[:1])
    else:
        cases = grid(defences, ATTACKS, QS, MODES, settings.seed)
        twins = flower_twins(cases, defences)
    extra = (
        args.extra_seeds if args.extra_seeds is not None else ("" if args.quick else "2027,2028")
    )
    seeds = [int(x) for x in extra.split(",") if x]
    long_rounds = args.long_rounds if args.long_rounds is not None else (0 if args.quick else 80)
    longer = long_runs(cases, [settings.seed, *seeds], long_rounds) if long_rounds else []
    cases += goal_replicas(cases, seeds)
    results = args.out / "robustness.json"
    if args.report_only or args.long_only:
        rows = [Row(**r) for r in json.loads(results.read_text(encoding="utf-8"))]
        if args.long_only:
            rows = merge(rows, run_grid(longer, settings, args.jobs, _log))
            results.write_text(
                json.dumps([asdict(r) for r in rows], indent=2) + "\n", encoding="utf-8"
            )
        # Wall time is not stored; the runs' own times give it back, give or take start-up.
        local_seconds = sum(r.seconds for r in rows if r.transport == IN_PROCESS)
        flower_seconds = sum(r.seconds for r in rows if r.transport == FLOWER)
        minutes = (local_seconds / args.jobs + flower_seconds) / 60
        settings = dataclasses.replace(settings, rounds=grid_rounds(rows))
    else:
        started = time.perf_counter()
        rows = run_grid([*cases, *longer], settings, args.jobs, _log)
        for case in [] if args.no_flower else twins:
            rows.append(run_case(case, settings, FLOWER))
            _log(rows[-1])
        minutes = (time.perf_counter() - started) / 60
        args.out.mkdir(parents=True, exist_ok=True)
        results.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n", encoding="utf-8")
    table = markdown(rows, describe(settings, rows, args.jobs, minutes, args.quick))
    (args.out / "robustness.md").write_text(table, encoding="utf-8")
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
