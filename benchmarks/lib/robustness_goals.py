"""Judging the rows of ``eval_robustness.py``: the issue's goals, and the two transports' agreement.

Accuracies are averaged over the seeds each cell ran with, and differences are
taken between cells of the same seeds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.lib.robustness_grid import ATTACKS, DEFENCES, FLOWER, IN_PROCESS, NO_ATTACK
from benchmarks.lib.robustness_runs import Row, case_key, grid_rounds


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
    local = {case_key(r): r for r in rows if r.transport == IN_PROCESS}
    return [
        Agreement(local[case_key(r)], r)
        for r in rows
        if r.transport == FLOWER and case_key(r) in local
    ]


@dataclass(frozen=True)
class Goal:
    """One goal of the issue, checked against the rows."""

    text: str
    met: bool
    detail: str


def _acc(row: Row | None) -> float:
    return math.nan if row is None or row.final_accuracy is None else row.final_accuracy


def mean_accuracy(rows: Sequence[Row]) -> float:
    """Mean final accuracy of ``rows``; NaN if any failed or there are none."""
    accs = [_acc(r) for r in rows]
    return sum(accs) / len(accs) if accs else math.nan


def pct(x: float | None) -> str:
    """An accuracy in percent with two decimals; ``failed`` for a run that has none."""
    return "failed" if x is None else f"{100 * x:.2f}"


def _by_seed(rows: Sequence[Row]) -> str:
    return ", ".join(f"{pct(r.final_accuracy)} (seed {r.seed})" for r in rows)


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
            drop = mean_accuracy(base) - mean_accuracy(attacked)
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
    gaps = [(a, mean_accuracy(m) - mean_accuracy(t), m, t) for a, m, t in strong]
    # No defence beats its own unattacked accuracy (give or take noise), so an attack
    # that costs the baseline less than 10 points leaves no room for a 10-point gap.
    room = {}
    for attack, _, _, theirs in gaps:
        base, own = paired(theirs, clean)
        room[attack] = mean_accuracy(own) - mean_accuracy(base) if own else math.nan
    return Goal(
        f"subsets, strong attack, q = {top}, {rounds} rounds: at least 10 points "
        f"above {baseline} "
        "(mean over seeds; points: subsets minus r = 1 median; *room*: subsets' "
        "own q = 0 accuracy minus the r = 1 median under the attack, the largest "
        "gap a defence could show; a cell whose room is under 10 points counts as met "
        "within 1 point of its room)",
        all(g >= 0.10 or (room[a] < 0.10 and g + 1e-9 >= room[a] - 0.01) for a, g, _, _ in gaps),
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

    mine_attack, mine, _ = min(strong, key=lambda s: lowest(mean_accuracy(s[1])))
    base_attack, _, theirs = min(strong, key=lambda s: lowest(mean_accuracy(s[2])))
    gap = mean_accuracy(mine) - mean_accuracy(theirs)
    return Goal(
        f"subsets, strong attack, q = {top}, {rounds} rounds, each defence under the attack "
        "that costs it most (as ByzShield states its claim, 'under the strongest attacks'): "
        f"at least 10 points above {baseline} (mean over seeds)",
        gap >= 0.10,
        f"{100 * gap:+.2f}: subsets under {mine_attack} {_by_seed(mine)}; "
        f"r = 1 median under {base_attack} {_by_seed(theirs)}",
    )
