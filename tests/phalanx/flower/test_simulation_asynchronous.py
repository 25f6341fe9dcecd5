"""Asynchronous mode through Flower's simulation engine: the same runs as in process."""

from __future__ import annotations

import pytest

from phalanx.flower.simulation import SimulationEngine
from phalanx.runs import execute_run
from tests.support.configs import small_config
from tests.support.coordinator_runs import FakeSink, run

pytestmark = pytest.mark.slow


def test_an_async_run_through_flower_matches_the_in_process_run(
    ray_engine: SimulationEngine,
) -> None:
    config = small_config(
        rounds=3,
        assignment={"scheme": "none", "num_workers": 5, "r": 1},
        attack={"name": None, "q": 0},
        training={"optimizer": "adam", "server_lr": 0.003},
        systems={
            "enabled": True,
            "speed_scale_s": 0.01,
            "speed_distribution": "lognormal",
            "speed_sigma": 0.5,
        },
        asynchronous={"enabled": True, "buffer_size": 3, "max_staleness": 2},
    )
    flower = FakeSink()
    reports = execute_run(config, run_id="run-under-test", sink=flower, transport=ray_engine)
    local = run(config)
    assert [r.round for r in reports] == [1, 2, 3]
    assert not any(r.flagged or r.rejected for r in reports)
    # One message per task through the Grid: the same arrivals in the same order, so the
    # same buffers, staleness and steps. The model agrees to float rounding only: a
    # Flower worker computes with one torch thread, an in-process one with several (a
    # synchronous run differs alike). The clock differs by the run config each Grid
    # message also carries down.
    for through_flower, in_process in zip(reports, local.reports, strict=True):
        assert through_flower.agreement is not None and in_process.agreement is not None
        assert through_flower.agreement.replied == in_process.agreement.replied
        for key in ("staleness_mean", "staleness_max", "stale_dropped", "step_scale"):
            assert through_flower.metrics[key] == in_process.metrics[key]
        assert through_flower.metrics["simulated_total_s"] == pytest.approx(
            in_process.metrics["simulated_total_s"], rel=1e-2
        )
        assert through_flower.loss == pytest.approx(in_process.loss, rel=1e-3)
        assert through_flower.bytes_down > 0 and through_flower.bytes_up > 0
