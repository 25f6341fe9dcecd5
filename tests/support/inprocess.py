"""The workers of a simulated run in this process, for runs that skip Flower's simulation engine."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from phalanx.config import RunConfig
from phalanx.data import load_dataset
from phalanx.local_data import client_data, model_shape, run_partition
from phalanx.roster import SimulatedRoster, simulated_roster
from phalanx.runs.executor import execute
from phalanx_clients.behaviour import RedTeam
from phalanx_clients.inprocess import InProcessTransport
from phalanx_clients.worker import Worker


def inprocess_workers(config: RunConfig, run_id: str) -> dict[int, Worker]:
    """The workers of a simulated run (its red team included), by index.

    With local data each holds its part of the run's seeded partition, as the
    ClientApp's simulated workers do.
    """
    train = load_dataset(config.data.dataset, "train")
    team = RedTeam.from_config(config, train_data=lambda _: train)
    local = config.data.mode == "local"
    partition = run_partition(config, train)[0] if local else ()
    shape = model_shape(load_dataset(config.data.dataset, "test")) if local else None
    return {
        i.worker: Worker(
            config=config,
            train_set=client_data(train, partition, i.worker) if local else train,
            client_id=i.client_id,
            private_key=i.private_key,
            behaviour=team.behaviour_of(i.worker) if team else None,
            model_shape=shape,
        )
        for i in simulated_roster(run_id, config.assignment.num_workers)
    }


def inprocess_transport(config: RunConfig, run_id: str) -> InProcessTransport:
    """The workers of a simulated run (its red team included), in this process."""
    return InProcessTransport(inprocess_workers(config, run_id))


def execute_inprocess(
    sessions: sessionmaker[Session], config: RunConfig, run_id: str, claimer: str, folder: Path
) -> None:
    """Run a recorded simulated run to its end with its workers in this process."""
    execute(
        sessions,
        run_id,
        roster=SimulatedRoster(run_id),
        claimer=claimer,
        checkpoint_dir=folder,
        transport=inprocess_transport(config, run_id),
    )
