"""Each signed reply is bound to the Flower node its task went to; a mismatch is an event."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
import torch
from torch import Tensor

from phalanx.channel import Downlink
from phalanx.data import load_dataset
from phalanx.data_mode import ModelShape
from phalanx.exchange import Arrival, Exchange, Listener
from phalanx.federated_evaluation import EvaluationExchange, EvaluationReport, EvaluationTask
from phalanx.flower.deployment.binding import (
    NODE_ID_MISMATCH,
    NodeBindingTransport,
    node_binding_problem,
)
from phalanx.identity import PrivateKey, generate_private_key, sign_reply
from phalanx.replies import Rejection, Reply, Task
from phalanx.reports import RoundReport
from phalanx.roster import Member
from phalanx.runs.executor import build_coordinator
from phalanx_clients.inprocess import InProcessTransport
from phalanx_clients.worker import Worker
from tests.support.deployment import deployment_config

NODE = 2**64 - 5  # beyond a signed 64-bit integer, as Flower's node ids may be
OTHER_NODE = 2**63 + 17


def _signed(key: PrivateKey, *, node_id: int | None, client_id: str = "c-1") -> Reply:
    fields = {
        "run_id": "r",
        "round": 1,
        "nonce": "n",
        "client_id": client_id,
        "file_ids": (0,),
        "digests": ("d",),
    }
    signature = sign_reply(key, node_id=node_id, **fields)  # type: ignore[arg-type]
    return Reply(0, client_id, "r", 1, "n", (0,), (b"p",), ("d",), signature, node_id=node_id)


@pytest.fixture
def key() -> PrivateKey:
    return generate_private_key()


def test_a_reply_signed_for_its_own_node_is_bound(key: PrivateKey) -> None:
    member = Member(0, "c-1", key.public_key())
    assert node_binding_problem(_signed(key, node_id=NODE), member, NODE) is None


def test_a_reply_signed_for_another_node_is_a_mismatch(key: PrivateKey) -> None:
    member = Member(0, "c-1", key.public_key())
    problem = node_binding_problem(_signed(key, node_id=OTHER_NODE), member, NODE)
    assert problem is not None
    assert str(OTHER_NODE) in problem and str(NODE) in problem


def test_a_reply_that_binds_no_node_is_a_mismatch(key: PrivateKey) -> None:
    member = Member(0, "c-1", key.public_key())
    problem = node_binding_problem(_signed(key, node_id=None), member, NODE)
    assert problem is not None and "no Flower node id" in problem


def test_a_forged_signature_is_left_for_the_coordinator_to_call_bad(key: PrivateKey) -> None:
    member = Member(0, "c-1", generate_private_key().public_key())
    assert node_binding_problem(_signed(key, node_id=OTHER_NODE), member, NODE) is None


class FakeTransport:
    """Returns fixed replies (a test double of the Grid transport)."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = replies

    def exchange(
        self, tasks: Sequence[Task], downlink: Downlink, listener: Listener | None = None
    ) -> Exchange:
        for reply in self.replies:
            if listener is not None:
                listener.arrived(reply, 1.0)
        return Exchange(replies=self.replies, bytes_down=7)


class HeardReplies:
    """A listener that notes what it hears (a test double of the coordinator's intake)."""

    def __init__(self) -> None:
        self.heard: list[int] = []
        self.failures: list[int] = []

    def arrived(self, reply: Reply, seconds: float) -> None:
        self.heard.append(reply.worker)

    def failed(self, worker: int, seconds: float, files: Sequence[int] | None = None) -> None:
        self.failures.append(worker)

    def closed(self, seconds: float) -> bool:
        return False


def test_the_transport_turns_a_mismatch_into_a_rejection_and_keeps_the_rest(
    key: PrivateKey,
) -> None:
    other_key = generate_private_key()
    honest = dataclasses.replace(_signed(other_key, node_id=OTHER_NODE, client_id="c-2"), worker=1)
    liar = _signed(key, node_id=OTHER_NODE)
    members = {0: Member(0, "c-1", key.public_key()), 1: Member(1, "c-2", other_key.public_key())}
    bound = NodeBindingTransport(FakeTransport([liar, honest]), members, {0: NODE, 1: OTHER_NODE})
    exchange = bound.exchange([], Downlink(kind="full", target=""))
    assert exchange.replies == [honest]
    assert [(r.worker, r.kind) for r in exchange.malformed] == [(0, NODE_ID_MISMATCH)]
    assert exchange.bytes_down == 7


def test_a_reply_on_the_wrong_node_is_never_heard_by_the_round_s_policy(key: PrivateKey) -> None:
    # A quorum counts what its listener hears: a reply that fails the binding must not
    # close a file before the coordinator refuses it.
    other_key = generate_private_key()
    honest = dataclasses.replace(_signed(other_key, node_id=OTHER_NODE, client_id="c-2"), worker=1)
    liar = _signed(key, node_id=OTHER_NODE)
    members = {0: Member(0, "c-1", key.public_key()), 1: Member(1, "c-2", other_key.public_key())}
    bound = NodeBindingTransport(FakeTransport([liar, honest]), members, {0: NODE, 1: OTHER_NODE})
    listener = HeardReplies()
    bound.exchange([], Downlink(kind="full", target=""), listener)
    assert listener.heard == [1] and listener.failures == [0]


