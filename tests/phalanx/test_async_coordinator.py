"""Buffered asynchronous runs on the in-process transport and the systems model's clock."""

from __future__ import annotations

import dataclasses
import io
import statistics
from typing import Any

import pytest
import torch

from phalanx.async_coordinator import AsyncCoordinator
from phalanx.config import RunConfig
from phalanx.faults import RunFailedError
from phalanx.plan import adversaries
from phalanx.replies import Reply
from phalanx.runs import build_coordinator
from phalanx.systems.profiles import draw_profiles
from tests.support.configs import small_config
from tests.support.coordinator_runs import RUN_ID, FakeSink, run, run_interrupted, transport

#: One persistent straggler of seven, ten times slower; compute dominates the links.
STRAGGLER = {
    "enabled": True,
    "speed_scale_s": 0.01,
    "straggler_fraction": 0.15,
    "straggler_slowdown": 10.0,
}


def async_config(rounds: int, **overrides: Any) -> RunConfig:
    """Seven workers at r = 1, honest unless told, a buffer of 4, staleness bound 4."""
    settings: dict[str, Any] = {
        "rounds": rounds,
        "assignment": {"scheme": "none", "num_workers": 7, "r": 1},
        "attack": {"name": None, "q": 0},
        "training": {"optimizer": "adam", "server_lr": 0.003},
        "systems": STRAGGLER,
        "asynchronous": {"enabled": True, "buffer_size": 4, "max_staleness": 4},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(settings.get(key), dict):
            settings[key] = {**settings[key], **value}
        else:
            settings[key] = value
    return small_config(**settings)


def straggler_of(config: RunConfig) -> int:
    profiles = draw_profiles(config.systems, config.assignment.num_workers, config.seed)
    (slow,) = [w for w, p in enumerate(profiles) if p.straggler]
    return slow


def test_an_async_run_trains_and_a_ten_times_slower_worker_does_not_hold_it() -> None:
    # A staleness bound of 2: the straggler's updates come 3 or 4 versions old (a worker
    # holds one slot of a buffer, so the model moves once per 4 of the 6 fast workers).
    config = async_config(12, asynchronous={"max_staleness": 2})
    slow = straggler_of(config)
    sink = run(config)
    reports = sink.reports
    assert [r.round for r in reports] == list(range(1, 13))
    assert [r.metrics["model_version"] for r in reports] == [float(t) for t in range(1, 13)]
    accuracy = [r.accuracy for r in reports]
    assert statistics.mean(accuracy[-3:]) >= accuracy[0] + 0.2
    # Slow is not lying: never flagged or refused, and never waited for.
    assert not any(r.flagged or r.rejected or r.events for r in reports)
    durations: dict[int, list[float]] = {}
    for report in reports:
        for response in report.responses:
            assert response.seconds is not None
            durations.setdefault(response.worker, []).append(response.seconds)
    slow_task = min(durations[slow])
    others = statistics.median(s for w, times in durations.items() if w != slow for s in times)
    assert slow_task > 4 * others  # ten times the compute, the same links
    # Twelve model updates took less than four of the straggler's tasks; waiting for it
    # every round would take twelve.
    assert reports[-1].metrics["simulated_total_s"] < 4 * slow_task
    clocks = [r.metrics["simulated_total_s"] for r in reports]
    assert clocks == sorted(clocks)
    # Its updates came too stale and were dropped and counted, as late replies.
    late = [(r.round, x.worker) for r in reports for x in r.responses if x.status == "late"]
    assert late and {w for _, w in late} == {slow}
    assert reports[-1].metrics["stale_dropped_total"] == len(late)
    assert sum(r.metrics["late_replies"] for r in reports) == len(late)
    for report in reports:
        assert report.metrics["buffered_updates"] == 4
        assert 0 <= report.metrics["staleness_mean"] <= report.metrics["staleness_max"] <= 4
        assert 0 < report.metrics["step_scale"] <= 1
        assert report.metrics["update_applied"] == 1


def test_a_large_norm_liar_is_screened_out_of_every_buffer_it_reaches() -> None:
    config = async_config(5, attack={"name": "reversed_gradient", "q": 1, "selection": "weak"})
    (liar,) = adversaries(config)
    sink = run(config)
    reached = [r for r in sink.reports if r.agreement is not None and liar in r.agreement.replied]
    assert reached, "the liar's update never reached a buffer"
    for report in sink.reports:
        assert set(report.flagged) == ({liar} if report in reached else set())
    for report in reached:
        (event,) = [e for e in report.events if e.worker == liar]
        assert (event.kind, event.severity) == ("outlier", "low")
        assert report.dropped_files  # its slot never reached the aggregate
        assert report.metrics["accepted_files"] == 4 - len(report.dropped_files)


def test_a_resumed_run_restarts_every_worker_on_the_restored_model_and_clock() -> None:
    config = async_config(4, systems={"straggler_fraction": 0.0})
    first, resumed = run_interrupted(config, stop_after=2)
    again = run_interrupted(config, stop_after=2)[1]
    assert [r.round for r in resumed.reports] == [3, 4]
    assert [r.metrics["model_version"] for r in resumed.reports] == [3.0, 4.0]
    stopped_at = first.reports[-1].metrics["simulated_total_s"]
    assert resumed.reports[0].metrics["simulated_total_s"] > stopped_at
    # Replayable: the same checkpoint gives the same run.
    assert [r.model_digest for r in again.reports] == [r.model_digest for r in resumed.reports]
    # Task counts carry over, so no worker computes a data round twice.
    saved = torch.load(io.BytesIO(first.checkpoints[2]), weights_only=True)
    after = torch.load(io.BytesIO(resumed.checkpoints[4]), weights_only=True)
    given, later = saved["asynchronous"]["tasks_given"], after["asynchronous"]["tasks_given"]
    assert all(b > a for a, b in zip(given, later, strict=True))


def test_a_checkpoint_of_a_synchronous_run_is_refused_clearly() -> None:
    synchronous = small_config(rounds=1)
    sink = run(synchronous)
    config = async_config(2)
    with pytest.raises(ValueError, match="not written by an asynchronous run"):
        build_coordinator(
            config, RUN_ID, transport(config), FakeSink(), checkpoint=sink.checkpoints[1]
        )


def test_a_synchronous_config_gets_the_round_loop_and_never_the_asynchronous_one() -> None:
    synchronous = small_config(rounds=1)
    coordinator = build_coordinator(synchronous, RUN_ID, transport(synchronous), FakeSink())
    assert not isinstance(coordinator, AsyncCoordinator)
    with pytest.raises(ValueError, match=r"asynchronous\.enabled only"):
        AsyncCoordinator(
            synchronous,
            run_id=RUN_ID,
            transport=coordinator.transport,
            members=coordinator.members,
            model=coordinator.model,
            params=coordinator.params,
            test_set=coordinator.test_set,
            sink=FakeSink(),
        )


def test_workers_away_come_back_and_the_run_goes_on() -> None:
    config = async_config(3, systems={"availability": "dropout", "dropout_probability": 0.4})
    sink = run(config)
    assert [r.round for r in sink.reports] == [1, 2, 3]
    assert sum(r.metrics["away_tasks"] for r in sink.reports) > 0
    assert not any(r.flagged or r.rejected for r in sink.reports)


def test_a_run_whose_every_reply_is_forged_fails_with_the_cause() -> None:
    config = async_config(
        2,
        assignment={"num_workers": 4},
        training={"max_rounds_without_update": 1},
        asynchronous={"buffer_size": 3},
    )

    def forge(reply: Reply) -> Reply:
        return dataclasses.replace(reply, signature=b"\x30\x06\x02\x01\x01\x02\x01\x01")

    said = (
        r"round 1: no worker is at work any more \(4 failed or were refused since the last "
        r"update; 4 workers\), with 0 of 3 updates buffered: see the round's detection events"
    )
    with pytest.raises(RunFailedError, match=said):
        run(config, tamper=forge)


def test_a_run_whose_workers_all_vanish_fails_instead_of_waiting_forever() -> None:
    config = async_config(1, assignment={"num_workers": 4}, asynchronous={"buffer_size": 3})
    with pytest.raises(RunFailedError, match="no worker is at work any more"):
        run(config, tamper=lambda reply: None)


def test_a_checkpoint_whose_recent_updates_lack_their_versions_is_refused() -> None:
    config = async_config(2, systems={"straggler_fraction": 0.0})
    first = run(config)
    state = torch.load(io.BytesIO(first.checkpoints[2]), weights_only=True)
    assert len(state["asynchronous"]["recent_versions"]) == len(state["asynchronous"]["recent"])
    state["asynchronous"]["recent_versions"] = state["asynchronous"]["recent_versions"][1:]
    hostile = io.BytesIO()
    torch.save(state, hostile)
    with pytest.raises(ValueError, match="do not say their model versions"):
        build_coordinator(
            config, RUN_ID, transport(config), FakeSink(), checkpoint=hostile.getvalue()
        )
