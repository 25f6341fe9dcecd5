"""Flower's simulation engine (Ray) as a federation: virtual SuperNodes in this process's Ray.

The workers' ClientApp is loaded by its Flower component reference, the way
``flwr run`` loads it, so this module never imports the clients' package.
"""

from __future__ import annotations

import importlib
import logging
import os
from dataclasses import dataclass
from typing import Any

from flwr.clientapp import ClientApp
from flwr.simulation import run_simulation

from phalanx.config import RunConfig
from phalanx.flower.server_app import build_server_app
from phalanx.roster import RosterSource
from phalanx.runs.executor import Drive

__all__ = ["CLIENT_APP", "SimulationEngine", "load_client_app"]

CLIENT_APP = "phalanx_clients.app:app"
"""The ClientApp of simulated workers (simulated identities, the config's red team)."""


def load_client_app(reference: str = CLIENT_APP) -> ClientApp:
    """Load a ClientApp by its ``module:attribute`` component reference."""
    module_name, _, attr = reference.partition(":")
    app = getattr(importlib.import_module(module_name), attr)
    if not isinstance(app, ClientApp):
        raise TypeError(f"{reference} is not a flwr ClientApp")
    return app


@dataclass(frozen=True)
class SimulationEngine:
    """One virtual SuperNode per worker in Flower's simulation engine.

    Parameters
    ----------
    ray_address : str, optional
        An existing Ray cluster to run on instead of a local one.
    client_app : str
        The workers' ClientApp, as a component reference.
    cpus_per_worker : float
        Ray CPU resources per ClientApp instance.
    """

    ray_address: str | None = None
    client_app: str = CLIENT_APP
    cpus_per_worker: float = 1.0

    def connect(self, config: RunConfig, roster: RosterSource, drive: Drive) -> None:
        """Start the virtual SuperNodes and a ServerApp that calls ``drive``; wait for both."""
        init_args: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
        if self.ray_address is not None:
            init_args["address"] = self.ray_address
        else:
            # "local": a Ray of our own, never a cluster that /tmp/ray/ray_current_cluster
            # names (a head stopped without `ray stop` leaves that file behind).
            init_args["address"] = "local"
            init_args["num_cpus"] = os.cpu_count() or 1
        backend_config: dict[str, Any] = {
            "client_resources": {"num_cpus": self.cpus_per_worker, "num_gpus": 0.0},
            "init_args": init_args,
        }
        run_simulation(
            server_app=build_server_app(config, roster, drive),
            client_app=load_client_app(self.client_app),
            num_supernodes=config.assignment.num_workers,
            backend_config=backend_config,
        )
