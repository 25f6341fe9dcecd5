"""The workers of a simulated run in this process, for runs that skip Flower's simulation engine."""

from __future__ import annotations

from phalanx.config import RunConfig
from phalanx.data import load_dataset
from phalanx.roster import simulated_roster
from phalanx_clients.behaviour import RedTeam
from phalanx_clients.inprocess import InProcessTransport
from phalanx_clients.worker import Worker


def inprocess_transport(config: RunConfig, run_id: str) -> InProcessTransport:
    """The workers of a simulated run (its red team included), in this process."""
    train = load_dataset(config.data.dataset, "train")
    team = RedTeam.from_config(config)
    return InProcessTransport(
        {
            i.worker: Worker(
                config=config,
                train_set=train,
                client_id=i.client_id,
                private_key=i.private_key,
                behaviour=team.behaviour_of(i.worker) if team else None,
            )
            for i in simulated_roster(run_id, config.assignment.num_workers)
        }
    )
