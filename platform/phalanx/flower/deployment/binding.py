"""Binding each signed reply to the Flower node it came from.

A deployed worker signs its Flower node id into every reply
(:func:`phalanx.identity.sign_reply`), so a reply proves which client answered
*and* on which SuperNode it ran. The coordinator already verifies the
signature with the client's registered key; :class:`NodeBindingTransport`
adds the deployment check: the node id the client signed must be the node the
task was sent to, i.e. the node the SuperLink admitted the client under. A
reply that fails it is refused and recorded as a ``node_id_mismatch``
detection event (severity high); the round goes on without it. Streamed answers
(asynchronous mode) are checked alike.

A reply whose signature does not verify is left alone here: the coordinator
rejects it as ``bad_signature``, the more precise finding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from torch import Tensor

from phalanx.channel import Downlink
from phalanx.event_kinds import EventKind
from phalanx.exchange import Arrival, Exchange, Listener, Stream, Transport
from phalanx.federated_evaluation import EvaluationExchange, EvaluationTask, FederatedEvaluator
from phalanx.identity import IdentityError, verify_reply
from phalanx.replies import Rejection, Reply, Task
from phalanx.roster import Member

__all__ = ["NODE_ID_MISMATCH", "NodeBindingTransport", "node_binding_problem"]

NODE_ID_MISMATCH = "node_id_mismatch"


def node_binding_problem(reply: Reply, member: Member, node_id: int) -> str | None:
    """Why ``reply`` is not bound to Flower node ``node_id``, or ``None`` when it is.

    Parameters
    ----------
    reply : Reply
        As the transport received it.
    member : Member
        The worker's registered identity.
    node_id : int
        The node the worker's task was sent to.

    Returns
    -------
    str or None
        The reason for a ``node_id_mismatch`` event; ``None`` when the reply
        binds ``node_id``, or when its signature does not verify at all (a
        ``bad_signature`` for the coordinator to record).
    """
    try:
        signed = verify_reply(
            member.public_key,
            reply.signature,
            run_id=reply.run_id,
            round=reply.round,
            nonce=reply.nonce,
            client_id=reply.client_id,
            file_ids=reply.files,
            digests=reply.digests,
            node_id=reply.node_id,
            num_samples=reply.num_samples,
            samples=reply.samples,
        )
    except IdentityError:
        return None  # malformed fields: the coordinator's checks name them
    if not signed or reply.node_id == node_id:
        return None
    if reply.node_id is None:
        return f"client {reply.client_id} signed no Flower node id; its task went to node {node_id}"
    return (
        f"client {reply.client_id} signed Flower node {reply.node_id}, "
        f"but its task went to node {node_id}, the node it was admitted under"
    )


class NodeBindingTransport:
    """Wraps a transport; refuses replies whose signed node id is not the task's node.

    Parameters
    ----------
    inner : Transport
        Carries the tasks (the Grid transport in deployment).
    members : Mapping[int, Member]
        Worker index -> registered identity.
    node_of_worker : Mapping[int, int]
        Worker index -> Flower node id its tasks go to.
    """

    def __init__(
        self,
        inner: Transport,
        members: Mapping[int, Member],
        node_of_worker: Mapping[int, int],
    ) -> None:
        self.inner = inner
        self.members = dict(members)
        self.node_of_worker = dict(node_of_worker)

    def exchange(
        self, tasks: Sequence[Task], downlink: Downlink, listener: Listener | None = None
    ) -> Exchange:
        """Exchange through the inner transport, then check every reply's node binding.

        A ``listener`` hears only of replies bound to their node: one that is not must
        not close a file or a round.
        """
        bound = None if listener is None else _BoundOnly(listener, self._problem)
        exchange = self.inner.exchange(tasks, downlink, bound)
        kept: list[Reply] = []
        refused = list(exchange.malformed)
        for reply in exchange.replies:
            problem = self._problem(reply)
            if problem is None:
                kept.append(reply)
            else:
                refused.append(Rejection(reply.worker, NODE_ID_MISMATCH, problem))
        return Exchange(
            replies=kept, bytes_down=exchange.bytes_down, malformed=refused, late=exchange.late
        )

    def now(self) -> float:
        """Return the inner stream's clock."""
        return self._stream().now()

    def send(self, tasks: Sequence[Task], downlink: Downlink) -> int:
        """Stream ``tasks`` through the inner transport."""
        return self._stream().send(tasks, downlink)

    def receive(self, timeout: float) -> list[Arrival]:
        """Return the inner stream's answers, each reply not bound to its node refused."""
        arrivals = []
        for arrival in self._stream().receive(timeout):
            outcome = arrival.outcome
            if isinstance(outcome, Reply):
                problem = self._problem(outcome)
                if problem is not None:
                    outcome = Rejection(outcome.worker, NODE_ID_MISMATCH, problem)
            arrivals.append(Arrival(arrival.task, outcome, arrival.seconds))
        return arrivals

    def _stream(self) -> Stream:
        if not isinstance(self.inner, Stream):
            raise TypeError(f"{type(self.inner).__name__} cannot stream tasks")
        return self.inner

    def evaluate(self, tasks: Sequence[EvaluationTask], weights: Tensor) -> EvaluationExchange:
        """Federated evaluation through the inner transport (reports carry no signature).

        An inner transport that cannot evaluate gives every task a failure.
        """
        if isinstance(self.inner, FederatedEvaluator):
            return self.inner.evaluate(tasks, weights)
        cause = f"{type(self.inner).__name__} cannot ask workers to evaluate"
        return EvaluationExchange(
            reports=(), failures=[Rejection(t.worker, EventKind.WORKER_ERROR, cause) for t in tasks]
        )

    def _problem(self, reply: Reply) -> str | None:
        """Why ``reply`` is not bound to its worker's node, or ``None`` when it is."""
        member = self.members.get(reply.worker)
        node_id = self.node_of_worker.get(reply.worker)
        if member is None or node_id is None:
            return None
        return node_binding_problem(reply, member, node_id)


@dataclass(frozen=True)
class _BoundOnly:
    """A listener that hears only of the replies bound to their node (others failed)."""

    listener: Listener
    problem: Callable[[Reply], str | None]

    def arrived(self, reply: Reply, seconds: float) -> None:
        if self.problem(reply) is None:
            self.listener.arrived(reply, seconds)
        else:
            self.listener.failed(reply.worker, seconds, reply.asked)

    def failed(self, worker: int, seconds: float, files: Sequence[int] | None = None) -> None:
        self.listener.failed(worker, seconds, files)

    def closed(self, seconds: float) -> bool:
        return self.listener.closed(seconds)
