"""Judging the rows of ``eval_stragglers.py``: time to a target accuracy, the issue's goals.

The *target* of a cell (one workload, layout, profile and attack, on one
transport) is the accuracy ``all`` reaches at 80 % of its rounds: its accuracy
after round ``floor(0.8 R)`` (24 of 30). A run's *time to target* is the
simulated time (``simulated_total_s``) after the first round whose accuracy is
at least the target; ``None`` when no round's is. Every accuracy before the
last round is read on the evaluation subset, the last on the whole test set.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from benchmarks.lib.robustness_goals import Goal
from benchmarks.lib.robustness_grid import FLOWER, IN_PROCESS
from benchmarks.lib.stragglers_grid import ALL, ATTACK, PROFILES
from benchmarks.lib.stragglers_runs import REFUSED, Row, case_key

TIME_GOALS = {"persistent_stragglers": 0.5, "shifted_exponential": 0.7}
"""The most a policy's time to target may be, as a share of ``all``'s, per profile."""
ACCURACY_POINTS = 1.0
"""How many points of final accuracy a policy may lose against ``all`` at equal rounds."""
CLOCK_TOLERANCE = 1e-3
"""Relative difference of the two transports' simulated clocks still taken as agreement."""


def target_round(rounds: int) -> int:
    """The round whose accuracy of ``all`` is the target: ``floor(0.8 R)``, at least 1."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    return max(1, 4 * rounds // 5)


def target_accuracy(reference: Row) -> float | None:
    """The accuracy ``all`` reached at 80 % of its rounds; ``None`` if it failed before them."""
    at = target_round(reference.rounds)
    if reference.policy != ALL.label or len(reference.accuracy_by_round) < at:
        return None
    return reference.accuracy_by_round[at - 1]


def time_to_target(
    accuracies: Sequence[float], clock: Sequence[float], target: float | None
) -> float | None:
    """Simulated seconds until the first round whose accuracy reaches ``target``, or ``None``.

    Parameters
    ----------
    accuracies : sequence of float
        Accuracy after each round.
    clock : sequence of float
        Simulated seconds since the run started, after each round.
    target : float or None
        The accuracy to reach; ``None``: there is none (the reference failed).
    """
    if len(accuracies) != len(clock):
        raise ValueError(f"{len(accuracies)} accuracies but {len(clock)} clock readings")
    if target is None:
        return None
    return next((t for a, t in zip(accuracies, clock, strict=True) if a >= target), None)


def grid_rows(rows: Sequence[Row]) -> list[Row]:
    """The in-process rows of the grid: those of each workload's most common length.

    The in-process twins of the Flower runs, shorter, are left to the transports'
    comparison (:func:`agreements`).
    """
    local = [r for r in rows if r.transport == IN_PROCESS]
    counts = Counter((r.workload, r.rounds) for r in local)
    # Sorted by runs, then rounds: each workload's most runs (the longest on a tie) come last.
    ordered = sorted(counts, key=lambda key: (counts[key], key[1]))
    main = {workload: rounds for workload, rounds in ordered}
    return [r for r in local if r.rounds == main[r.workload]]


def cell_key(row: Row) -> tuple[object, ...]:
    """The run's cell: its key but for the policy."""
    key = case_key(row)
    return key[:4] + key[5:]


def reference_of(rows: Sequence[Row], row: Row) -> Row | None:
    """The run of ``all`` in ``row``'s cell (its own row when it is that run), if there is one."""
    cell = cell_key(row)
    return next((r for r in rows if r.policy == ALL.label and cell_key(r) == cell), None)


def with_targets(rows: Sequence[Row]) -> list[Row]:
    """Fill every row's ``target_accuracy`` and ``time_to_target_s`` from its cell's ``all``."""
    out = []
    for row in rows:
        ref = reference_of(rows, row)
        target = target_accuracy(ref) if ref is not None and ref.error is None else None
        reached = (
            time_to_target(row.accuracy_by_round, row.clock_by_round, target)
            if row.error is None
            else None
        )
        out.append(replace(row, target_accuracy=target, time_to_target_s=reached))
    return out


