"""Partial work in a deployed run in one process: one message per file, and compute budgets.

The Grid is the test double that runs the real enrolled ClientApp on every message
(``tests.support.fake_grid``), so the coordinator's side (tasks cut into one message
per file, each reply checked against its own message, budgets in the tasks, cut
files withdrawn) and the worker's (files computed in order, timed, cut at a file
boundary, a budget spanning a round's messages in the node's state) meet as in a
deployment. A node made a slow device (``phalanx-slow-compute-s``) takes 1 s
longer per file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from flwr.app import Message, RecordDict
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from phalanx.agreement_record import AgreementRecord
from phalanx.config import RunConfig
from phalanx.store import EventFilter, RunStatus, events, rounds, runs
from phalanx.store.models import WorkerResponseRow
from phalanx_clients.app import EnrolledWorker, build_client_app
from tests.support.deployment import deployment_config, enrolled_node_configs, execute_on_grid
from tests.support.fake_grid import FakeGrid, FakeLazyGrid, server_task_identity

NODES = (2**64 - 3, 17, 2**63 + 5)
SLOW_S = 1.0
BUDGET_S = 1.5  # one slow file fits, two do not


@pytest.fixture(autouse=True)
def _server_task_identity() -> Iterator[None]:
    with server_task_identity():
        yield


class FakeCountingGrid(FakeGrid):
    """The Grid double, counting the task messages pushed to each node."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.pushed: dict[int, int] = {}

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        messages = list(messages)
        for message in messages:
            node = message.metadata.dst_node_id
            self.pushed[node] = self.pushed.get(node, 0) + 1
        return super().push_messages(messages)


def _nodes(
    sessions: sessionmaker[Session],
    tmp_path: Path,
    *,
    liar: int | None = None,
    slow: int | None = None,
) -> dict[int, dict[str, str]]:
    """Approve one client per node; return each node's node config."""
    return enrolled_node_configs(
        sessions,
        tmp_path,
        NODES,
        byzantine={} if liar is None else {liar: "reversed_gradient"},
        slow_compute_s={} if slow is None else {slow: SLOW_S},
    )


def _config(rounds: int, **collect: object) -> RunConfig:
    base = deployment_config(rounds=rounds).model_dump(mode="json")
    return RunConfig.model_validate({**base, "collect": collect})


def _events(sessions: sessionmaker[Session], run_id: str) -> list[tuple[int, str, str | None]]:
    with sessions() as session:
        page = events.list_events(session, EventFilter(run_id=run_id), limit=100)
        return sorted((e.round, e.kind, e.client_id) for e in page.items)


def _succeeded(sessions: sessionmaker[Session], run_id: str) -> None:
    with sessions() as session:
        run = runs.get_run(session, run_id)
        assert run.status == RunStatus.SUCCEEDED, run.error


