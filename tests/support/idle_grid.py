"""A test double of Flower's Grid with a fixed set of connected nodes that never answers."""

from __future__ import annotations

from collections.abc import Iterable

from flwr.app import Message, RecordDict
from flwr.serverapp import Grid
from flwr.supercore.run import Run


class IdleGrid(Grid):
    """Connected ``nodes`` that store no message and send no reply; pulls are counted."""

    def __init__(self, nodes: Iterable[int] = ()) -> None:
        self.nodes = list(nodes)
        self.pulls = 0

    def set_run(self, run: Run) -> None:
        raise NotImplementedError

    @property
    def run(self) -> Run:
        raise NotImplementedError

    def create_message(
        self,
        content: RecordDict,
        message_type: str,
        dst_node_id: int,
        group_id: str,
        ttl: float | None = None,
    ) -> Message:
        raise NotImplementedError

    def get_node_ids(self) -> Iterable[int]:
        return list(self.nodes)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        return ["" for _ in messages]  # "": not stored

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        self.pulls += 1
        return []

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        return []
