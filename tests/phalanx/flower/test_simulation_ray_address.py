"""A Ray address that nobody answers at fails the run at once, in one line; it never hangs."""

from __future__ import annotations

import socket

import pytest

from phalanx.faults import RunFailedError
from phalanx.flower.simulation import SimulationEngine, reach_ray
from phalanx.roster import SimulatedRoster
from tests.support.configs import small_config


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    "address", ["no-port", "host:", ":6379", "host:http", "host:0", "host:70000", "a:b:c"]
)
def test_an_address_that_is_not_host_and_port_is_refused_in_one_line(address: str) -> None:
    with pytest.raises(RunFailedError, match="is not HOST:PORT") as raised:
        reach_ray(address)
    assert "\n" not in str(raised.value)


def test_a_run_on_an_address_nobody_answers_at_fails_before_it_starts() -> None:
    address = f"127.0.0.1:{closed_port()}"
    engine = SimulationEngine(ray_address=address)
    with pytest.raises(RunFailedError, match=f"no Ray cluster answers at {address}"):
        engine.connect(small_config(), SimulatedRoster("run"), lambda roster, transport: None)


def test_an_address_something_listens_at_is_taken() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        reach_ray(f"127.0.0.1:{server.getsockname()[1]}")
        reach_ray(f"ray://127.0.0.1:{server.getsockname()[1]}")
