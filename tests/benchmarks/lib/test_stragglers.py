"""eval_stragglers.py's pure parts (benchmarks/lib/stragglers_*.py): no federation runs."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from benchmarks import eval_stragglers
from benchmarks.lib import results
from benchmarks.lib.robustness_grid import FLOWER, IN_PROCESS, NO_ATTACK
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
    ALL,
    ATTACK,
    POLICIES,
    PROFILES,
    WORKLOADS,
    Case,
    cell_cases,
    collect_section,
    deadline_for,
    fastest_count,
    flower_twins,
    grid,
    quick_grid,
    select,
    typical_arrivals,
)
from benchmarks.lib.stragglers_markdown import markdown
from benchmarks.lib.stragglers_runs import REFUSED, Row, derive, merge, refusal, stragglers_of
from phalanx.config import RunConfig
from phalanx.systems import draw_profiles
from tests.support.reports import round_report

CNN, MLP = WORKLOADS
EXPONENTIAL, STRAGGLERS, TRACE_DROPOUT = PROFILES
POLICY = {p.label: p for p in POLICIES}


def row(**overrides: Any) -> Row:
    """A finished in-process row of the CNN's bibd cell under (b), without attack."""
    base: dict[str, Any] = {
        "profile": STRAGGLERS.key,
        "policy": "all",
        "scheme": "bibd",
        "attack": NO_ATTACK,
        "q": 0,
        "time_to_target_s": None,
        "final_accuracy": 0.80,
        "simulated_time_s": 30.0,
        "late_replies": 0,
        "precision": 1.0,
        "recall": 1.0,
        "transport": IN_PROCESS,
        "workload": CNN.key,
        "model": "cnn",
        "num_workers": 15,
        "r": 3,
        "rounds": 5,
        "collect": {},
        "target_accuracy": None,
        "missing_replies": 0,
        "adversaries": [],
        "stragglers": [],
        "flagged": [],
        "stragglers_flagged": [],
        "accuracy_by_round": [0.5, 0.6, 0.7, 0.75, 0.8],
        "clock_by_round": [6.0, 12.0, 18.0, 24.0, 30.0],
        "late_by_round": [0] * 5,
        "missing_by_round": [0] * 5,
        "flagged_by_round": [[]] * 5,
        "digest_by_round": ["d1", "d2", "d3", "d4", "d5"],
        "seconds": 1.0,
    }
    return Row(**{**base, **overrides})


# The grid


def test_group_fastest_runs_on_groups_beside_an_all_of_its_own() -> None:
    cases = cell_cases(CNN, STRAGGLERS, NO_ATTACK, POLICIES, 30)
    on = {(c.layout.scheme, c.policy.label) for c in cases}
    assert ("groups", "all") in on and ("bibd", "all") in on
    assert {p for s, p in on if s == "groups"} == {"all", "group_fastest", "group_fastest (lazy)"}
    assert {p for s, p in on if s == "bibd"} == {
        "all",
        "deadline",
        "fastest_k",
        "adaptive_k",
        "quorum",
        "bandit",
    }


def test_at_k_100_every_policy_shares_the_groups_layout_and_one_all() -> None:
    cases = cell_cases(MLP, STRAGGLERS, ATTACK, POLICIES, 30)
    assert {c.layout.scheme for c in cases} == {"groups"}
    assert [c.policy for c in cases].count(ALL) == 1
    assert len(cases) == len(POLICIES)


def test_without_all_among_the_policies_no_all_runs() -> None:
    cases = cell_cases(CNN, STRAGGLERS, ATTACK, [POLICY["quorum"], POLICY["group_fastest"]], 30)
    assert [(c.layout.scheme, c.policy.label) for c in cases] == [
        ("bibd", "quorum"),
        ("groups", "group_fastest"),
    ]


def test_the_full_grid_has_every_workload_profile_and_attack() -> None:
    cases = grid(WORKLOADS, PROFILES, (NO_ATTACK, ATTACK), POLICIES)
    assert len(cases) == 3 * 2 * (9 + 8)
    assert {c.rounds for c in cases} == {30}
    assert len({c.run_id for c in cases}) == len(cases)


