"""Admission across polls: a SuperLink out of reach for a moment does not shut a client out."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from phalanx.flower.deployment.backend import DeploymentBackend
from phalanx.flower.deployment.control import (
    PUBLIC_KEY_IN_USE,
    ControlError,
    FlowerControl,
    SuperLinkConnection,
)
from phalanx.identity import PublicKey
from phalanx.store import clients
from tests.support.deployment import add_client


class FlakyControl(FlowerControl):
    """A test double of the Control API: answers each registration as scripted, in turn."""

    def __init__(self, home: Path, answers: list[str | int]) -> None:
        super().__init__(SuperLinkConnection("127.0.0.1:9", home / "ca.pem"), home)
        self.answers = answers

    def register_supernode(self, public_key: PublicKey, *, name: str | None = None) -> int:
        answer = self.answers.pop(0)
        if isinstance(answer, str):
            raise ControlError(["supernode", "register"], answer)
        return answer


def _node_id(sessions: sessionmaker[Session], client_id: str) -> int | None:
    with sessions() as session:
        return clients.get_client(session, client_id).flower_node_id


def test_a_client_the_superlink_could_not_hear_is_admitted_once_it_can(
    sqlite_sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    client_id, _ = add_client(sqlite_sessions, "edge")
    down = "failed to connect to all addresses; last error: Connection refused"
    control = FlakyControl(tmp_path, [down, down, 7])
    lines: list[str] = []
    backend = DeploymentBackend(sqlite_sessions, control, tmp_path, report=lines.append)

    assert [backend.admit() for _ in range(3)] == [False, False, True]

    assert _node_id(sqlite_sessions, client_id) == 7
    assert lines == [
        f"client {client_id} not admitted: the SuperLink refused client {client_id}: "
        f"`flwr supernode register` failed: {down}",
        f"client {client_id} admitted to the SuperLink as node 7",
    ]


def test_a_key_the_superlink_knows_already_is_refused_once_and_not_tried_again(
    sqlite_sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    client_id, _ = add_client(sqlite_sessions, "reinstated")
    control = FlakyControl(tmp_path, [PUBLIC_KEY_IN_USE])
    lines: list[str] = []
    backend = DeploymentBackend(sqlite_sessions, control, tmp_path, report=lines.append)

    # The client is not tried again (the script has no second answer), nor is it admitted.
    assert [backend.admit() for _ in range(3)] == [False, False, False]

    assert _node_id(sqlite_sessions, client_id) is None
    assert len(lines) == 1 and "enroll a new key" in lines[0]
