"""Runs a federation through Flower's simulation engine (Ray)."""

from __future__ import annotations

import logging
import os
from typing import Any

from flwr.clientapp import ClientApp
from flwr.simulation import run_simulation

from phalanx.flower.server_app import RunWithTransport, build_server_app


def simulate(
    run: RunWithTransport,
    client_app: ClientApp,
    *,
    num_workers: int,
    run_config_json: str,
    cpus_per_worker: float = 1.0,
    ray_address: str | None = None,
) -> None:
    """Run ``run`` as a ServerApp against ``num_workers`` virtual SuperNodes.

    Parameters
    ----------
    run : callable
        Receives the Flower-backed transport and drives the coordinator.
    client_app : ClientApp
        The workers' app.
    num_workers : int
        Virtual SuperNodes to start.
    run_config_json : str
        The run configuration sent with every task.
    cpus_per_worker : float
        Ray CPU resources per ClientApp instance.
    ray_address : str, optional
        An existing Ray cluster to run on instead of a local one.
    """
    init_args: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
    if ray_address is not None:
        init_args["address"] = ray_address
    else:
        # "local": a Ray of our own, never a cluster that /tmp/ray/ray_current_cluster
        # names (a head stopped without `ray stop` leaves that file behind).
        init_args["address"] = "local"
        init_args["num_cpus"] = os.cpu_count() or 1
    backend_config: dict[str, Any] = {
        "client_resources": {"num_cpus": cpus_per_worker, "num_gpus": 0.0},
        "init_args": init_args,
    }
    server_app = build_server_app(run, num_workers=num_workers, run_config_json=run_config_json)
    run_simulation(
        server_app=server_app,
        client_app=client_app,
        num_supernodes=num_workers,
        backend_config=backend_config,
    )
