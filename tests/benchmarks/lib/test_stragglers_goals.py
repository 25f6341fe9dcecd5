"""Stragglers targets and goals (benchmarks/lib/stragglers_goals.py)."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.lib.robustness_grid import FLOWER
from benchmarks.lib.stragglers_goals import (
    Agreement,
    Comparison,
    agreements,
    detection_goal,
    grid_rows,
    straggler_goal,
    target_round,
    time_goals,
    time_to_target,
    with_targets,
)
from benchmarks.lib.stragglers_grid import (
    ATTACK,
)
from benchmarks.lib.stragglers_markdown import markdown
from tests.support.stragglers_rows import (
    EXPONENTIAL,
    STRAGGLERS,
    TRACE_DROPOUT,
    row,
)

# Target and time to target


def test_the_target_round_is_four_fifths_of_the_rounds_rounded_down() -> None:
    assert [target_round(n) for n in (30, 5, 3, 2, 1)] == [24, 4, 2, 1, 1]
    with pytest.raises(ValueError):
        target_round(0)


def test_time_to_target_is_the_clock_after_the_first_round_that_reaches_it() -> None:
    accuracies, clock = [0.5, 0.72, 0.69, 0.75], [1.0, 2.0, 3.5, 4.0]
    assert time_to_target(accuracies, clock, 0.70) == 2.0
    assert time_to_target(accuracies, clock, 0.72) == 2.0
    assert time_to_target(accuracies, clock, 0.9) is None
    assert time_to_target(accuracies, clock, None) is None
    with pytest.raises(ValueError, match="clock"):
        time_to_target(accuracies, clock[:3], 0.7)


def test_targets_come_from_the_all_run_of_the_same_scheme_and_transport() -> None:
    rows = with_targets(
        [
            row(),
            row(policy="fastest_k", clock_by_round=[2.0, 4.0, 6.0, 8.0, 10.0]),
            row(scheme="groups", accuracy_by_round=[0.1, 0.2, 0.3, 0.4, 0.5]),
            row(scheme="groups", policy="group_fastest"),
            row(transport=FLOWER, policy="quorum"),
        ]
    )
    # Round 4 of 5: 0.75 on bibd, 0.4 on groups; no `all` through Flower.
    assert [r.target_accuracy for r in rows] == [0.75, 0.75, 0.4, 0.4, None]
    assert [r.time_to_target_s for r in rows] == [24.0, 8.0, 24.0, 6.0, None]


def test_a_failed_all_leaves_its_cell_without_a_target() -> None:
    failed = row(error="round 2: RunFailedError: boom", accuracy_by_round=[0.5])
    rows = with_targets([failed, row(policy="quorum")])
    assert [r.target_accuracy for r in rows] == [None, None]
    assert [r.time_to_target_s for r in rows] == [None, None]


# Goals


def _compared(policy: str, time: float | None, accuracy: float, profile: str) -> Comparison:
    ref = row(profile=profile, time_to_target_s=20.0, final_accuracy=0.80)
    mine = row(profile=profile, policy=policy, time_to_target_s=time, final_accuracy=accuracy)
    return Comparison(mine, ref)


def test_the_time_goal_is_half_of_alls_under_b_and_seven_tenths_under_a() -> None:
    assert _compared("fastest_k", 10.0, 0.80, STRAGGLERS.key).met is True
    assert _compared("fastest_k", 10.2, 0.80, STRAGGLERS.key).met is False
    assert _compared("fastest_k", 14.0, 0.80, EXPONENTIAL.key).met is True
    assert _compared("fastest_k", None, 0.80, EXPONENTIAL.key).time_met is False
    assert _compared("fastest_k", 1.0, 0.80, TRACE_DROPOUT.key).met is None


def test_the_accuracy_goal_allows_one_point_below_all_and_anything_above() -> None:
    assert _compared("quorum", 5.0, 0.79, STRAGGLERS.key).accuracy_met
    assert not _compared("quorum", 5.0, 0.7899, STRAGGLERS.key).accuracy_met
    assert _compared("quorum", 5.0, 0.95, STRAGGLERS.key).accuracy_points == pytest.approx(15.0)


def test_a_time_goal_line_is_met_when_some_policy_meets_both_goals() -> None:
    rows = with_targets(
        [
            row(),
            row(policy="fastest_k", clock_by_round=[2.0, 4.0, 6.0, 8.0, 10.0]),
            row(policy="quorum", clock_by_round=[5.0, 10.0, 15.0, 20.0, 25.0]),
        ]
    )
    (goal,) = time_goals(rows)
    assert goal.met and "1 of 2 do" in goal.text
    assert "fastest_k on bibd 0.33x" in goal.detail and "quorum on bibd 0.83x" in goal.detail
    slow = with_targets([row(), row(policy="quorum")])
    assert not time_goals(slow)[0].met


def test_quorum_keeps_detection_only_with_precision_and_recall_at_one() -> None:
    attacked = {"attack": ATTACK, "q": 3}
    good = [row(**attacked), row(policy="quorum", **attacked)]
    goal = detection_goal(good)
    assert goal is not None and goal.met
    bad = [row(**attacked), row(policy="quorum", recall=2 / 3, **attacked)]
    goal = detection_goal(bad)
    assert goal is not None and not goal.met and "R 0.67 (`all`: P 1.00, R 1.00)" in goal.detail
    assert detection_goal([row()]) is None


def test_the_shorter_twin_of_a_flower_run_stays_out_of_the_grids_goals_and_tables() -> None:
    attacked = {"attack": ATTACK, "q": 3, "recall": 0.0}
    twin = row(
        policy="quorum",
        rounds=2,
        accuracy_by_round=[0.5, 0.6],
        clock_by_round=[6.0, 12.0],
        **attacked,
    )
    rows = with_targets(
        [
            row(**attacked),
            row(policy="quorum", **attacked),
            row(policy="fastest_k", **attacked),
            twin,
            dataclasses.replace(twin, transport=FLOWER),
        ]
    )
    assert [r.policy for r in grid_rows(rows)] == ["all", "quorum", "fastest_k"]
    goal = detection_goal(rows)
    assert goal is not None and goal.detail.startswith("0 of 1 runs")
    assert markdown(rows, []).count("| (b) persistent stragglers |") == 3


def test_a_flagged_straggler_breaks_the_straggler_goal_on_either_transport() -> None:
    clean = row(stragglers=[3, 7, 9], flagged=[1])
    assert straggler_goal([clean]).met
    wrong = row(transport=FLOWER, stragglers=[3, 7, 9], flagged=[7], stragglers_flagged=[7])
    goal = straggler_goal([clean, wrong])
    assert not goal.met and "[7]" in goal.detail


def test_the_transports_agree_on_models_flags_and_lateness_and_clocks_within_a_tenth_percent() -> (
    None
):
    local = row(policy="quorum")
    (pair,) = agreements([local, dataclasses.replace(local, transport=FLOWER)])
    assert pair.agree
    close = dataclasses.replace(local, clock_by_round=[t * 1.0005 for t in local.clock_by_round])
    assert Agreement(local, close).agree
    far = dataclasses.replace(local, clock_by_round=[t * 1.01 for t in local.clock_by_round])
    assert not Agreement(local, far).agree
    other = dataclasses.replace(local, digest_by_round=["d1", "x", "d3", "d4", "d5"])
    assert not Agreement(local, other).agree
    late = dataclasses.replace(local, late_by_round=[0, 1, 0, 0, 0])
    assert not Agreement(local, late).same_late
