"""Running the colluders' rows, and what each run's round reports say about the colluders.

Every run is a real federated run on the in-process transport, as the grid's
(:func:`benchmarks.lib.robustness_runs.in_process_transport`). Its
:class:`ColluderRow` carries the final accuracy, precision and recall of the
flagged set, the first round by which every adversary has been flagged (by any
flag kind), and the distorted fraction, overall and after round ``after``.

How the distorted fraction is derived, with relabelling on
----------------------------------------------------------
A round report does not say which replica supplied each accepted file, so the
fraction is derived from the report and the ground truth of the simulation:

1. **Which replicas are distorted.** Round t's assignment is
   ``round_assignment(config, t)``, the relabelled assignment the coordinator
   used and every worker derives, and its distortion plan is
   ``distortion_plan(assignment, adversaries, strategy=..., seed=config.seed)``,
   exactly what ``phalanx_clients.behaviour.Behaviour.updates`` computes in each
   adversarial worker that round. Replica (w, f) is distorted when f is in the
   plan of w. Honest replicas of a file are bit-identical, and the colluders on a
   file send one and the same distorted value.
2. **Which replicas may supply a value.** A file's holders that replied
   (``agreement.replied``), less the workers the round's verdict flagged
   (``agreement.flagged``) and the workers proven liars by then, the round's own
   disputes included (the coordinator adds them to the record before it decides),
   whose replicas never supply a value again. The proven set is not in the reports
   as such (a liar proven earlier that disputes again is flagged by the round's
   verdict), so it is replayed: :class:`LiarsAcrossRounds` at the run's bound, fed
   with each round's conflict edges (``agreement.conflicts``, every one of them
   when the record is ``complete``), is the coordinator's own rule on its own
   record. Every ``disputes_across_rounds`` event of a round must be among the
   replay's new proofs of that round.
3. **Which files are distorted.** A file outside the round's dropped files
   (``dropped_files``; ``agreement.dropped`` gives their reasons) kept the value
   of one of its suppliers, and those all agree: with a unique largest group they
   are all inside it, and when groups tie (``on_tie = "drop_disputed"``, the
   default these runs use) a file keeps a value only when they are unanimous. So
   the file is distorted exactly when its suppliers are.
4. **Check.** The same model predicts the dropped files: no supplier, suppliers
   that disagree, or suppliers that are all suspects
   (``agreement.suspects``). A row is ``consistent`` when, in every round, the
   prediction is the reported set and the replayed proofs match the events.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from benchmarks.lib.case_pool import run_cases
from benchmarks.lib.colluders_grid import COLLUDERS, ColluderCase
from benchmarks.lib.inprocess_sharing import ReportSink
from benchmarks.lib.robustness_grid import Settings
from benchmarks.lib.robustness_runs import Row, in_process_transport
from phalanx.attacks import distortion_plan
from phalanx.config import RunConfig
from phalanx.detection.disputes import LiarsAcrossRounds
from phalanx.event_kinds import EventKind
from phalanx.plan import adversaries, round_assignment
from phalanx.reports import RoundReport
from phalanx.runs import execute_run, summarize


def rounds_until_flagged(
    adversaries: Iterable[int], flagged_by_round: Sequence[Iterable[int]]
) -> int | None:
    """First round by which every adversary has been flagged at least once.

    Rounds count from 1; ``None`` when some adversary is never flagged, or there
    is none to flag.
    """
    missing = set(adversaries)
    if not missing:
        return None
    for t, flagged in enumerate(flagged_by_round, 1):
        missing -= set(flagged)
        if not missing:
            return t
    return None


def distorted_after(distorted_by_round: Sequence[int], files: int, after: int) -> float | None:
    """Files whose accepted value is distorted / files, over the rounds after ``after``.

    ``None`` when the run has no round after ``after``.
    """
    later = distorted_by_round[after:]
    return sum(later) / (files * len(later)) if later and files else None


def first_rounds(by_round: Sequence[Iterable[int]]) -> dict[int, int]:
    """Each worker named in ``by_round``, and the first round (from 1) that names it."""
    first: dict[int, int] = {}
    for t, workers in enumerate(by_round, 1):
        for w in workers:
            first.setdefault(w, t)
    return first


def replay_proofs(
    conflicts_by_round: Sequence[Iterable[tuple[int, int]]], bound: int
) -> list[list[int]]:
    """Workers each round newly proves liars, replaying the coordinator's rule on its record."""
    liars = LiarsAcrossRounds(bound)
    return [sorted(liars.observe(t, pairs)) for t, pairs in enumerate(conflicts_by_round, 1)]


@dataclass(frozen=True)
class RoundDistortion:
    """What one round's accepted files were, as derived (see the module docstring)."""

    distorted: int
    """Files that kept a distorted value."""
    predicted_drops: tuple[int, ...]
    """Files that kept no value, as the derivation predicts it."""


