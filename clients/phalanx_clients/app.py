"""The Phalanx ClientApp: an honest worker, or a Byzantine one in red-team simulations."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import torch
from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from phalanx.config import RunConfig
from phalanx.data import ImageDataset, load_dataset
from phalanx.flower.records import read_task, reply_content
from phalanx.roster import simulated_identity
from phalanx_clients.behaviour import RedTeam
from phalanx_clients.worker import Worker

RedTeamFactory = Callable[[RunConfig], RedTeam | None]


@lru_cache(maxsize=4)
def _train_set(name: str) -> ImageDataset:
    return load_dataset(name, "train")


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
        task, params, config_json = read_task(message.content)
        config = _run_config(config_json)
        identity = simulated_identity(task.run_id, task.worker)
        team = red_team(config)
        worker = Worker(
            config=config,
            train_set=_train_set(config.data.dataset),
            client_id=identity.client_id,
            private_key=identity.private_key,
            behaviour=team.behaviour_of(task.worker) if team else None,
        )
        return Message(reply_content(worker.handle(task, params)), reply_to=message)

    return app


app = build_client_app()
