"""GridTransport with the real ClientApp, over a test double of Flower's Grid."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from flwr.app import ConfigRecord, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phalanx.config import RunConfig
from phalanx.flower.records import REPLY
from phalanx.flower.transport import GridTransport
from phalanx.reports import RoundReport
from phalanx.runs import execute_run
from phalanx_clients.app import SimulatedWorkers, build_client_app
from tests.support.configs import small_config
from tests.support.fake_grid import (
    NODE_BASE,
    FakeGrid,
    Rewrite,
    WithholdingGrid,
    request_of,
    server_task_identity,
    untouched,
)

RUN_ID = "run-over-a-grid"


@pytest.fixture(autouse=True)
def _server_task_identity() -> Iterator[None]:
    with server_task_identity():
        yield


def run_over_grid(
    config: RunConfig, rewrite: Rewrite = untouched, app: ClientApp | None = None
) -> list[RoundReport]:
    reports: list[RoundReport] = []

    class ListSink:
        def round_finished(self, report: RoundReport, checkpoint: bytes) -> None:
            reports.append(report)

    nodes = {w: NODE_BASE + w for w in range(config.assignment.num_workers)}
    grid = FakeGrid(app or build_client_app(), nodes.values(), rewrite)
    transport = GridTransport(grid, nodes, config.model_dump_json(), poll_interval=0.0)  # type: ignore[arg-type]
    execute_run(config, run_id=RUN_ID, sink=ListSink(), transport=transport)
    return reports


def honest_config(rounds: int = 2) -> RunConfig:
    return small_config(rounds=rounds, attack={"name": None, "q": 0})


def with_fields(victim: int, **changes: Any) -> Rewrite:
    """Rewrite ``victim``'s reply record with ``changes`` (what a Byzantine worker can send)."""

    def rewrite(worker: int, reply: Message) -> Message:
        if worker != victim or reply.has_error():
            return reply
        fields = {**dict(reply.content.config_records[REPLY]), **changes}
        rewritten = Message(RecordDict({REPLY: ConfigRecord(fields)}), reply_to=request_of(reply))
        return rewritten

    return rewrite


@pytest.mark.parametrize(
    "changes",
    [{"node_id": "-1"}, {"node_id": str(2**64)}, {"files": [True]}, {"round": 2**40}],
    ids=["negative-node-id", "node-id-beyond-64-bits", "bool-file", "huge-round"],
)
def test_a_reply_that_once_crashed_the_coordinator_is_refused_and_the_run_finishes(
    changes: dict[str, Any],
) -> None:
    victim = 5
    reports = run_over_grid(honest_config(), with_fields(victim, **changes))
    assert [r.round for r in reports] == [1, 2]
    for report in reports:
        assert report.rejected == (victim,)
        (event,) = report.events
        assert (event.worker, event.kind, event.severity) == (victim, "malformed_reply", "high")


def test_a_clientapp_that_raises_is_a_low_severity_fault_with_one_line() -> None:
    victim = 1
    traceback = 'Traceback (most recent call last):\n  File "/opt/x.py"\nOSError: disk full\n'

    def crash(worker: int, reply: Message) -> Message:
        if worker != victim:
            return reply
        return Message(Error(code=2, reason=traceback), reply_to=request_of(reply))

    reports = run_over_grid(honest_config(), crash)
    for report in reports:
        (event,) = report.events
        assert (event.worker, event.kind, event.severity) == (victim, "worker_error", "low")
        assert event.evidence["reason"] == "OSError: disk full"
        assert report.metrics["update_applied"] == 1.0


def test_every_worker_failing_alike_fails_the_run_naming_the_cause() -> None:
    from phalanx.faults import RunFailedError

    def red_team_that_cannot_load(config: RunConfig) -> None:
        raise ModuleNotFoundError("No module named 'lab_attacks'")

    app = build_client_app(SimulatedWorkers(red_team=red_team_that_cannot_load))
    with pytest.raises(RunFailedError) as failure:
        run_over_grid(honest_config(), app=app)
    assert str(failure.value) == (
        "round 1: 7 of 7 workers failed with the same error: "
        "ModuleNotFoundError: No module named 'lab_attacks'"
    )


