"""GridTransport pulls in batches with backoff and keeps at most its window of messages out.

It also streams (asynchronous mode in a deployment): tasks go out while others are
out, and each answer is handed back as it is pulled.

The Grid is the test double that runs the real ClientApp; the transport's clock is a
fake one that moves only when the transport sleeps between pulls, so the waits below
are exact and no wall-clock time is asserted.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from flwr.app import Error, Message

from phalanx.channel import PlainChannel
from phalanx.data import load_dataset
from phalanx.exchange import Stream
from phalanx.flower.transport import GridTransport
from phalanx.nets import flatten_params, init_model
from phalanx.replies import Rejection, Reply, Task
from phalanx_clients.app import build_client_app
from tests.support.clock import FakeClock
from tests.support.configs import small_config
from tests.support.fake_grid import (
    NODE_BASE,
    FakeGrid,
    patched_transport_clock,
    request_of,
    server_task_identity,
)
from tests.support.planned_tasks import planned_task

CONFIG = small_config(attack={"name": None, "q": 0})
NODES = {w: NODE_BASE + w for w in range(CONFIG.assignment.num_workers)}


@pytest.fixture(autouse=True)
def _server_task_identity() -> Iterator[None]:
    with server_task_identity():
        yield


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    return patched_transport_clock(monkeypatch)


class SlowGrid(FakeGrid):
    """A grid whose nodes' replies come out only from a given pull on (never: ``None``).

    It also records how many of the round's messages were out (pushed, reply not yet
    pulled) after every push.
    """

    def __init__(self, ready_at: dict[int, int | None]) -> None:
        super().__init__(build_client_app(), NODES.values())
        self.ready_at = {NODES[w]: pull for w, pull in ready_at.items()}
        self.pulls = 0
        self.out: list[int] = []

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = super().push_messages(messages)
        self.out.append(len(self.replies))
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        self.pulls += 1
        held = set()
        for mid, reply in self.replies.items():
            ready = self.ready_at.get(reply.metadata.src_node_id, 0)
            if ready is None or self.pulls < ready:
                held.add(mid)
        return super().pull_messages([i for i in message_ids if i not in held])


def tasks(workers: Iterable[int] | None = None) -> list[Task]:
    train = load_dataset("digits", "train")
    chosen = range(len(NODES)) if workers is None else workers
    return [planned_task(CONFIG, len(train.y), 1, w) for w in chosen]


def one_node_each(everyone: list[Task]) -> object:
    """The exchange of ``everyone`` with a node per worker and every message out at once."""
    transport = GridTransport(FakeGrid(build_client_app(), NODES.values()), NODES, "{}")  # type: ignore[arg-type]
    transport.run_config_json = CONFIG.model_dump_json()
    return transport.exchange(everyone, downlink())  # type: ignore[arg-type]


def windowed(grid: FakeGrid, node_of_worker: dict[int, int], window: int) -> GridTransport:
    """A transport over ``grid`` with at most ``window`` of a round's messages out."""
    return GridTransport(
        grid,  # type: ignore[arg-type]
        node_of_worker,
        CONFIG.model_dump_json(),
        timeout=10.0,
        window=window,
    )


def downlink() -> object:
    model = init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=CONFIG.seed)
    return PlainChannel(flatten_params(model)).downlink()


def test_the_wait_between_pulls_doubles_to_its_cap_and_starts_over_when_a_reply_comes(
    clock: FakeClock,
) -> None:
    grid = SlowGrid({2: 4, 3: None})
    transport = GridTransport(
        grid,  # type: ignore[arg-type]
        NODES,
        CONFIG.model_dump_json(),
        timeout=1.0,
        poll_interval=0.01,
        max_poll_interval=0.08,
    )

    exchange = transport.exchange(tasks(), downlink())  # type: ignore[arg-type]

    assert sorted(r.worker for r in exchange.replies) == [0, 1, 2, 4, 5, 6]
    # Replies at the first pull and at the fourth; worker 3's never comes.
    waits = [round(p, 6) for p in clock.pauses]
    assert waits[:7] == [0.01, 0.02, 0.04, 0.01, 0.02, 0.04, 0.08]
    assert set(waits[7:]) == {0.08}
    assert transport.pulls == len(waits) < 1.0 / 0.01 / 5  # a fixed 10 ms poll: 100 pulls


@pytest.mark.parametrize("window", [1, 3, 7, 50])
def test_at_most_a_window_of_messages_is_out_and_every_task_is_answered(
    clock: FakeClock, window: int
) -> None:
    everyone = tasks()
    grid = SlowGrid({0: 3, 5: 6})
    transport = windowed(grid, NODES, window)

    exchange = transport.exchange(everyone, downlink())  # type: ignore[arg-type]
    reference: Any = one_node_each(everyone)

    assert max(grid.out) <= window
    assert sorted(r.worker for r in exchange.replies) == list(range(len(NODES)))
    payloads = {r.worker: r.payloads for r in exchange.replies}
    assert payloads == {r.worker: r.payloads for r in reference.replies}
    assert exchange.bytes_down == reference.bytes_down


