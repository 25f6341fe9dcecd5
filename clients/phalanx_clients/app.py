"""The Phalanx ClientApp: one train handler for every worker; who the worker is, is a parameter.

Two identity sources, one handler (:func:`build_client_app`):

- :class:`SimulatedWorkers` (:data:`app`): each worker's identity is derived from
  the run id and its index (:func:`phalanx.roster.simulated_identity`), and the run
  config's ``attack`` section decides who lies. ``flwr run .`` and Flower's
  simulation engine load this app.
- :class:`EnrolledWorker` (:data:`enrolled_app`): a deployed client that registered
  its own EC key over REST. Its SuperNode authenticates to the SuperLink with that
  key, and this app signs every reply with it too, binding the Flower node id the
  SuperLink knows it by (``context.node_id``) into the signature. Who it is comes
  from the SuperNode's node config, or the environment
  (:class:`~phalanx.flower.deployment.node_config.NodeIdentity`). For red-team
  demonstrations, ``phalanx-byzantine=ATTACK`` (or ``PHALANX_BYZANTINE=ATTACK``)
  makes it lie on every file it is given, and ``phalanx-delay-s=SECONDS`` makes
  it answer that late (a straggler on purpose), and ``phalanx-slow-compute-s=SECONDS``
  makes each file take that much longer to compute (a slow device on purpose); the
  coordinator knows nothing of any of them.
  The deployment's Flower app (:mod:`phalanx.flower.deployment.flower_app`) names it.

Federated evaluation (local data, ``data.local.evaluate_every``) has its own handler:
the worker evaluates the global weights it is sent on its local test split and
reports loss, accuracy and count (:meth:`~phalanx_clients.worker.Worker.evaluate`).

A worker whose own code or data fails replies with a fault (``fault_content``),
never a crash: the coordinator records it as that worker's fault.

With local data (``data.mode = "local"``), a simulated worker's data is its part of
the run's seeded partition of the dataset (:mod:`phalanx.local_data`), the same
part whichever process derives it. A deployed client trains on the data its own
node config names (``data-path``, :mod:`phalanx.node_data`) and nothing else: the
run's dataset name, which the coordinator sends, is never read by it then, so
nothing the coordinator sends chooses a file on the client's machine. A node that
names no data, or whose data is unreadable, replies with a fault of its own; one
whose data does not fit the run's model, with a ``data_mismatch`` fault.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from phalanx.channel import Downlink
from phalanx.config import RunConfig
from phalanx.data import ImageDataset, load_dataset
from phalanx.faults import is_interrupt
from phalanx.flower.deployment.node_config import BYZANTINE_KEY, NodeConfigError, NodeIdentity
from phalanx.flower.evaluation_records import evaluation_content, read_evaluation_task
from phalanx.flower.records import (
    BATCH_TYPE,
    batch_reply_content,
    fault_content,
    read_batch,
    read_task,
    reply_content,
)
from phalanx.identity import PrivateKey, load_private_key_file
from phalanx.local_data import client_data, run_partition
from phalanx.node_data import load_node_data
from phalanx.partitions import Partition
from phalanx.replies import Task
from phalanx.roster import simulated_identity
from phalanx_clients.behaviour import Behaviour, RedTeam, byzantine_behaviour
from phalanx_clients.worker import Worker

__all__ = [
    "REPLICA_STATE",
    "EnrolledWorker",
    "IdentitySource",
    "SimulatedWorkers",
    "WorkerIdentity",
    "app",
    "build_client_app",
    "enrolled_app",
    "state_key",
]

RedTeamFactory = Callable[[RunConfig], RedTeam | None]
REPLICA_STATE = "phalanx.replica"
"""Node state: a worker's copy of the global model (and its codec's history)."""
COMPUTE_STATE = "phalanx.compute"
"""Node state: the round a compute budget is being spent on, and the seconds spent."""


BATCH_ACTION = BATCH_TYPE.removeprefix("train.")
"""The train action that answers a batch (:func:`~phalanx.flower.records.batch_content`)."""


def state_key(name: str, worker: int) -> str:
    """Return the node-state key of worker ``worker``'s ``name``.

    Keyed by worker, since a node of Flower's simulation may host several workers
    (:class:`~phalanx.flower.simulation.SimulationEngine`'s ``nodes``); a deployed
    node is one client, and its key names the worker it is in the run.
    """
    return f"{name}.{worker}"


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerIdentity:
    """Who answers a task: client id, signing key, Flower node (when bound) and behaviour.

    ``own_data``: a deployed client, which trains on local-data tasks on what its node
    config names (``data_path``, ``None`` when it names nothing), never on a part of
    the run's dataset.
    """

    client_id: str
    private_key: PrivateKey
    node_id: int | None = None
    behaviour: Behaviour | None = None
    delay_s: float = 0.0
    slow_compute_s: float = 0.0
    own_data: bool = False
    data_path: str | None = None


class IdentitySource(Protocol):
    """Says who the worker answering ``task`` is, in this ClientApp's ``context``."""

    def __call__(self, task: Task, config: RunConfig, context: Context) -> WorkerIdentity:
        """Return the worker's identity; raise when it cannot be known."""
        ...


TEAMS_KEPT = 4
"""Runs whose red team a ClientApp process keeps built at once."""


def _red_team(config: RunConfig) -> RedTeam | None:
    """Build the config's red team; it reads the run's training split from this process's cache."""
    return RedTeam.from_config(
        config, train_data=lambda c: _train_set(c.data.dataset, c.data.num_classes)
    )


@dataclass(frozen=True)
class SimulatedWorkers:
    """Identities derived from the run id and worker index; the config's red team lies.

    The red team is built once per run config (keyed by the digest of the config's
    JSON; the :data:`TEAMS_KEPT` most recently used are kept), not once per message:
    it also keeps the round plans its adversaries derive.

    Parameters
    ----------
    red_team : callable
        Maps the run config to its red team (``None``: every worker honest).
        The default reads the ``attack`` section; on local data its reference crowd
        reads the run's training split this process holds for its workers.
    """

    red_team: RedTeamFactory = _red_team
    _teams: OrderedDict[str, RedTeam | None] = field(
        default_factory=OrderedDict, init=False, repr=False, compare=False, hash=False
    )

    def team_of(self, config: RunConfig) -> RedTeam | None:
        """Return the red team of ``config``'s run, built on the first message of the run."""
        key = hashlib.sha256(config.model_dump_json().encode()).hexdigest()
        if key in self._teams:
            self._teams.move_to_end(key)
            return self._teams[key]
        team = self._teams[key] = self.red_team(config)
        while len(self._teams) > TEAMS_KEPT:
            self._teams.popitem(last=False)
        return team

    def __call__(self, task: Task, config: RunConfig, context: Context) -> WorkerIdentity:
        """Derive worker ``task.worker``'s identity in run ``task.run_id``."""
        identity = simulated_identity(task.run_id, task.worker)
        team = self.team_of(config)
        return WorkerIdentity(
            client_id=identity.client_id,
            private_key=identity.private_key,
            behaviour=team.behaviour_of(task.worker) if team else None,
        )


@dataclass(frozen=True)
class EnrolledWorker:
    """A deployed client's own identity, from the node config or the environment.

    Parameters
    ----------
    environ : mapping, optional
        Where to look for settings the node config lacks; ``os.environ`` at
        message time when omitted.
    """

    environ: Mapping[str, str] | None = field(default=None)

    def __call__(self, task: Task, config: RunConfig, context: Context) -> WorkerIdentity:
        """Read the client id and key the SuperNode was started with; bind its node id.

        Raises
        ------
        phalanx.flower.deployment.node_config.NodeConfigError
            When neither the node config nor the environment says who this client is,
            or when a Byzantine switch meets a local-data task.
        """
        node = NodeIdentity.resolve(
            context.node_config, os.environ if self.environ is None else self.environ
        )
        if node.byzantine and task.model_shape is not None:
            raise NodeConfigError(
                f"{BYZANTINE_KEY} lies on assigned files; it is not available with local "
                "data (data.mode = 'local') yet: start this SuperNode without it"
            )
        key_path = node.key_path.expanduser().resolve()
        return WorkerIdentity(
            client_id=node.client_id,
            private_key=_private_key(key_path, key_path.stat().st_mtime_ns),
            node_id=int(context.node_id),
            behaviour=byzantine_behaviour(node.byzantine, task.worker) if node.byzantine else None,
            delay_s=node.delay_s,
            slow_compute_s=node.slow_compute_s,
            own_data=True,
            data_path=node.data_path,
        )


def _round_key(task: Task) -> str:
    return f"{task.run_id}/{task.round}/{task.nonce}"


def _spent(context: Context, task: Task) -> float:
    """Seconds of compute already spent on ``task``'s round by this node (0 without budget).

    With one message per file (``collect.messages = "per_file"``) a round's budget
    spans its messages, which a SuperNode handles one at a time; its state keeps what
    the round's earlier messages spent.
    """
    if task.budget_s is None:
        return 0.0
    record = context.state.config_records.get(state_key(COMPUTE_STATE, task.worker))
    if record is None or record.get("round") != _round_key(task):
        return 0.0
    spent = record.get("spent_s")
    return spent if isinstance(spent, float) and spent >= 0 else 0.0


@lru_cache(maxsize=4)
def _train_set(name: str, num_classes: int | None) -> ImageDataset:
    return load_dataset(name, "train", num_classes=num_classes)


@lru_cache(maxsize=4)
def _partition(config_json: str) -> Partition:
    config = _run_config(config_json)
    data = config.data
    return run_partition(config, _train_set(data.dataset, data.num_classes))[0]


def _worker_data(config_json: str, task: Task, who: WorkerIdentity) -> ImageDataset:
    """Return the data a worker trains on for ``task``.

    Assigned data: the run's dataset. Local data: a deployed client's own data (its
    node config's ``data-path``, nothing the coordinator names), or a simulated
    worker's part of the run's partition.
    """
    data = _run_config(config_json).data
    if task.model_shape is not None and who.own_data:
        return load_node_data(who.data_path, task.model_shape, like=data.dataset)
    train = _train_set(data.dataset, data.num_classes)
    if task.model_shape is None:
        return train
    return client_data(train, _partition(config_json), task.worker)


@lru_cache(maxsize=16)
def _run_config(text: str) -> RunConfig:
    return RunConfig.model_validate_json(text)


@lru_cache(maxsize=4)
def _private_key(path: Path, modified_ns: int) -> PrivateKey:
    return load_private_key_file(path)


def _answer(
    source: IdentitySource, task: Task, downlink: Downlink, config_json: str, context: Context
) -> RecordDict:
    """Compute one worker's answer to ``task``: its reply, or its fault, never a crash.

    The worker's replica and the compute its round has spent are kept in the node's
    state under the worker's own keys (:func:`state_key`).
    """
    try:
        config = _run_config(config_json)
        who = source(task, config, context)
        worker = Worker(
            config=config,
            train_set=_worker_data(config_json, task, who),
            client_id=who.client_id,
            private_key=who.private_key,
            behaviour=who.behaviour,
            node_id=who.node_id,
            model_shape=task.model_shape,
            slow_compute_s=who.slow_compute_s,
        )
        saved = context.state.array_records.get(state_key(REPLICA_STATE, task.worker))
        if saved is not None:
            worker.replica.restore({k: v.numpy() for k, v in saved.items()})
        answer = worker.answer(task, downlink, spent_s=_spent(context, task))
        if task.budget_s is not None:
            context.state[state_key(COMPUTE_STATE, task.worker)] = ConfigRecord(
                {"round": _round_key(task), "spent_s": answer.spent_s}
            )
        if who.delay_s:
            time.sleep(who.delay_s)
        state = worker.replica.state()
        if state:
            context.state[state_key(REPLICA_STATE, task.worker)] = ArrayRecord(
                array_dict={k: Array(np.array(v, order="C")) for k, v in state.items()}
            )
        return reply_content(answer.reply)
    except BaseException as exc:  # the worker's own code or data failed: say so, do not crash
        if is_interrupt(exc):
            raise
        log.exception("worker %d failed on its task", task.worker)
        return fault_content(exc)


def build_client_app(identity: IdentitySource | None = None) -> ClientApp:
    """Build a ClientApp whose workers are who ``identity`` says.

    Parameters
    ----------
    identity : IdentitySource, optional
        Who answers each task; :class:`SimulatedWorkers` by default.
    """
    source: IdentitySource = identity if identity is not None else SimulatedWorkers()
    client_app = ClientApp()

    @client_app.train()
    def train(message: Message, context: Context) -> Message:
        torch.set_num_threads(1)
        try:
            task, downlink, config_json = read_task(message.content)
        except Exception as exc:  # a task this worker cannot read: say so, do not crash
            log.exception("worker could not read its task")
            return Message(fault_content(exc), reply_to=message)
        return Message(_answer(source, task, downlink, config_json, context), reply_to=message)

    @client_app.train(BATCH_ACTION)
    def train_batch(message: Message, context: Context) -> Message:
        """Answer each task of a batch (the workers a virtual node hosts), each on its own."""
        torch.set_num_threads(1)
        try:
            tasks, downlink, config_json = read_batch(message.content)
        except Exception as exc:  # a batch this node cannot read: one fault for all of it
            log.exception("node could not read its batch of tasks")
            return Message(fault_content(exc), reply_to=message)
        parts = [_answer(source, task, downlink, config_json, context) for task in tasks]
        return Message(batch_reply_content(parts), reply_to=message)

    @client_app.evaluate()
    def evaluate(message: Message, context: Context) -> Message:
        """Evaluate the global weights on the worker's local test split (local data)."""
        torch.set_num_threads(1)
        try:
            task, weights, config_json = read_evaluation_task(message.content)
            config = _run_config(config_json)
            as_task = Task(task.run_id, task.round, task.nonce, task.worker, (), task.model_shape)
            who = source(as_task, config, context)
            worker = Worker(
                config=config,
                train_set=_worker_data(config_json, as_task, who),
                client_id=who.client_id,
                private_key=who.private_key,
                node_id=who.node_id,
                model_shape=task.model_shape,
            )
            measured = worker.evaluate(task, torch.from_numpy(weights))
            content = evaluation_content(measured.loss, measured.accuracy, measured.num_samples)
            return Message(content, reply_to=message)
        except BaseException as exc:  # the worker's own code or data failed: say so, do not crash
            if is_interrupt(exc):
                raise
            log.exception("worker failed to evaluate")
            return Message(fault_content(exc), reply_to=message)

    return client_app


app = build_client_app(SimulatedWorkers())
"""The simulated workers' ClientApp (``phalanx_clients.app:app``)."""

enrolled_app = build_client_app(EnrolledWorker())
"""A deployed client's ClientApp (``phalanx_clients.app:enrolled_app``)."""