def round_distortion(
    files: Sequence[Sequence[int]],
    plan: Mapping[int, Iterable[int]],
    *,
    replied: Iterable[int],
    excluded: Iterable[int],
    suspects: Iterable[int],
    dropped: Iterable[int],
) -> RoundDistortion:
    """Count the round's accepted files whose value is distorted.

    Parameters
    ----------
    files : sequence of sequence of int
        The round's assignment: the holders of each file.
    plan : mapping of int to iterable of int
        Each adversary's distorted files this round.
    replied : iterable of int
        Workers whose replies reached detection.
    excluded : iterable of int
        Workers whose replicas supply no value this round: flagged by the round's
        verdict, or proven liars by then (the round's own disputes included).
    suspects : iterable of int
        The round's suspects: outside a largest agreeing group, not proven.
    dropped : iterable of int
        The files the round reports as dropped.
    """
    lies = {(w, f) for w, fs in plan.items() for f in fs}
    answered, out, suspect = set(replied), set(excluded), set(suspects)
    lost = set(dropped)
    distorted, predicted = 0, []
    for f, holders in enumerate(files):
        suppliers = [w for w in holders if w in answered and w not in out]
        values = {(w, f) in lies for w in suppliers}
        if not suppliers or len(values) > 1 or (suspect and set(suppliers) <= suspect):
            predicted.append(f)
        if f not in lost and values == {True}:
            distorted += 1
    return RoundDistortion(distorted, tuple(predicted))


@dataclass(frozen=True)
class Derivation:
    """The per-round facts of a run that its round reports and ground truth give."""

    distorted_by_round: list[int]
    dropped_by_round: list[int]
    lying_by_round: list[list[int]]
    proven_by_round: list[list[int]]
    consistent: bool


def derive(config: RunConfig, reports: Sequence[RoundReport]) -> Derivation:
    """Derive each round's distorted files, liars and proofs (see the module docstring).

    Raises
    ------
    ValueError
        When the run resolves ties by majority, which this derivation does not model.
    """
    if config.detection.on_tie != "drop_disputed":
        raise ValueError("the derivation models detection.on_tie = 'drop_disputed' only")
    chosen = adversaries(config)
    bound = config.detection.max_adversaries
    records = [r.agreement for r in reports]
    complete = all(a is not None and a.complete for a in records)
    if config.detection.across_rounds:
        proven = replay_proofs(
            [[(e.a, e.b) for e in a.conflicts] if a else [] for a in records],
            (config.assignment.num_workers - 1) // 2 if bound is None else bound,
        )
    else:
        proven = [[] for _ in reports]
    consistent = complete
    distorted, dropped, lying, earlier = [], [], [], set[int]()
    for report, record, new in zip(reports, records, proven, strict=True):
        assignment = round_assignment(config, report.round)
        plan = (
            distortion_plan(
                assignment,
                chosen,
                strategy=config.attack.strategy,
                seed=config.seed,
            )
            if chosen
            else {}
        )
        events = {e.worker for e in report.events if e.kind == EventKind.DISPUTES_ACROSS_ROUNDS}
        outcome = round_distortion(
            assignment.files,
            plan,
            replied=record.replied if record else (),
            excluded={*(record.flagged if record else ()), *earlier, *new},
            suspects=record.suspects if record else (),
            dropped=report.dropped_files,
        )
        consistent = (
            consistent
            and outcome.predicted_drops == tuple(sorted(report.dropped_files))
            and events <= set(new) <= set(report.flagged)
        )
        distorted.append(outcome.distorted)
        dropped.append(len(report.dropped_files))
        lying.append(sorted(w for w, fs in plan.items() if fs))
        earlier |= set(new)
    return Derivation(distorted, dropped, lying, proven, consistent)


@dataclass(frozen=True)
class ColluderRow:
    """One colluders' line of robustness.json (``table = "colluders"``).

    A run that failed has ``None`` metrics and its error in ``error``.
    """

    scheme: str
    defence: str
    aggregator: str
    strategy: str
    attack: str
    q: int
    bound: int
    bound_stated: bool
    """``detection.max_adversaries`` set (to the grid's q_max), not the default."""
    seed: int
    rounds: int
    after: int
    """The round after which distortion is counted, and within which flags are due."""
    final_accuracy: float | None
    precision: float | None
    recall: float | None
    rounds_to_flag_all: int | None
    distorted_after: float | None
    distorted_fraction: float | None
    files: int
    samples_per_file: int
    adversaries: list[int]
    flagged: list[int]
    flagged_by_round: list[list[int]]
    proven_by_round: list[list[int]]
    lying_by_round: list[list[int]]
    distorted_by_round: list[int]
    dropped_by_round: list[int]
    consistent: bool
    model_digest: str
    seconds: float
    error: str | None = None
    table: str = COLLUDERS

    @property
    def silent(self) -> list[int]:
        """Adversaries that sent no distorted value in rounds 1 to ``after``."""
        lied = first_rounds(self.lying_by_round[: self.after])
        return [a for a in self.adversaries if a not in lied]