@dataclass(frozen=True)
class Comparison:
    """A policy's run against the run of ``all`` in the same cell."""

    row: Row
    reference: Row

    @property
    def time_ratio(self) -> float | None:
        """Time to target as a share of ``all``'s; ``None`` if either never reached it."""
        mine, theirs = self.row.time_to_target_s, self.reference.time_to_target_s
        if mine is None or theirs is None or theirs <= 0:
            return None
        return mine / theirs

    @property
    def time_goal(self) -> float | None:
        """The most ``time_ratio`` may be under this profile; ``None``: the issue sets none."""
        return TIME_GOALS.get(self.row.profile)

    @property
    def time_met(self) -> bool | None:
        """Whether the time goal holds (``None`` where there is none)."""
        if self.time_goal is None:
            return None
        return self.time_ratio is not None and self.time_ratio <= self.time_goal

    @property
    def accuracy_points(self) -> float | None:
        """Final accuracy minus ``all``'s, in points; ``None`` if either run failed."""
        mine, theirs = self.row.final_accuracy, self.reference.final_accuracy
        return None if mine is None or theirs is None else 100 * (mine - theirs)

    @property
    def accuracy_met(self) -> bool:
        """At most one point below ``all`` (more above is no failure)."""
        points = self.accuracy_points
        return points is not None and points >= -ACCURACY_POINTS - 1e-9

    @property
    def met(self) -> bool | None:
        """Both goals; ``None`` under a profile without a time goal."""
        return None if self.time_met is None else self.time_met and self.accuracy_met


def comparisons(rows: Sequence[Row]) -> list[Comparison]:
    """Every finished run of the grid of a policy other than ``all``, against its cell's ``all``."""
    out = []
    for row in grid_rows(rows):
        if row.policy == ALL.label or row.error is not None:
            continue
        ref = reference_of(rows, row)
        if ref is not None and ref.error is None:
            out.append(Comparison(row, ref))
    return out


def ratio_text(ratio: float | None) -> str:
    """A time ratio as ``0.42x``, or ``never`` for a run that did not reach the target."""
    return "never" if ratio is None else f"{ratio:.2f}x"


def points_text(points: float | None) -> str:
    """Points of accuracy with their sign, or ``failed``."""
    return "failed" if points is None else f"{points:+.2f}"


def _profile_label(key: str) -> str:
    return next((p.label for p in PROFILES if p.key == key), key)


def time_goals(rows: Sequence[Row]) -> list[Goal]:
    """Per profile with a time goal and per workload and attack: which policies meet both goals.

    A goal line is met when at least one policy meets both the time goal and
    the accuracy goal in that workload and attack; the detail names every
    policy's figures, so how many do is read there.
    """
    out = []
    for profile, most in TIME_GOALS.items():
        mine = [c for c in comparisons(rows) if c.row.profile == profile]
        for workload, attack in dict.fromkeys((c.row.workload, c.row.attack) for c in mine):
            cell = [c for c in mine if (c.row.workload, c.row.attack) == (workload, attack)]
            good = [c for c in cell if c.met]
            details = [
                f"{c.row.policy} on {c.row.scheme} {ratio_text(c.time_ratio)}, "
                f"{points_text(c.accuracy_points)} points" + ("" if c.met else " (not met)")
                for c in cell
            ]
            out.append(
                Goal(
                    f"{_profile_label(profile)}, {workload}, attack {attack}: time to target at "
                    f"most {most}x that of `all` and final accuracy within {ACCURACY_POINTS:g} "
                    f"point of it, by some policy ({len(good)} of {len(cell)} do)",
                    bool(good),
                    "; ".join(details),
                )
            )
    return out


def detection_goal(rows: Sequence[Row]) -> Goal | None:
    """``quorum`` under the weak attack: precision and recall of detection at 1.0, every run.

    The detail sets each run beside ``all`` in its cell, whose detection saw every reply.
    """
    quorum = [r for r in grid_rows(rows) if r.policy == "quorum" and r.attack == ATTACK]
    if not quorum:
        return None
    held = [r for r in quorum if r.precision == 1.0 and r.recall == 1.0]
    details = []
    for r in quorum:
        ref = reference_of(rows, r)
        theirs = "" if ref is None else f" (`all`: {_pr(ref)})"
        details.append(f"{r.workload} {r.profile}: {_pr(r)}{theirs}")
    return Goal(
        f"`quorum` under the weak attack ({ATTACK}, q = {quorum[0].q}): precision and recall "
        "of detection 1.0",
        len(held) == len(quorum),
        f"{len(held)} of {len(quorum)} runs; " + "; ".join(details),
    )