def test_one_message_per_file_carries_every_file_and_the_liar_is_still_flagged(
    sqlite_sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    liar = NODES[1]
    configs = _nodes(sqlite_sessions, tmp_path, liar=liar)
    grid = FakeCountingGrid(
        build_client_app(EnrolledWorker(environ={})), NODES, node_configs=configs
    )
    run_id = execute_on_grid(
        sqlite_sessions, _config(2, messages="per_file"), grid, tmp_path / "checkpoints"
    )

    _succeeded(sqlite_sessions, run_id)
    # Two files per worker and round: two messages per node and round, each answered alone.
    assert grid.pushed == dict.fromkeys(NODES, 4)
    liar_id = configs[liar]["phalanx-client-id"]
    # Replicas of each file compared as in one reply: the same verdicts.
    assert _events(sqlite_sessions, run_id) == [
        (1, "disputes_across_rounds", liar_id),
        (2, "outside_max_clique", liar_id),
    ]
    with sqlite_sessions() as session:
        recorded = rounds.list_rounds(session, run_id)
    assert [r.metrics["update_applied"] for r in recorded] == [1.0, 1.0]


@pytest.mark.parametrize("messages", ["per_reply", "per_file"])
def test_a_budget_cuts_a_slow_nodes_files_at_a_boundary_and_blames_nobody(
    sqlite_sessions: sessionmaker[Session], tmp_path: Path, messages: str
) -> None:
    slow = NODES[2]
    configs = _nodes(sqlite_sessions, tmp_path, slow=slow)
    # Eager: each node computes while the messages are still being pushed, before the
    # transport's clock starts (a slow push); its cut is still no early cut.
    grid = FakeGrid(build_client_app(EnrolledWorker(environ={})), NODES, node_configs=configs)
    config = _config(2, messages=messages, drop_compute=True, compute_budget_s=BUDGET_S)
    run_id = execute_on_grid(sqlite_sessions, config, grid, tmp_path / "checkpoints")

    _succeeded(sqlite_sessions, run_id)
    with sqlite_sessions() as session:
        recorded = rounds.list_rounds(session, run_id)
        responses = list(
            session.scalars(select(WorkerResponseRow).where(WorkerResponseRow.run_id == run_id))
        )
    # The slow node finishes its first file within the budget, not its second: it sends
    # the first alone, every round; the fast ones send both.
    assert [r.metrics["files_cut"] for r in recorded] == [1.0, 1.0]
    assert [r.metrics["compute_budget_s"] for r in recorded] == [BUDGET_S, BUDGET_S]
    assert [r.metrics["accepted_files"] for r in recorded] == [3.0, 3.0]
    slow_id = configs[slow]["phalanx-client-id"]
    assert {r.status for r in responses if r.client_id == slow_id} == {"kept"}
    # Cut is neither a lie nor a fault.
    assert _events(sqlite_sessions, run_id) == []


def test_with_the_codec_a_rounds_later_messages_find_the_model_already_there(
    sqlite_sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    configs = _nodes(sqlite_sessions, tmp_path)
    grid = FakeCountingGrid(
        build_client_app(EnrolledWorker(environ={})), NODES, node_configs=configs
    )
    base = _config(3, messages="per_file").model_dump(mode="json")
    config = RunConfig.model_validate({**base, "codec": {"enabled": True}})
    run_id = execute_on_grid(sqlite_sessions, config, grid, tmp_path / "checkpoints")

    _succeeded(sqlite_sessions, run_id)
    # No message asked for the model again: each node's second message of a round found
    # the delta its first one applied (a resync would push more messages).
    assert grid.pushed == dict.fromkeys(NODES, 6)
    assert _events(sqlite_sessions, run_id) == []


def test_the_automatic_budget_is_chosen_from_the_compute_times_deployed_workers_report(
    sqlite_sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    slow = NODES[2]
    configs = _nodes(sqlite_sessions, tmp_path, slow=slow)
    grid = FakeLazyGrid(build_client_app(EnrolledWorker(environ={})), NODES, node_configs=configs)
    config = _config(2, drop_compute=True, warmup_rounds=1)
    run_id = execute_on_grid(sqlite_sessions, config, grid, tmp_path / "checkpoints")

    _succeeded(sqlite_sessions, run_id)
    with sqlite_sessions() as session:
        first, second = rounds.list_rounds(session, run_id)
    # Round 1 measures (no budget, nothing cut): the slow node's files take 1 s each,
    # the others' milliseconds. Waiting for the slow node's files is not worth it: the
    # budget chosen for round 2 stops before its first file, which round 2 cuts.
    assert (first.metrics["compute_budget_s"], first.metrics["files_cut"]) == (-1.0, 0.0)
    assert 0 < second.metrics["compute_budget_s"] < SLOW_S
    assert second.metrics["files_cut"] >= 2
    assert _events(sqlite_sessions, run_id) == []


class FakeForgetfulGrid(FakeCountingGrid):
    """The counting Grid double on which one node loses its state before round 2."""

    def __init__(self, *args: object, forgets: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.forgets = forgets
        self.forgotten = False

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        messages = list(messages)
        if not self.forgotten and any(m.metadata.group_id == "2" for m in messages):
            self.contexts[self.forgets].state = RecordDict()
            self.forgotten = True
        return super().push_messages(messages)


def test_a_node_that_lost_the_model_is_sent_again_the_messages_that_asked(
    sqlite_sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    forgets = NODES[0]
    configs = _nodes(sqlite_sessions, tmp_path)
    app = build_client_app(EnrolledWorker(environ={}))
    grid = FakeForgetfulGrid(app, NODES, node_configs=configs, forgets=forgets)
    base = _config(2, messages="per_file").model_dump(mode="json")
    config = RunConfig.model_validate({**base, "codec": {"enabled": True}})
    run_id = execute_on_grid(sqlite_sessions, config, grid, tmp_path / "checkpoints")

    _succeeded(sqlite_sessions, run_id)
    # Round 2: its two messages ask for the model; both go again with it, once each.
    assert grid.pushed == {**dict.fromkeys(NODES, 4), forgets: 6}
    assert _events(sqlite_sessions, run_id) == []
    with sqlite_sessions() as session:
        stored = rounds.get_agreement(session, run_id, 2)
    assert stored is not None and set(AgreementRecord.from_dict(stored).replied) == {0, 1, 2}