@settings(max_examples=15, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(
        st.sampled_from(["worker", "round", "files", "node_id", "payloads", "digests", "nonce"]),
        st.one_of(
            st.integers(min_value=-(2**66), max_value=2**66),
            st.text(max_size=12),
            st.binary(max_size=12),
            st.booleans(),
            st.lists(st.integers(min_value=-(2**66), max_value=2**66), max_size=3),
            st.lists(st.binary(max_size=6), max_size=3),
            st.lists(st.booleans(), max_size=3),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_whatever_a_worker_puts_in_its_reply_the_round_completes_and_records_it(
    changes: dict[str, Any],
) -> None:
    victim = 4
    (report,) = run_over_grid(honest_config(rounds=1), with_fields(victim, **changes))
    others = [e for e in report.events if e.worker != victim]
    assert others == []
    assert victim in report.rejected or victim not in {e.worker for e in report.events}


def deployed_quorum(rounds: int) -> RunConfig:
    return small_config(
        rounds=rounds,
        attack={"name": None, "q": 0},
        deployment={"backend": "deployment"},
        collect={"policy": "quorum", "m": 2},
    )


def run_deployed(config: RunConfig, grid: FakeGrid) -> list[RoundReport]:
    """Run ``config`` over ``grid`` with a transport that would wait up to an hour."""
    nodes = {w: NODE_BASE + w for w in range(config.assignment.num_workers)}
    transport = GridTransport(grid, nodes, config.model_dump_json(), timeout=3600.0)  # type: ignore[arg-type]
    reports: list[RoundReport] = []

    class ListSink:
        def round_finished(self, report: RoundReport, checkpoint: bytes) -> None:
            reports.append(report)

    execute_run(config, run_id=RUN_ID, sink=ListSink(), transport=transport)
    return reports


@pytest.mark.timeout(120)
def test_a_deployed_round_closes_by_its_policy_without_the_node_that_never_answers() -> None:
    # The quorum closes each round once the six answering workers agree, and the Grid
    # is no longer polled.
    nodes = [NODE_BASE + w for w in range(7)]
    grid = WithholdingGrid(build_client_app(), nodes, silent=nodes[3])
    reports = run_deployed(deployed_quorum(2), grid)
    assert [r.metrics["missing_replies"] for r in reports] == [1.0, 1.0]
    assert all(r.flagged == () and r.metrics["accepted_files"] == 7 for r in reports)
    assert grid.pulls == 2  # one pull a round: its replies closed it


class OneRoundBehindGrid(FakeGrid):
    """A grid on which one node's reply comes only once the next round's work went out."""

    def __init__(self, app: ClientApp, nodes: list[int], slow: int) -> None:
        super().__init__(app, nodes)
        self.slow = slow
        self.held: set[str] = set()

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        self.held.clear()  # what was held last round is on its way now
        ids = list(super().push_messages(messages))
        self.held = {i for i in ids if self.replies[i].metadata.src_node_id == self.slow}
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return super().pull_messages([i for i in message_ids if i not in self.held])


@pytest.mark.timeout(120)
def test_a_reply_that_comes_after_its_round_closed_is_counted_late_and_never_judged() -> None:
    nodes = [NODE_BASE + w for w in range(7)]
    reports = run_deployed(
        deployed_quorum(3), OneRoundBehindGrid(build_client_app(), nodes, slow=nodes[3])
    )
    assert [r.metrics["late_from_earlier_rounds"] for r in reports] == [0.0, 1.0, 1.0]
    assert [r.metrics["missing_replies"] for r in reports] == [1.0, 1.0, 1.0]
    assert all(r.flagged == () and r.rejected == () for r in reports)
    # Recorded missing by its round, then late by the next, which heard its reply.
    assert all(x.status == "missing" for r in reports for x in r.responses if x.worker == 3)
    late = [[(x.round, x.worker) for x in r.late_responses] for r in reports]
    assert late == [[], [(1, 3)], [(2, 3)]]
    assert all(x.seconds >= 0 for r in reports for x in r.late_responses)
