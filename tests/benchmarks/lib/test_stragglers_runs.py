"""Stragglers rows from round reports (benchmarks/lib/stragglers_runs.py)."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError

from benchmarks.lib import stragglers_runs
from benchmarks.lib.results import machine
from benchmarks.lib.robustness_grid import FLOWER, IN_PROCESS, NO_ATTACK
from benchmarks.lib.stragglers_grid import (
    ATTACK,
    Case,
)
from benchmarks.lib.stragglers_runs import REFUSED, derive, merge, refusal, stragglers_of
from phalanx.config import RunConfig
from tests.support.reports import round_report
from tests.support.stragglers_rows import (
    CNN,
    MLP,
    POLICY,
    STRAGGLERS,
    row,
)

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
    caught = slow in r.adversaries
    # A flagged straggler counts against the goal only when it is honest.
    assert r.stragglers_flagged == ([] if caught else [slow]) and len(r.stragglers) == 3
    assert r.collect == {"k": 12} and r.final_accuracy == pytest.approx(0.7)
    assert (r.precision, r.recall) == ((1.0, 1 / 3) if caught else (0.0, 0.0))


def test_an_adversary_that_is_also_slow_is_rightly_flagged_and_not_counted() -> None:
    case = Case(MLP, MLP.main, STRAGGLERS, POLICY["quorum"], ATTACK, 2)
    config = case.config()
    slow = set(stragglers_of(config))
    r = derive(case, config, [round_report(1, flagged=tuple(sorted(slow)))], 1.0)
    liars_too = slow & set(r.adversaries)
    assert liars_too  # the MLP's (b) cell has one: worker 17
    assert r.stragglers_flagged == sorted(slow - liars_too)


def test_a_refused_config_becomes_a_row_with_one_line_and_no_figures() -> None:
    with pytest.raises(ValidationError) as refused:
        RunConfig.model_validate({"collect": {"policy": "deadline", "deadline_s": 1.0}})
    error = refusal(refused.value)
    assert error.startswith(REFUSED) and "systems.enabled" in error and "\n" not in error
    case = Case(CNN, CNN.main, STRAGGLERS, POLICY["deadline"], NO_ATTACK, 30)
    r = derive(case, None, [], 0.0, error)
    assert (r.final_accuracy, r.precision, r.simulated_time_s, r.rounds) == (None, None, None, 30)
    assert r.error == error and r.collect == {} and r.stragglers == []


def test_a_run_names_the_cpu_it_ran_on(monkeypatch: pytest.MonkeyPatch) -> None:
    case = Case(CNN, CNN.main, STRAGGLERS, POLICY["deadline"], NO_ATTACK, 30)
    refused = derive(case, None, [], 0.0, REFUSED + "stand-in")
    monkeypatch.setattr(stragglers_runs, "_run", lambda c: refused)
    assert refused.host is None
    assert stragglers_runs.run_case(case).host == machine().cpu


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
