"""The stragglers grid (benchmarks/lib/stragglers_grid.py): cases, parameters, profiles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.lib.robustness_grid import FLOWER, IN_PROCESS, NO_ATTACK
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
from phalanx.systems import draw_profiles
from tests.support.stragglers_rows import (
    CNN,
    EXPONENTIAL,
    MLP,
    POLICY,
    STRAGGLERS,
    TRACE_DROPOUT,
)

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


def test_at_k_100_every_policy_shares_the_groups_layout_and_asynchrony_runs_at_r_1() -> None:
    cases = cell_cases(MLP, STRAGGLERS, ATTACK, POLICIES, 30)
    synchronous = [c for c in cases if c.layout.scheme == "groups"]
    assert [c.policy for c in synchronous].count(ALL) == 1
    assert len(synchronous) == len(POLICIES) - 2
    at_r1 = [(c.layout, c.policy.label) for c in cases if c not in synchronous]
    assert at_r1 == [
        (MLP.r1, "all"),
        (MLP.r1, "asynchronous"),
        (MLP.r1, "asynchronous-fresh"),
    ]


def test_an_asynchronous_run_buffers_half_the_workers_at_r_1_and_its_config_is_accepted() -> None:
    runs = [c for c in cell_cases(MLP, STRAGGLERS, ATTACK, POLICIES, 30) if c.policy.asynchronous]
    configs = [run.config() for run in runs]
    for config in configs:
        assert config.asynchronous.enabled and config.assignment.r == 1
        assert config.asynchronous.buffer_size == MLP.num_workers // 2
        assert config.rounds == 30 and config.systems.enabled
    assert [c.asynchronous.max_staleness for c in configs] == [10, 0]


def test_without_all_among_the_policies_no_all_runs() -> None:
    cases = cell_cases(CNN, STRAGGLERS, ATTACK, [POLICY["quorum"], POLICY["group_fastest"]], 30)
    assert [(c.layout.scheme, c.policy.label) for c in cases] == [
        ("bibd", "quorum"),
        ("groups", "group_fastest"),
    ]


def test_the_full_grid_has_every_workload_profile_and_attack() -> None:
    cases = grid(WORKLOADS, PROFILES, (NO_ATTACK, ATTACK), POLICIES)
    # CNN: 6 on bibd, 3 on groups (no r = 1 layout); MLP: 8 on groups, 3 at r = 1.
    assert len(cases) == 3 * 2 * (9 + 11)
    assert {c.rounds for c in cases} == {30}
    assert len({c.run_id for c in cases}) == len(cases)


def test_the_quick_grid_runs_the_cnn_under_b_and_the_mlp_under_every_profile() -> None:
    cases = quick_grid()
    assert {c.profile for c in cases if c.workload == CNN} == {STRAGGLERS}
    assert {c.profile for c in cases if c.workload == MLP} == set(PROFILES)
    assert {c.rounds for c in cases} == {3}


def test_flower_twins_are_one_run_per_policy_with_an_in_process_twin_of_the_same_id() -> None:
    twins = flower_twins(POLICIES)
    assert [f.policy for f, _ in twins] == [p for p in POLICIES if not p.asynchronous]
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
