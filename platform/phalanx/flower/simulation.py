"""Flower's simulation engine (Ray) as a federation: virtual SuperNodes in this process's Ray.

The workers' ClientApp is loaded by its Flower component reference, the way
``flwr run`` loads it, so this module never imports the clients' package.

A run prints nothing of Flower's or Ray's but what it has to say: no notice that
``run_simulation`` is deprecated, no Ray tip about accelerators, no colour codes
when standard error is not a terminal (:func:`quiet_flower`), no other library's
DeprecationWarning (:func:`hide_deprecation_warnings`), and the local Ray's
session folder is removed when the run ends (:func:`ray_temp_dir`).
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
import shutil
import socket
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flwr.clientapp import ClientApp
from flwr.common.logger import FLOWER_LOGGER, ConsoleHandler
from flwr.simulation import run_simulation

from phalanx.config import RunConfig
from phalanx.faults import RunFailedError
from phalanx.flower.interruption import Interruption
from phalanx.flower.server_app import build_server_app
from phalanx.roster import RosterSource, SimulatedRoster
from phalanx.runs.executor import Drive

__all__ = [
    "CLIENT_APP",
    "SimulationEngine",
    "hide_deprecation_warnings",
    "load_client_app",
    "quiet_flower",
    "ray_temp_dir",
]

CLIENT_APP = "phalanx_clients.app:app"
"""The ClientApp of simulated workers (simulated identities, the config's red team)."""

MESSAGES_PER_ACTOR = 8
"""Task messages out at once per Ray actor of a local simulation (the window's size)."""

MIN_WINDOW = 16
"""The smallest window of task messages out at once in a local simulation."""

NODES_PER_WINDOW = 1
"""Virtual SuperNodes of a local simulation per task message out at once (see ``nodes``).

One: a node's tasks of a round travel in one message (``batch``), so the round's
messages are as many as its nodes, all out at once. With four per message (64 nodes),
batched rounds at K = 50 to 1,000, r = 1 took 1.5 to 2.6x as long (one run each,
``bench_scale.py``, the four-node runs on a busier host)."""


def load_client_app(reference: str = CLIENT_APP) -> ClientApp:
    """Load a ClientApp by its ``module:attribute`` component reference."""
    module_name, _, attr = reference.partition(":")
    app = getattr(importlib.import_module(module_name), attr)
    if not isinstance(app, ClientApp):
        raise TypeError(f"{reference} is not a flwr ClientApp")
    return app


def hide_deprecation_warnings() -> None:
    """Hide libraries' DeprecationWarnings again, as Python does unless asked to show them.

    Importing Flower's simulation engine (``flwr.simulation.ray_transport.utils``)
    adds ``warnings.filterwarnings("once", category=DeprecationWarning)`` for the
    whole process, so every library's notice to its developers (websockets' under
    uvicorn, in ``phalanx demo``) reached the person running Phalanx. Python's
    default filters for them go back in front of it, unless warnings were asked for
    with ``-W`` or ``PYTHONWARNINGS``.
    """
    if not sys.warnoptions:
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")


hide_deprecation_warnings()  # run_simulation, imported above, brought Flower's filter in

RUN_SIMULATION_DEPRECATED = "DEPRECATED FEATURE: The `run_simulation` function is deprecated"
"""How Flower 1.42's notice that ``run_simulation`` is deprecated begins."""

RAY_ACCELERATOR_TIP = "Tip: In future versions of Ray, Ray will no longer override accelerator"
"""How Ray's FutureWarning about ``RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO`` begins."""


class _WithoutRunSimulationNotice(logging.Filter):
    """Drops Flower's notice that ``run_simulation`` is deprecated, and only that record.

    Flower 1.42 points to ``flwr run`` instead, which starts a ServerApp from an app
    directory in a process of its own. This engine's ServerApp is built in this
    process around the run's executor (``drive``), which only the in-process
    ``run_simulation`` can run; it has no replacement in 1.42.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(RUN_SIMULATION_DEPRECATED)


@contextmanager
def quiet_flower() -> Iterator[None]:
    """Run a simulation without Flower's and Ray's notices to their own developers.

    Inside the block, Flower's deprecation notice of ``run_simulation`` is dropped,
    Ray's FutureWarning on ``ray.init`` that it will stop overriding
    ``CUDA_VISIBLE_DEVICES`` for tasks without GPUs is ignored (setting
    ``RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=0`` would silence it too, but would let
    workers see GPUs they were not given), and Flower's log lines are coloured only
    when they go to a terminal. Every other record and warning passes as before.
    """
    notice = _WithoutRunSimulationNotice()
    handlers = [h for h in FLOWER_LOGGER.handlers if isinstance(h, ConsoleHandler)]
    colored = [h.colored for h in handlers]
    for handler in handlers:
        terminal = hasattr(handler.stream, "isatty") and handler.stream.isatty()
        handler.colored = handler.colored and terminal
    FLOWER_LOGGER.addFilter(notice)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore",
                message=RAY_ACCELERATOR_TIP,
                category=FutureWarning,
                module=r"ray\._private\.worker",
            )
            yield
    finally:
        FLOWER_LOGGER.removeFilter(notice)
        for handler, was in zip(handlers, colored, strict=True):
            handler.colored = was


@contextmanager
def ray_temp_dir() -> Iterator[Path]:
    """Make a folder for one local Ray's session files; remove it, and all in it, afterwards.

    Ray keeps each session's logs and sockets in ``<temp>/ray/session_*`` and never
    removes them. The folder is made where Ray would make its own (``RAY_TMPDIR``,
    else the system's temporary directory; ``/tmp`` on macOS, whose long temporary
    paths would overflow the length of a Unix socket's path).
    """
    parent = os.environ.get("RAY_TMPDIR") or (
        "/tmp" if sys.platform == "darwin" else tempfile.gettempdir()
    )
    path = Path(tempfile.mkdtemp(prefix="phalanx-ray-", dir=parent))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


RAY_CONNECT_TIMEOUT_S = 5.0
"""Seconds to wait for a Ray cluster's address to accept a connection before a run."""


def reach_ray(address: str, timeout: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """Check that something listens at a Ray cluster's ``HOST:PORT`` before joining it.

    Ray itself retries an address that does not answer for minutes; a run (or the
    coordinator service, for every run it claims) would hang instead of failing.

    Raises
    ------
    RunFailedError
        When the address is not ``HOST:PORT`` or nothing accepts a connection there.
    """
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdecimal() or not 0 < int(port) < 65536:
        raise RunFailedError(f"the Ray address {address!r} is not HOST:PORT")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise RunFailedError(f"no Ray cluster answers at {address}: {exc}") from exc


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
    window : int, optional
        The most task messages of a round out at once (see
        :class:`~phalanx.flower.transport.GridTransport`): Flower's in-memory link
        state walks every stored message for every node every 0.1 s, while Ray's
        actors work on a few at a time. By default :data:`MESSAGES_PER_ACTOR` per
        actor the local Ray runs, at least :data:`MIN_WINDOW`; on a Ray cluster, whose
        size is not known here, every task at once unless given.
    nodes : int, optional
        How many virtual SuperNodes the workers share (worker ``i`` on the
        ``(i mod nodes)``-th, :class:`~phalanx.roster.SimulatedRoster`): Flower's
        engine asks every virtual node for its next message every 0.1 s, a cost its
        ServerApp's process pays in proportion to the nodes, while a node's messages
        are computed one at a time on Ray's few actors whichever node they go to. Each
        worker keeps its own identity and state (its replica of the model) on its
        node, and its node is sent its workers' tasks in one message (``batch``), or
        one at a time. By default :data:`NODES_PER_WINDOW` per message of the window
        (16 on two cores), a node per worker on a Ray cluster (no window) or when there
        are fewer workers.
    batch : bool
        Send a node's tasks of a round in one message when the round waits for every
        reply (:class:`~phalanx.flower.transport.GridTransport`'s ``batch``): each
        message costs the ServerApp's process a Ray submission and a copy of the model,
        whatever it carries. ``False`` sends one message per task (for comparison).
    """

    ray_address: str | None = None
    client_app: str = CLIENT_APP
    cpus_per_worker: float = 1.0
    window: int | None = None
    nodes: int | None = None
    batch: bool = True

    def __post_init__(self) -> None:
        if self.nodes is not None and self.nodes < 1:
            raise ValueError(f"the workers need at least 1 node to share, got {self.nodes}")

    def connect(self, config: RunConfig, roster: RosterSource, drive: Drive) -> None:
        """Start the virtual SuperNodes and a ServerApp that calls ``drive``; wait for both."""
        init_args: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
        if self.ray_address is not None:
            reach_ray(self.ray_address)
            init_args["address"] = self.ray_address
            self._simulate(config, roster, drive, init_args)
            return
        # "local": a Ray of our own, never a cluster that /tmp/ray/ray_current_cluster
        # names (a head stopped without `ray stop` leaves that file behind); its
        # session folder goes with the run.
        init_args["address"] = "local"
        init_args["num_cpus"] = os.cpu_count() or 1
        with ray_temp_dir() as temp_dir:
            init_args["_temp_dir"] = str(temp_dir)
            self._simulate(config, roster, drive, init_args)

    def _simulate(
        self, config: RunConfig, roster: RosterSource, drive: Drive, init_args: dict[str, Any]
    ) -> None:
        backend_config: dict[str, Any] = {
            "client_resources": {"num_cpus": self.cpus_per_worker, "num_gpus": 0.0},
            "init_args": init_args,
        }
        window = self.window
        if window is None and "num_cpus" in init_args:
            actors = int(init_args["num_cpus"] // max(self.cpus_per_worker, 1e-9))
            window = max(MIN_WINDOW, MESSAGES_PER_ACTOR * max(actors, 1))
        nodes = self.nodes
        if nodes is None and window is not None:
            nodes = NODES_PER_WINDOW * window
        supernodes = config.assignment.num_workers
        if nodes is not None and isinstance(roster, SimulatedRoster):
            roster = dataclasses.replace(roster, nodes=nodes)
            supernodes = roster.needed(supernodes)
        interruption = Interruption()
        server_app = build_server_app(
            config, roster, drive, window=window, batch=self.batch, interruption=interruption
        )
        with quiet_flower(), interruption.on_ctrl_c(FLOWER_LOGGER):
            try:
                run_simulation(
                    server_app=server_app,
                    client_app=load_client_app(self.client_app),
                    num_supernodes=supernodes,
                    backend_config=backend_config,
                )
            except KeyboardInterrupt:
                # The engine stopped; the coordinator, in the ServerApp's thread, would
                # wait out its round. It stops at its next look at the Grid.
                interruption.interrupt()
                raise