def run_colluder_case(case: ColluderCase, settings: Settings, after: int) -> ColluderRow:
    """Run one case end to end on the in-process transport; a failure becomes a row too."""
    torch.set_num_threads(1)  # as the ClientApp does: one thread, so replicas agree bit for bit
    config = case.config(settings)
    sink = ReportSink()
    started = time.perf_counter()
    error = None
    try:
        local = in_process_transport(config, case.run_id)
        execute_run(config, run_id=case.run_id, sink=sink, transport=local)
    except Exception as exc:  # the grid goes on; the row says what failed
        error = f"round {len(sink.reports) + 1}: {type(exc).__name__}: {exc}"
    seconds = round(time.perf_counter() - started, 2)
    reports = sink.reports
    derived = derive(config, reports)
    chosen = sorted(adversaries(config))
    flagged_by_round = [list(r.flagged) for r in reports]
    summary = summarize(config, case.run_id, reports)
    files = round_assignment(config, 1).num_files
    ok = error is None
    return ColluderRow(
        scheme=case.defence.scheme,
        defence=case.defence.name,
        aggregator=case.defence.rule,
        strategy=case.strategy,
        attack=case.attack,
        q=case.q,
        bound=case.bound,
        bound_stated=case.max_adversaries is not None,
        seed=case.seed,
        rounds=case.rounds,
        after=after,
        final_accuracy=summary.final_accuracy if ok else None,
        precision=summary.precision if ok else None,
        recall=summary.recall if ok else None,
        rounds_to_flag_all=rounds_until_flagged(chosen, flagged_by_round),
        distorted_after=distorted_after(derived.distorted_by_round, files, after) if ok else None,
        distorted_fraction=distorted_after(derived.distorted_by_round, files, 0) if ok else None,
        files=files,
        samples_per_file=case.defence.samples_per_file,
        adversaries=chosen,
        flagged=sorted({w for r in reports for w in r.flagged}),
        flagged_by_round=flagged_by_round,
        proven_by_round=derived.proven_by_round,
        lying_by_round=derived.lying_by_round,
        distorted_by_round=derived.distorted_by_round,
        dropped_by_round=derived.dropped_by_round,
        consistent=derived.consistent,
        model_digest=summary.model_digest,
        seconds=seconds,
        error=error,
    )


def _cost(case: ColluderCase) -> int:
    """Rough work of a case: replicas per round (the subsets runs dominate), times rounds."""
    return {"subsets": 1365, "mols": 75, "bibd": 105}.get(case.defence.scheme, 15) * case.rounds


def run_colluders(
    cases: Sequence[ColluderCase],
    settings: Settings,
    after: int,
    jobs: int,
    log: Callable[[ColluderRow], None],
) -> list[ColluderRow]:
    """Run every case, ``jobs`` processes at a time; rows in the order of ``cases``."""
    run = functools.partial(run_colluder_case, settings=settings, after=after)
    return run_cases(cases, run, jobs=jobs, cost=_cost, log=log)


def colluder_key(row: ColluderRow) -> tuple[str, str, int, int, int, int]:
    """What identifies a colluders' run: defence, strategy, q, bound, seed, rounds."""
    return (row.defence, row.strategy, row.q, row.bound, row.seed, row.rounds)


def case_key(case: ColluderCase) -> tuple[str, str, int, int, int, int]:
    """The :func:`colluder_key` of the row ``case`` gives."""
    return (case.defence.name, case.strategy, case.q, case.bound, case.seed, case.rounds)


def merge_colluders(old: Sequence[ColluderRow], new: Sequence[ColluderRow]) -> list[ColluderRow]:
    """``old`` with each row of the same run as a new row replaced; the other new rows after."""
    fresh = {colluder_key(r): r for r in new}
    merged = [fresh.pop(colluder_key(r), r) for r in old]
    return [*merged, *fresh.values()]


def split_rows(document: Iterable[Mapping[str, Any]]) -> tuple[list[Row], list[ColluderRow]]:
    """The grid's rows and the colluders' rows of a robustness.json document."""
    grid, colluders = [], []
    for item in document:
        if item.get("table") == COLLUDERS:
            colluders.append(ColluderRow(**item))
        else:
            grid.append(Row(**item))
    return grid, colluders


def join_rows(grid: Sequence[Row], colluders: Sequence[ColluderRow]) -> list[dict[str, Any]]:
    """robustness.json: the grid's rows, then the colluders' rows."""
    return [*(asdict(r) for r in grid), *(asdict(r) for r in colluders)]