def test_the_quick_grid_runs_the_cnn_under_b_and_the_mlp_under_every_profile() -> None:
    cases = quick_grid()
    assert {c.profile for c in cases if c.workload == CNN} == {STRAGGLERS}
    assert {c.profile for c in cases if c.workload == MLP} == set(PROFILES)
    assert {c.rounds for c in cases} == {3}


def test_flower_twins_are_one_run_per_policy_with_an_in_process_twin_of_the_same_id() -> None:
    twins = flower_twins(POLICIES)
    assert [f.policy for f, _ in twins] == list(POLICIES)
    for flower, local in twins:
        assert (flower.transport, local.transport) == (FLOWER, IN_PROCESS)
        assert flower.run_id == local.run_id
        assert flower.layout.scheme == ("groups" if flower.policy.on_groups else "bibd")


def test_policy_parameters_follow_k_and_r() -> None:
    assert (fastest_count(15), fastest_count(100)) == (12, 80)

    def section(label: str, k: int, r: int) -> dict[str, Any]:
        return collect_section(POLICY[label], num_workers=k, r=r, deadline_s=2.5)

    assert section("fastest_k", 15, 3) == {"policy": "fastest_k", "k": 12}
    assert section("quorum", 15, 3) == {"policy": "quorum", "m": 2}
    assert section("quorum", 100, 4) == {"policy": "quorum", "m": 3}
    assert section("deadline", 15, 3) == {"policy": "deadline", "deadline_s": 2.5}
    assert section("adaptive_k", 100, 4) == {"policy": "adaptive_k", "k": 50, "k_step": 5}
    with pytest.raises(ValueError, match="deadline_s"):
        collect_section(POLICY["deadline"], num_workers=15, r=3, deadline_s=None)


def test_the_deadline_leaves_out_the_persistent_stragglers_and_no_one_else() -> None:
    case = Case(CNN, CNN.main, STRAGGLERS, POLICY["deadline"], NO_ATTACK, 30)
    config = case.config()
    typical = typical_arrivals(config)
    slow = {w for w, p in enumerate(draw_profiles(config.systems, 15, config.seed)) if p.straggler}
    assert len(slow) == 3
    deadline = config.collect.deadline_s
    assert deadline == deadline_for(config)
    assert all((t > deadline) == (w in slow) for w, t in enumerate(typical))


def test_profile_c_reads_the_trace_with_dropouts_and_typical_rounds_have_everyone() -> None:
    config = Case(MLP, MLP.main, TRACE_DROPOUT, POLICY["quorum"], ATTACK, 30).config()
    assert config.systems.trace is not None and Path(config.systems.trace).is_file()
    assert (config.systems.availability, config.systems.dropout_probability) == ("dropout", 0.1)
    assert all(t < float("inf") for t in typical_arrivals(config))
    assert (config.attack.name, config.attack.q, config.attack.selection) == ("alie", 3, "weak")


def test_select_names_the_unknown_key_and_the_known_ones() -> None:
    assert select(PROFILES, "trace_dropout,shifted_exponential", "profile") == [
        TRACE_DROPOUT,
        EXPONENTIAL,
    ]
    assert select(POLICIES, None, "policy") == list(POLICIES)
    with pytest.raises(ValueError, match=r"unknown policy 'fastest'.*fastest_k"):
        select(POLICIES, "fastest", "policy")


# Rows from reports


def test_a_row_sums_late_and_missing_replies_and_names_a_flagged_straggler() -> None:
    case = Case(CNN, CNN.main, STRAGGLERS, POLICY["fastest_k"], ATTACK, 2)
    config = case.config()
    slow = min(stragglers_of(config))
    metrics = [
        {"simulated_total_s": 2.5, "late_replies": 3.0, "missing_replies": 0.0},
        {"simulated_total_s": 5.0, "late_replies": 2.0, "missing_replies": 1.0},
    ]
    reports = [
        dataclasses.replace(round_report(t, accuracy=0.5 + t / 10, flagged=flags), metrics=m)
        for t, flags, m in zip((1, 2), ((), (slow,)), metrics, strict=True)
    ]
    r = derive(case, config, reports, 3.0)
    assert (r.late_replies, r.missing_replies, r.simulated_time_s) == (5, 1, 5.0)
    assert r.late_by_round == [3, 2] and r.clock_by_round == [2.5, 5.0]
    assert r.stragglers_flagged == [slow] and len(r.stragglers) == 3
    assert r.collect == {"k": 12} and r.final_accuracy == pytest.approx(0.7)
    caught = slow in r.adversaries
    assert (r.precision, r.recall) == ((1.0, 1 / 3) if caught else (0.0, 0.0))


