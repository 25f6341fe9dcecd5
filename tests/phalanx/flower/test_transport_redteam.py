"""Red team of GridTransport with a listener: a round it gives up on says how long it waited.

The Grid is the test double that runs the real ClientApp; the transport's clock is a
fake one that moves only when the transport sleeps between polls, so the times below
are exact and no wall-clock time is asserted.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import phalanx.flower.transport as grid_transport
from phalanx.flower.transport import GridTransport
from phalanx.reports import RoundReport
from phalanx.runs import execute_run
from phalanx_clients.app import build_client_app
from tests.support.configs import small_config
from tests.support.fake_grid import NODE_BASE, WithholdingGrid, server_task_identity

RUN_ID = "run-over-a-grid"


@pytest.fixture(autouse=True)
def _server_task_identity() -> Iterator[None]:
    with server_task_identity():
        yield


class FakeClock:
    """``time`` as the transport uses it: a monotonic clock that sleeping moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.mark.timeout(120)
def test_a_round_whose_policy_never_holds_ends_at_the_transports_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # fastest_k waits for all seven workers and node 3 never answers: the transport polls
    # until its timeout. Before the fix the round reported its last arrival (0 s here).
    monkeypatch.setattr(grid_transport, "time", FakeClock())
    config = small_config(
        rounds=1,
        attack={"name": None, "q": 0},
        deployment={"backend": "deployment"},
        collect={"policy": "fastest_k", "k": 7},
    )
    nodes = {w: NODE_BASE + w for w in range(config.assignment.num_workers)}
    grid = WithholdingGrid(build_client_app(), list(nodes.values()), silent=nodes[3])
    json = config.model_dump_json()
    transport = GridTransport(  # type: ignore[arg-type]
        grid, nodes, json, timeout=60.0, poll_interval=1.0, max_poll_interval=1.0
    )
    reports: list[RoundReport] = []

    class ListSink:
        def round_finished(self, report: RoundReport, checkpoint: bytes) -> None:
            reports.append(report)

    execute_run(config, run_id=RUN_ID, sink=ListSink(), transport=transport)
    (report,) = reports
    assert report.metrics["collected_s"] == 60.0
    assert report.metrics["missing_replies"] == 1.0
    assert grid.pulls == 60  # once a second of the fake clock, until the timeout