def test_a_window_below_one_or_a_cap_below_the_first_wait_is_refused() -> None:
    grid = FakeGrid(build_client_app(), NODES.values())
    with pytest.raises(ValueError, match="window must be at least 1"):
        GridTransport(grid, NODES, "{}", window=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="poll_interval <= max_poll_interval"):
        GridTransport(grid, NODES, "{}", poll_interval=0.5, max_poll_interval=0.1)  # type: ignore[arg-type]


class SharedNodesGrid(SlowGrid):
    """:class:`SlowGrid` whose nodes each host several workers; it records each push's nodes."""

    def __init__(self, nodes: list[int]) -> None:
        FakeGrid.__init__(self, build_client_app(), nodes)
        self.ready_at = {nodes[0]: 3}
        self.pulls = 0
        self.out = []
        self.out_by_node: list[dict[int, int]] = []

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = super().push_messages(messages)
        counts: dict[int, int] = {}
        for reply in self.replies.values():
            counts[reply.metadata.src_node_id] = counts.get(reply.metadata.src_node_id, 0) + 1
        self.out_by_node.append(counts)
        return ids


@pytest.mark.parametrize("window", [1, 2, 5])
def test_a_node_hosting_several_workers_has_one_message_out_at_a_time(
    clock: FakeClock, window: int
) -> None:
    everyone = tasks()
    shared = [NODE_BASE + n for n in range(3)]
    node_of_worker = {w: shared[w % 3] for w in NODES}
    grid = SharedNodesGrid(shared)
    transport = windowed(grid, node_of_worker, window)

    exchange = transport.exchange(everyone, downlink())  # type: ignore[arg-type]
    expected: Any = one_node_each(everyone)

    assert all(n <= 1 for counts in grid.out_by_node for n in counts.values())
    assert max(sum(counts.values()) for counts in grid.out_by_node) <= window
    payloads = {r.worker: r.payloads for r in exchange.replies}
    assert payloads == {r.worker: r.payloads for r in expected.replies}


class CrashingGrid(SlowGrid):
    """A grid on which one worker's ClientApp fails on every message (Flower's error reply)."""

    def __init__(self, worker: int) -> None:
        super().__init__({})
        self.crashing = NODES[worker]

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = list(super().push_messages(messages))
        for mid in ids:
            reply = self.replies[mid]
            if reply.metadata.src_node_id == self.crashing:
                error = Error(code=2, reason="Traceback\nOSError: disk full")
                self.replies[mid] = Message(error, reply_to=request_of(reply))
        return ids


def streaming(grid: FakeGrid) -> GridTransport:
    return GridTransport(
        grid,  # type: ignore[arg-type]
        NODES,
        CONFIG.model_dump_json(),
        poll_interval=0.01,
        max_poll_interval=0.08,
    )


def test_answers_come_back_one_pull_at_a_time_while_later_tasks_go_out(clock: FakeClock) -> None:
    grid = SlowGrid({0: 1, 1: 4, 2: None})
    transport = streaming(grid)
    assert isinstance(transport, Stream)
    sent = tasks([0, 1, 2])
    bytes_down = transport.send(sent, downlink())  # type: ignore[arg-type]
    assert bytes_down == 3 * (downlink().num_bytes + len(CONFIG.model_dump_json()))  # type: ignore[attr-defined]

    (first,) = transport.receive(timeout=5.0)
    assert first.task == sent[0] and clock.now == 0.0  # there at the first pull
    assert isinstance(first.outcome, Reply)
    assert first.outcome.worker == 0 and first.outcome.asked == sent[0].files
    # A task sent while others are out; answers come as they are pulled.
    later = tasks([3])
    transport.send(later, downlink())  # type: ignore[arg-type]
    (quick,) = transport.receive(timeout=5.0)
    assert quick.task == later[0] and clock.pauses == []
    (slow,) = transport.receive(timeout=5.0)  # worker 1's, at the fourth pull
    assert slow.task == sent[1] and clock.pauses == [0.01]
    assert slow.seconds == pytest.approx(0.01)


def test_a_task_never_answered_waits_out_the_timeout_and_stays_out(clock: FakeClock) -> None:
    transport = streaming(SlowGrid({2: None}))
    transport.send(tasks([2]), downlink())  # type: ignore[arg-type]
    assert transport.receive(timeout=0.5) == []
    assert clock.now == pytest.approx(0.5)
    assert max(clock.pauses) <= 0.08  # backed off to its cap, never beyond the timeout
    assert transport.receive(timeout=0.2) == []  # still out, still waited for


def test_with_nothing_out_receive_waits_out_its_timeout_without_spinning(
    clock: FakeClock,
) -> None:
    # Attack kept: when every SuperNode is gone the Grid stores no message, and a
    # caller waiting for an answer must sleep, not call receive 500,000 times a second.
    transport = streaming(SlowGrid({}))
    assert transport.receive(timeout=600.0) == []
    assert clock.pauses == [600.0]


def test_a_failed_clientapp_is_its_own_fault_in_one_line(clock: FakeClock) -> None:
    transport = streaming(CrashingGrid(4))
    transport.send(tasks([4, 5]), downlink())  # type: ignore[arg-type]
    outcomes = {a.task.worker: a.outcome for a in transport.receive(timeout=1.0)}
    assert isinstance(outcomes[5], Reply)
    fault = outcomes[4]
    assert isinstance(fault, Rejection)
    assert (fault.worker, fault.kind, fault.reason) == (4, "worker_error", "OSError: disk full")
