"""A test double of Flower's Grid that runs a real ClientApp on each message as it is pushed."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
from flwr.app import Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.supercore.task_identity import TaskIdentity

import phalanx.flower.transport as grid_transport
from tests.support.clock import FakeClock

NODE_BASE = 2**63
"""Flower node ids are unsigned 64-bit: the doubles number their nodes from here."""

Rewrite = Callable[[int, Message], Message]
"""Replaces a reply on its way back, given the index of the node it came from."""


def untouched(worker: int, reply: Message) -> Message:
    return reply


def request_of(reply: Message) -> Message:
    """A stand-in for the request a reply answers (Flower's ``reply_to`` needs one)."""
    request = Message(RecordDict(), dst_node_id=1, message_type="train")
    request.metadata.__dict__["_message_id"] = reply.metadata.reply_to_message_id
    request.metadata.__dict__["_src_node_id"] = reply.metadata.dst_node_id
    return request


def patched_transport_clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """Give the Grid transport a fake clock that moves only when the transport sleeps."""
    fake = FakeClock()
    monkeypatch.setattr(grid_transport, "time", SimpleNamespace(monotonic=fake, sleep=fake.sleep))
    return fake


@contextmanager
def server_task_identity() -> Iterator[None]:
    """Flower stamps instruction messages with the ServerApp's identity; play that process."""
    saved = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 1, 1
    try:
        yield
    finally:
        TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = saved


class FakeGrid:
    """Flower's Grid over ``nodes``, each running ``app`` with a context of its own.

    ``rewrite`` may replace any node's reply (given the node's index in ``nodes``),
    as a Byzantine worker or a broken network could. ``node_configs`` gives a
    node its SuperNode's node config; ``context_node_ids`` makes a node's
    ClientApp believe it runs on another node id (a client answering from
    elsewhere).
    """

    def __init__(
        self,
        app: ClientApp,
        nodes: Iterable[int],
        rewrite: Rewrite = untouched,
        *,
        node_configs: Mapping[int, dict[str, str]] | None = None,
        context_node_ids: Mapping[int, int] | None = None,
    ) -> None:
        self.app = app
        self.rewrite = rewrite
        self.nodes = list(nodes)
        configs = node_configs or {}
        moved = context_node_ids or {}
        self.contexts = {
            node: Context(
                run_id=1,
                node_id=moved.get(node, node),
                node_config=dict(configs.get(node, {})),
                state=RecordDict(),
                run_config={},
            )
            for node in self.nodes
        }
        self.replies: dict[str, Message] = {}

    def get_node_ids(self) -> Iterable[int]:
        return list(self.nodes)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = []
        for message in messages:
            message_id = uuid.uuid4().hex
            message.metadata.__dict__["_message_id"] = message_id
            node = message.metadata.dst_node_id
            reply = self.app(message=message, context=self.contexts[node])
            self.replies[message_id] = self.rewrite(self.nodes.index(node), reply)
            ids.append(message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return [self.replies.pop(i) for i in list(message_ids) if i in self.replies]


class WithholdingGrid(FakeGrid):
    """A grid on which one node's reply never comes back (a vanished SuperNode)."""

    def __init__(self, app: ClientApp, nodes: list[int], silent: int) -> None:
        super().__init__(app, nodes)
        self.silent = silent
        self.pulls = 0

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        self.pulls += 1
        withheld = {i for i, m in self.replies.items() if m.metadata.src_node_id == self.silent}
        return super().pull_messages([i for i in message_ids if i not in withheld])


class FakeLazyGrid(FakeGrid):
    """A grid whose nodes compute a message only when its reply is first pulled.

    So a reply's response time, on the ServerApp's clock, includes the node's compute,
    as on a real SuperNode; the messages of one pull are computed in the order pushed.
    """

    def __init__(self, app: ClientApp, nodes: Iterable[int], **kwargs: object) -> None:
        super().__init__(app, nodes, **kwargs)  # type: ignore[arg-type]
        self.waiting: dict[str, Message] = {}

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = []
        for message in messages:
            message_id = uuid.uuid4().hex
            message.metadata.__dict__["_message_id"] = message_id
            self.waiting[message_id] = message
            ids.append(message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        asked = set(message_ids)
        for message_id in [i for i in self.waiting if i in asked]:
            message = self.waiting.pop(message_id)
            node = message.metadata.dst_node_id
            reply = self.app(message=message, context=self.contexts[node])
            self.replies[message_id] = self.rewrite(self.nodes.index(node), reply)
        return super().pull_messages(asked)