def _pr(row: Row) -> str:
    if row.precision is None or row.recall is None:
        return "failed"
    return f"P {row.precision:.2f}, R {row.recall:.2f}"


def straggler_goal(rows: Sequence[Row]) -> Goal:
    """No persistent straggler flagged in any run, on either transport."""
    finished = [r for r in rows if r.flagged_by_round]
    with_stragglers = [r for r in finished if r.stragglers]
    wrong = [r for r in finished if r.stragglers_flagged]
    detail = f"{len(with_stragglers)} of {len(finished)} runs have persistent stragglers; " + (
        "none flagged"
        if not wrong
        else "flagged in " + "; ".join(f"{_name(r)}: {r.stragglers_flagged}" for r in wrong)
    )
    return Goal("No straggler ever flagged", not wrong, detail)


def _name(row: Row) -> str:
    return f"{row.workload} {row.scheme} {row.profile} {row.policy} {row.attack} ({row.transport})"


@dataclass(frozen=True)
class Agreement:
    """A run through Flower's simulation engine and its in-process twin."""

    inprocess: Row
    flower: Row

    @property
    def same_models(self) -> bool:
        """The same model after every round, bit for bit."""
        a, b = self.inprocess.digest_by_round, self.flower.digest_by_round
        return bool(a) and a == b

    @property
    def same_flagged(self) -> bool:
        """The same workers flagged in every round."""
        return self.inprocess.flagged_by_round == self.flower.flagged_by_round

    @property
    def same_late(self) -> bool:
        """The same late and missing replies in every round."""
        a, b = self.inprocess, self.flower
        return a.late_by_round == b.late_by_round and a.missing_by_round == b.missing_by_round

    @property
    def clock_gap(self) -> float | None:
        """Largest relative difference of the simulated clocks over the rounds."""
        a, b = self.inprocess.clock_by_round, self.flower.clock_by_round
        if not a or len(a) != len(b):
            return None
        return max(abs(x - y) / max(abs(x), abs(y), 1e-12) for x, y in zip(a, b, strict=True))

    @property
    def agree(self) -> bool:
        """Both transports ran the same rounds (clocks apart by at most 0.1 %)."""
        gap = self.clock_gap
        return (
            self.same_models
            and self.same_flagged
            and self.same_late
            and gap is not None
            and gap <= CLOCK_TOLERANCE
        )


def agreements(rows: Sequence[Row]) -> list[Agreement]:
    """Pair every Flower row with the in-process row of the same run."""

    def run_of(r: Row) -> tuple[object, ...]:
        return case_key(r)[:-1]

    local = {run_of(r): r for r in rows if r.transport == IN_PROCESS}
    return [
        Agreement(local[run_of(r)], r) for r in rows if r.transport == FLOWER and run_of(r) in local
    ]


def flower_goal(rows: Sequence[Row]) -> Goal | None:
    """Each policy's Flower run agrees with its in-process twin (refused configs left aside)."""
    every = agreements(rows)
    refused = [p for p in every if _refused(p.flower) and _refused(p.inprocess)]
    pairs = [p for p in every if p not in refused]
    if not pairs:
        return None
    held = [p for p in pairs if p.agree]
    detail = f"{len(held)} of {len(pairs)} policies" + (
        f" ({', '.join(p.flower.policy for p in pairs if not p.agree)} do not)"
        if len(held) < len(pairs)
        else ""
    )
    if refused:
        detail += f"; refused on both: {', '.join(p.flower.policy for p in refused)}"
    return Goal(
        "One run per policy through Flower's simulation engine, agreeing with the in-process run",
        len(held) == len(pairs),
        detail,
    )


def _refused(row: Row) -> bool:
    return row.error is not None and row.error.startswith(REFUSED)


def goals(rows: Sequence[Row]) -> list[Goal]:
    """The issue's goals, in its order."""
    found = [*time_goals(rows), detection_goal(rows), straggler_goal(rows), flower_goal(rows)]
    return [g for g in found if g is not None]
