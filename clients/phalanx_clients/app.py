"""The Phalanx ClientApp: an honest worker, or a Byzantine one in red-team simulations."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import lru_cache

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, Context, Message
from flwr.clientapp import ClientApp

from phalanx.config import RunConfig
from phalanx.data import ImageDataset, load_dataset
from phalanx.flower.records import fault_content, read_task, reply_content
from phalanx.roster import simulated_identity
from phalanx_clients.behaviour import RedTeam
from phalanx_clients.worker import Worker

RedTeamFactory = Callable[[RunConfig], RedTeam | None]
REPLICA_STATE = "phalanx.replica"

log = logging.getLogger(__name__)


@lru_cache(maxsize=4)
def _train_set(name: str, num_classes: int | None) -> ImageDataset:
    return load_dataset(name, "train", num_classes=num_classes)


@lru_cache(maxsize=16)
def _run_config(text: str) -> RunConfig:
    return RunConfig.model_validate_json(text)


def build_client_app(red_team: RedTeamFactory = RedTeam.from_config) -> ClientApp:
    """Build a ClientApp whose workers use simulated identities.

    Parameters
    ----------
    red_team : callable
        Maps the run config to its red team (``None``: every worker honest).
        The default reads the ``attack`` section, as simulations do.
    """
    app = ClientApp()

    @app.train()
    def train(message: Message, context: Context) -> Message:
        torch.set_num_threads(1)
        try:
            task, downlink, config_json = read_task(message.content)
            config = _run_config(config_json)
            identity = simulated_identity(task.run_id, task.worker)
            team = red_team(config)
            worker = Worker(
                config=config,
                train_set=_train_set(config.data.dataset, config.data.num_classes),
                client_id=identity.client_id,
                private_key=identity.private_key,
                behaviour=team.behaviour_of(task.worker) if team else None,
            )
            saved = context.state.array_records.get(REPLICA_STATE)
            if saved is not None:
                worker.replica.restore({k: v.numpy() for k, v in saved.items()})
            reply = worker.handle(task, downlink)
            state = worker.replica.state()
            if state:
                context.state[REPLICA_STATE] = ArrayRecord(
                    array_dict={k: Array(np.array(v, order="C")) for k, v in state.items()}
                )
            return Message(reply_content(reply), reply_to=message)
        except Exception as exc:  # the worker's own code or data failed: say so, do not crash
            log.exception("worker failed on its task")
            return Message(fault_content(exc), reply_to=message)

    return app


app = build_client_app()