def test_a_refused_config_becomes_a_row_with_one_line_and_no_figures() -> None:
    with pytest.raises(ValidationError) as refused:
        RunConfig.model_validate({"collect": {"policy": "deadline", "deadline_s": 1.0}})
    error = refusal(refused.value)
    assert error.startswith(REFUSED) and "systems.enabled" in error and "\n" not in error
    case = Case(CNN, CNN.main, STRAGGLERS, POLICY["deadline"], NO_ATTACK, 30)
    r = derive(case, None, [], 0.0, error)
    assert (r.final_accuracy, r.precision, r.simulated_time_s, r.rounds) == (None, None, None, 30)
    assert r.error == error and r.collect == {} and r.stragglers == []


def test_merge_replaces_the_same_run_and_keeps_the_others() -> None:
    old = [row(), row(policy="quorum"), row(transport=FLOWER)]
    new = [row(policy="quorum", final_accuracy=0.5), row(attack=ATTACK, q=3)]
    merged = merge(old, new)
    assert [(r.policy, r.transport, r.attack) for r in merged] == [
        ("all", IN_PROCESS, NO_ATTACK),
        ("quorum", IN_PROCESS, NO_ATTACK),
        ("all", FLOWER, NO_ATTACK),
        ("all", IN_PROCESS, ATTACK),
    ]
    assert merged[1].final_accuracy == 0.5


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


# The report


def test_the_report_lists_every_run_with_its_parameters_and_one_footnote_per_refusal() -> None:
    refused = f"{REFUSED}Value error, not yet"
    rows = with_targets(
        [
            row(),
            row(policy="fastest_k", collect={"k": 12}, clock_by_round=[2.0, 4, 6, 8, 10]),
            row(policy="adaptive_k", error=refused, accuracy_by_round=[], clock_by_round=[]),
            row(policy="bandit", error=refused, accuracy_by_round=[], clock_by_round=[]),
        ]
    )
    text = markdown(rows, ["notes"])
    assert "![Fashion-MNIST CNN, K = 15: accuracy against simulated time]" in text
    assert "(stragglers_cnn-k15.png)" in text
    assert "| fastest_k (k = 12) | 75.00 | 8.0 | 0.33x | 80.00 | +0.00 |" in text
    assert "| adaptive_k [1] | — |" in text and "| bandit [1] | — |" in text
    assert text.count(refused) == 1


def test_report_only_rewrites_the_report_and_plots_from_stored_rows(tmp_path: Path) -> None:
    stored = with_targets(
        [
            row(),
            row(policy="fastest_k", clock_by_round=[2.0, 4.0, 6.0, 8.0, 10.0]),
            row(transport=FLOWER),
        ]
    )
    results.write_json(tmp_path / "stragglers.json", [asdict(r) for r in stored])
    assert eval_stragglers.main(["--report-only", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "stragglers.md").read_text(encoding="utf-8")
    assert "**met**: (b) 20 % persistent stragglers, 5x slower, cnn-k15, attack none" in text
    assert "Flower's simulation engine against the in-process test double" in text
    assert (tmp_path / "stragglers_cnn-k15.png").stat().st_size > 0
    assert not (tmp_path / "stragglers_mlp-k100.png").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rounds", "0"], "--rounds: must be at least 1"),
        (["--flower-rounds", "two"], "not a whole number"),
        (["--policies", "all,fastest"], "unknown policy 'fastest'"),
    ],
)
def test_options_that_would_run_something_else_are_refused_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as stopped:
        eval_stragglers.main([*argv, "--out", str(tmp_path)])
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_report_only_without_stored_rows_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit):
        eval_stragglers.main(["--report-only", "--out", str(tmp_path)])
    assert "holds no rows to report" in capsys.readouterr().err
