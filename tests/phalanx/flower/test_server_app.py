"""A deployed run in one process: the one ServerApp's Grid federation, enrolled ClientApps.

The Grid is a test double that runs the real ClientApp (``enrolled_app``'s
handler, each node with its own node config), so these tests cover what the
SuperLink's ServerApp does without starting Flower: seat the approved clients
online, send tasks to their nodes, check each signed node id, record each round.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import EventFilter, RunStatus, events, runs
from phalanx_clients.app import EnrolledWorker, build_client_app
from tests.support.deployment import deployment_config, enrolled_node_configs, execute_on_grid
from tests.support.fake_grid import FakeGrid, server_task_identity

NODES = (2**64 - 3, 17, 2**63 + 5)  # Flower node ids are unsigned 64-bit


@pytest.fixture(autouse=True)
def _server_task_identity() -> Iterator[None]:
    with server_task_identity():
        yield


def _enrolled_nodes(
    sessions: sessionmaker[Session], tmp_path: Path, *, liar: int | None = None
) -> dict[int, dict[str, str]]:
    """Approve one client per node; return each node's node config (key file, client id)."""
    byzantine = {} if liar is None else {liar: "reversed_gradient"}
    return enrolled_node_configs(sessions, tmp_path, NODES, byzantine=byzantine)


def _deploy(
    sessions: sessionmaker[Session], tmp_path: Path, grid: FakeGrid, rounds: int = 2
) -> str:
    return execute_on_grid(
        sessions, deployment_config(rounds=rounds), grid, tmp_path / "checkpoints"
    )


def _events(sessions: sessionmaker[Session], run_id: str) -> list[tuple[int, str, str | None]]:
    with sessions() as session:
        page = events.list_events(session, EventFilter(run_id=run_id), limit=100)
        return sorted((e.round, e.kind, e.client_id) for e in page.items)


def test_the_byzantine_client_is_flagged_every_round_and_the_run_summarised_without_truth(
    sqlite_sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    liar = NODES[1]
    configs = _enrolled_nodes(sqlite_sessions, tmp_path, liar=liar)
    app = build_client_app(EnrolledWorker(environ={}))
    run_id = _deploy(sqlite_sessions, tmp_path, FakeGrid(app, NODES, node_configs=configs))

    with sqlite_sessions() as session:
        run = runs.get_run(session, run_id)
        status, summary = run.status, run.summary or {}
    assert status == RunStatus.SUCCEEDED
    liar_id = configs[liar]["phalanx-client-id"]
    # Round 1's disputes prove it a liar at once; in round 2 it disputes again.
    assert [kind for _, kind, _ in _events(sqlite_sessions, run_id)] == [
        "disputes_across_rounds",
        "outside_max_clique",
    ]
    assert {(r, c) for r, _, c in _events(sqlite_sessions, run_id)} == {(1, liar_id), (2, liar_id)}
    assert summary["backend"] == "deployment" and summary["flagged"] == [liar_id]
    assert (summary["precision"], summary["recall"], summary["adversaries"]) == (None, None, [])


def test_a_client_answering_from_another_node_is_refused_by_the_node_binding(
    sqlite_sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    configs = _enrolled_nodes(sqlite_sessions, tmp_path)
    elsewhere = NODES[2]
    app = build_client_app(EnrolledWorker(environ={}))
    grid = FakeGrid(app, NODES, node_configs=configs, context_node_ids={elsewhere: 99})
    run_id = _deploy(sqlite_sessions, tmp_path, grid, rounds=1)

    client_id = configs[elsewhere]["phalanx-client-id"]
    assert _events(sqlite_sessions, run_id) == [(1, "node_id_mismatch", client_id)]


def test_a_supernode_that_does_not_say_who_it_is_replies_a_fault_naming_the_setting(
    sqlite_sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    configs = _enrolled_nodes(sqlite_sessions, tmp_path)
    anonymous = NODES[0]
    configs[anonymous] = {}
    app = build_client_app(EnrolledWorker(environ={}))
    run_id = _deploy(
        sqlite_sessions, tmp_path, FakeGrid(app, NODES, node_configs=configs), rounds=1
    )

    with sqlite_sessions() as session:
        (event,) = events.list_events(session, EventFilter(run_id=run_id), limit=10).items
        assert (event.kind, event.severity.value) == ("worker_error", "low")
        assert "phalanx-client-id (or $PHALANX_CLIENT_ID)" in event.evidence["reason"]
        assert runs.get_run(session, run_id).status == RunStatus.SUCCEEDED
