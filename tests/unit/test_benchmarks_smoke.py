"""The pure helpers of benchmarks/eval_robustness.py and benchmarks/bench_round.py."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from phalanx.reports import RoundReport

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


_load("inprocess_sharing")  # imported by the evaluations as a sibling module
robustness = _load("eval_robustness")
bench_round = _load("bench_round")

SETTINGS = robustness.Settings(
    rounds=12, model="mlp", eval_samples=1000, optimizer="adam", server_lr=0.005
)


def _defence(scheme: str) -> Any:
    return next(d for d in robustness.DEFENCES if d.scheme == scheme)


def _report(round: int, flagged: tuple[int, ...], dropped: tuple[int, ...]) -> RoundReport:
    now = datetime.now(UTC)
    return RoundReport(
        round=round,
        started_at=now,
        finished_at=now,
        loss=0.0,
        accuracy=0.0,
        flagged=flagged,
        rejected=(),
        dropped_files=dropped,
        events=(),
        bytes_up=0,
        bytes_down=0,
        timings={},
        assignment={},
        model_digest="",
    )


@pytest.mark.parametrize(
    ("scheme", "q", "strategy"),
    [("groups", 5, "only_majorities"), ("subsets", 5, "fixed_disagreement")],
)
def test_strongest_strategy_is_the_worse_one_for_the_defence(
    scheme: str, q: int, strategy: str
) -> None:
    assert robustness.strongest_strategy(_defence(scheme), q, seed=0) == strategy


def test_distorted_fraction_counts_files_whose_unflagged_replicas_are_all_distorted() -> None:
    # DETOX under the strong attack with q = 3: one of the five groups holds two
    # adversaries, whose agreement outnumbers (and gets flagged) the group's honest worker.
    case = robustness.Case(_defence("groups"), "alie", "strong", 3, "only_majorities", 0)
    config = case.config(SETTINGS)
    assignment = robustness.round_assignment(config, 1)
    adversaries = robustness.adversaries(config)
    file = next(f for f, ws in enumerate(assignment.files) if len(set(ws) & adversaries) == 2)
    honest = next(w for w in assignment.files[file] if w not in adversaries)
    fraction, consistent = robustness.round_distortion(config, _report(1, (honest,), ()))
    assert (fraction, consistent) == (0.2, True)
    # Nobody flagged: the file's replicas disagree, so it is dropped, not distorted.
    assert robustness.round_distortion(config, _report(1, (), (file,))) == (0.0, True)
    assert robustness.round_distortion(config, _report(1, (), ())) == (0.0, False)


def test_distorted_fraction_predicts_a_disputed_file_as_dropped() -> None:
    case = robustness.Case(_defence("groups"), "alie", "strong", 3, "only_majorities", 0)
    config = case.config(SETTINGS)
    assignment = robustness.round_assignment(config, 1)
    adversaries = robustness.adversaries(config)
    file = next(f for f, ws in enumerate(assignment.files) if len(set(ws) & adversaries) == 2)
    one_adversary = min(set(assignment.files[file]) & adversaries)
    honest = next(w for w in assignment.files[file] if w not in adversaries)
    # One adversary and the honest worker flagged: the other adversary decides alone.
    flagged = _report(1, tuple(sorted({one_adversary, honest})), ())
    assert robustness.round_distortion(config, flagged) == (0.2, True)
    # Only one adversary flagged: one distorted and one honest replica tie, the file drops.
    tie = _report(1, (one_adversary,), (file,))
    assert robustness.round_distortion(config, tie) == (0.0, True)


def _row(**changes: object) -> Any:
    base = {
        "scheme": "subsets",
        "aggregator": "median",
        "attack": "alie",
        "mode": "weak",
        "q": 3,
        "final_accuracy": 0.80,
        "precision": 1.0,
        "recall": 1.0,
        "distorted_fraction": 0.0,
        "transport": robustness.IN_PROCESS,
        "defence": "subsets (Aspis)",
        "strategy": "all",
        "f": 0,
        "samples_per_file": 4,
        "rounds": 12,
        "adversaries": [1, 2, 3],
        "flagged": [1, 2, 3],
        "flagged_by_round": [[1, 2, 3]],
        "drops_consistent": True,
        "model_digest": "abc",
        "seconds": 1.0,
    }
    return robustness.Row(**{**base, **changes})


def test_goals_say_when_the_weak_attack_costs_more_than_a_point() -> None:
    clean = _row(attack="none", mode="none", q=0, final_accuracy=0.82, strategy="-")
    rows = [clean, _row(final_accuracy=0.805), _row(q=5, final_accuracy=0.79)]
    goals = {g.text.split(":")[1].strip(): g for g in robustness.goals(rows)}
    assert goals["every adversary flagged and no honest worker flagged"].met
    accuracy = next(g for text, g in goals.items() if text.startswith("final accuracy"))
    assert not accuracy.met and "alie q = 5: +3.00 (1 seeds)" in accuracy.detail
    assert "alie q = 3: +1.50" in accuracy.detail


def test_the_strong_goal_averages_each_cell_over_the_seeds_both_sides_ran() -> None:
    def cell(defence: str, attack: str, seed: int, accuracy: float) -> Any:
        return _row(
            defence=defence, attack=attack, mode="strong", q=5, seed=seed, final_accuracy=accuracy
        )

    base = robustness.DEFENCES[0].name
    rows = [
        cell("subsets (Aspis)", "ipm", 1, 0.80),
        cell("subsets (Aspis)", "ipm", 2, 0.76),
        cell("subsets (Aspis)", "ipm", 3, 0.99),  # no r = 1 run with seed 3: left out
        cell(base, "ipm", 1, 0.70),
        cell(base, "ipm", 2, 0.64),
    ]
    [goal] = robustness.goals(rows)
    assert goal.met and "ipm +11.00" in goal.detail
    rows.append(cell(base, "alie", 1, 0.75))
    rows.append(cell("subsets (Aspis)", "alie", 1, 0.80))
    [goal] = robustness.goals(rows)
    assert not goal.met and "alie +5.00" in goal.detail


def test_the_strong_goal_is_checked_at_each_length_the_strong_cells_ran_with() -> None:
    base = robustness.DEFENCES[0].name
    rows = [
        _row(attack="none", mode="none", q=0, strategy="-", final_accuracy=0.80),
        _row(mode="strong", q=5, final_accuracy=0.79),
        _row(defence=base, scheme="none", mode="strong", q=5, final_accuracy=0.75),
    ]
    rows += [
        dataclasses.replace(r, rounds=80, final_accuracy=(r.final_accuracy or 0) + d)
        for r, d in zip(rows, (0.05, 0.05, -0.05), strict=True)
    ]
    by_text = {g.text.split(":")[0]: g for g in robustness.goals(rows)}
    short = by_text["subsets, strong attack, q = 5, 12 rounds"]
    long = by_text["subsets, strong attack, q = 5, 80 rounds"]
    assert not short.met and "alie +4.00, room +5.00" in short.detail
    assert long.met and "alie +14.00, room +15.00" in long.detail
    # The weak-attack goals read the grid's length only.
    rows.append(_row())
    weak = next(g for g in robustness.goals(rows) if "within 1 point" in g.text)
    assert "q = 0: 80.00 (seed 2026)" in weak.text
    assert "## Longer training: 80 rounds" in robustness.markdown(rows, ["settings"])


def test_long_runs_repeat_the_strong_goal_cells_for_every_seed() -> None:
    cases = robustness.grid(robustness.DEFENCES, ("alie", "ipm"), (0, 3, 5), ("weak", "strong"), 1)
    longer = robustness.long_runs(cases, [1, 2], 80)
    assert {c.rounds for c in longer} == {80}
    assert {c.defence.name for c in longer} == {"r=1 median", "subsets (Aspis)"}
    assert {(c.attack, c.mode, c.q) for c in longer} == {
        ("none", "none", 0),
        ("alie", "strong", 5),
        ("ipm", "strong", 5),
    }
    assert len(longer) == 2 * 2 * 3
    assert len({c.run_id for c in longer}) == len(longer)
    assert longer[0].config(SETTINGS).rounds == 80


def test_merge_replaces_rows_of_the_same_case_and_keeps_the_rest() -> None:
    old = [_row(), _row(rounds=80), _row(seed=7)]
    new = [_row(rounds=80, final_accuracy=0.5), _row(q=5)]
    merged = robustness.merge(old, new)
    assert [(r.rounds, r.seed, r.q, r.final_accuracy) for r in merged] == [
        (12, robustness.SEED, 3, 0.80),
        (80, robustness.SEED, 3, 0.5),
        (12, 7, 3, 0.80),
        (12, robustness.SEED, 5, 0.80),
    ]
    assert robustness.grid_rounds(merged) == 12


def test_agreement_needs_the_same_flags_and_the_same_model() -> None:
    local = _row()
    same = robustness.Agreement(local, dataclasses.replace(local, transport=robustness.FLOWER))
    assert same.agree
    other = dataclasses.replace(local, transport=robustness.FLOWER, flagged_by_round=[[1, 2]])
    assert not robustness.Agreement(local, other).agree


def test_markdown_lists_every_row_and_marks_failures() -> None:
    failed = _row(final_accuracy=None, precision=None, recall=None, error="round 1: boom")
    text = robustness.markdown([_row(), failed], ["settings"])
    assert text.count("| subsets (Aspis) | median (f = 0)") == 2
    assert "[1] round 1: boom" in text


def test_round_timing_leaves_out_the_first_and_the_last_round() -> None:
    rounds, evals = bench_round.timed([10.0, 12.0, 15.0, 19.0, 30.0], [1, 2, 3, 4, 9])
    assert rounds == [2.0, 3.0, 4.0] and evals == [2, 3, 4]
