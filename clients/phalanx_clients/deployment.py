"""The ClientApp of a deployed client: its own key, its own client id, its Flower node.

Simulated workers derive their identities from the run
(:mod:`phalanx_clients.app`). A deployed client is a real machine that
registered an EC key over REST; its SuperNode authenticates to the SuperLink
with that key, and this ClientApp signs every reply with it too, binding the
Flower node id the SuperLink knows it by (``context.node_id``) into the
signature. Who it is comes from the SuperNode's node config, or the
environment (:class:`~phalanx.flower.deployment.node_config.NodeIdentity`).

For red-team demonstrations, ``phalanx-byzantine=ATTACK`` (or
``PHALANX_BYZANTINE=ATTACK``) makes this client lie on every file it is given
with that attack; the coordinator knows nothing of it and must find it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, Context, Message
from flwr.clientapp import ClientApp

from phalanx.attacks import load_attack
from phalanx.config import RunConfig
from phalanx.data import ImageDataset, load_dataset
from phalanx.flower.deployment.node_config import NodeIdentity
from phalanx.flower.records import fault_content, read_task, reply_content
from phalanx.identity import PrivateKey, load_private_key_file
from phalanx_clients.app import REPLICA_STATE
from phalanx_clients.behaviour import Behaviour, RedTeam
from phalanx_clients.worker import Worker

__all__ = ["app", "build_deployment_client_app", "byzantine_behaviour"]

log = logging.getLogger(__name__)


@lru_cache(maxsize=4)
def _train_set(name: str, num_classes: int | None) -> ImageDataset:
    return load_dataset(name, "train", num_classes=num_classes)


@lru_cache(maxsize=16)
def _run_config(text: str) -> RunConfig:
    return RunConfig.model_validate_json(text)


@lru_cache(maxsize=4)
def _private_key(path: Path, modified_ns: int) -> PrivateKey:
    return load_private_key_file(path)


def byzantine_behaviour(attack: str, worker: int) -> Behaviour:
    """Build the behaviour of a lone Byzantine client: ``attack`` on every file it computes.

    Raises
    ------
    ValueError
        When ``attack`` names no known attack nor a plug-in.
    """
    team = RedTeam(adversaries=frozenset({worker}), attack=load_attack(attack), strategy="all")
    return Behaviour(team)


def build_deployment_client_app(environ: Mapping[str, str] | None = None) -> ClientApp:
    """Build the ClientApp a deployed client's SuperNode runs.

    Parameters
    ----------
    environ : mapping, optional
        Where to look for settings the node config lacks; ``os.environ`` at
        message time when omitted.
    """
    app = ClientApp()

    @app.train()
    def train(message: Message, context: Context) -> Message:
        torch.set_num_threads(1)
        try:
            identity = NodeIdentity.resolve(
                context.node_config, os.environ if environ is None else environ
            )
            key_path = identity.key_path.expanduser().resolve()
            task, downlink, config_json = read_task(message.content)
            config = _run_config(config_json)
            worker = Worker(
                config=config,
                train_set=_train_set(config.data.dataset, config.data.num_classes),
                client_id=identity.client_id,
                private_key=_private_key(key_path, key_path.stat().st_mtime_ns),
                behaviour=(
                    byzantine_behaviour(identity.byzantine, task.worker)
                    if identity.byzantine
                    else None
                ),
                node_id=int(context.node_id),
            )
            saved = context.state.array_records.get(REPLICA_STATE)
            if saved is not None:
                worker.replica.restore({k: v.numpy() for k, v in saved.items()})
            reply = worker.handle(task, downlink)
            state = worker.replica.state()
            if state:
                context.state[REPLICA_STATE] = ArrayRecord(
                    array_dict={k: Array(np.ascontiguousarray(v)) for k, v in state.items()}
                )
            return Message(reply_content(reply), reply_to=message)
        except Exception as exc:  # the worker's own code or data failed: say so, do not crash
            log.exception("worker failed on its task")
            return Message(fault_content(exc), reply_to=message)

    return app


app = build_deployment_client_app()