class FakeStreamingTransport:
    """Hands back fixed answers as streamed (a test double of the Grid transport's stream)."""

    def __init__(self, arrivals: list[Arrival]) -> None:
        self.arrivals = arrivals
        self.sent: list[Task] = []

    def now(self) -> float:
        return 3.0

    def send(self, tasks: Sequence[Task], downlink: Downlink) -> int:
        self.sent.extend(tasks)
        return 11

    def receive(self, timeout: float) -> list[Arrival]:
        return self.arrivals


def test_a_streamed_reply_on_the_wrong_node_is_refused_as_a_mismatch(key: PrivateKey) -> None:
    # Asynchronous mode in a deployment streams its answers: the binding holds there too.
    other_key = generate_private_key()
    honest = dataclasses.replace(_signed(other_key, node_id=OTHER_NODE, client_id="c-2"), worker=1)
    liar = _signed(key, node_id=OTHER_NODE)
    task = Task("r", 1, "n", 0, (0,))
    fault = Rejection(2, "worker_error", "OSError: disk full")
    inner = FakeStreamingTransport(
        [Arrival(task, liar, 1.5), Arrival(task, honest, 2.5), Arrival(task, fault, 0.5)]
    )
    members = {0: Member(0, "c-1", key.public_key()), 1: Member(1, "c-2", other_key.public_key())}
    bound = NodeBindingTransport(inner, members, {0: NODE, 1: OTHER_NODE})
    assert bound.send([task], Downlink(kind="full", target="")) == 11
    assert inner.sent == [task] and bound.now() == 3.0
    first, second, third = bound.receive(timeout=1.0)
    assert isinstance(first.outcome, Rejection)
    assert (first.outcome.worker, first.outcome.kind) == (0, NODE_ID_MISMATCH)
    assert (first.task, first.seconds) == (task, 1.5)
    assert second.outcome == honest and third.outcome == fault


def test_a_transport_that_cannot_stream_says_so() -> None:
    bound = NodeBindingTransport(FakeTransport([]), {}, {})
    with pytest.raises(TypeError, match="FakeTransport cannot stream tasks"):
        bound.receive(timeout=1.0)


class FakeSink:
    """Keeps rounds in memory (a test double of the database)."""

    def __init__(self) -> None:
        self.reports: list[RoundReport] = []

    def round_finished(self, report: RoundReport, checkpoint: bytes) -> None:
        self.reports.append(report)


def test_the_coordinator_records_a_client_on_the_wrong_node_as_a_high_severity_event() -> None:
    config = deployment_config()
    train = load_dataset("digits", "train")
    keys = [generate_private_key() for _ in range(3)]
    node_of_worker = {0: 11, 1: 2**63, 2: NODE}
    members = {w: Member(w, f"client-{w}", keys[w].public_key()) for w in range(3)}
    signed_node = {0: 11, 1: 2**63, 2: OTHER_NODE}  # worker 2 runs on a node it was not admitted on
    workers = {
        w: Worker(config, train, f"client-{w}", keys[w], node_id=signed_node[w]) for w in range(3)
    }
    bound = NodeBindingTransport(InProcessTransport(workers), members, node_of_worker)
    sink = FakeSink()
    build_coordinator(config, "run-1", bound, sink, members=members).run()
    (report,) = sink.reports
    assert report.rejected == (2,)
    assert [(e.worker, e.client_id, e.kind, e.severity) for e in report.events] == [
        (2, "client-2", NODE_ID_MISMATCH, "high")
    ]


class FakeEvaluatingTransport(FakeTransport):
    """Also answers evaluation tasks with fixed reports (a test double of the Grid transport)."""

    def evaluate(self, tasks: Sequence[EvaluationTask], weights: Tensor) -> EvaluationExchange:
        return EvaluationExchange([EvaluationReport(t.worker, 0.5, 0.9, 10) for t in tasks])


def test_federated_evaluation_goes_through_or_fails_every_task_in_words() -> None:
    tasks = [EvaluationTask("run", 1, "n", w, ModelShape(1, 8, 10)) for w in (0, 1)]
    through = NodeBindingTransport(FakeEvaluatingTransport([]), {}, {})
    assert [r.worker for r in through.evaluate(tasks, torch.zeros(3)).reports] == [0, 1]

    without = NodeBindingTransport(FakeTransport([]), {}, {}).evaluate(tasks, torch.zeros(3))
    assert without.reports == ()
    assert [(f.worker, f.kind) for f in without.failures] == [
        (0, "worker_error"),
        (1, "worker_error"),
    ]
    assert "cannot ask workers to evaluate" in without.failures[0].reason
