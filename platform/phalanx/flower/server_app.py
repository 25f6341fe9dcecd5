"""The Phalanx ServerApp: the coordinator's round loop over Flower's ``Grid``."""

from __future__ import annotations

import time
from collections.abc import Callable

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from phalanx.coordinator import Transport
from phalanx.flower.transport import GridTransport

RunWithTransport = Callable[[Transport], None]


def wait_for_nodes(grid: Grid, count: int, *, timeout: float = 300.0) -> list[int]:
    """Block until ``count`` nodes are connected; return their ids in a stable order.

    Raises
    ------
    TimeoutError
        When fewer than ``count`` nodes connected within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        nodes = sorted(grid.get_node_ids())
        if len(nodes) >= count:
            return nodes[:count]
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(nodes)} of {count} workers connected in {timeout} s")
        time.sleep(0.2)


def build_server_app(
    run: RunWithTransport, *, num_workers: int, run_config_json: str, round_timeout: float = 600.0
) -> ServerApp:
    """Build a ServerApp that maps connected nodes to workers and hands ``run`` a transport.

    Worker ``i`` is the node with the ``i``-th smallest node id.
    """
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        nodes = wait_for_nodes(grid, num_workers)
        transport = GridTransport(
            grid, dict(enumerate(nodes)), run_config_json, timeout=round_timeout
        )
        run(transport)

    return app
