"""A demo that fails before it shows its admin key leaves no admin key anyone could hold."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from phalanx.store import keys, make_engine, migrate, session_factory
from phalanx_cli.demo import serve_demo
from tests.support.configs import small_config
from tests.support.factories import settings_for
from tests.support.inprocess import inprocess_transport
from tests.support.live_server import free_port


def _active_keys(url: str) -> list[str]:
    engine = make_engine(url)
    try:
        with session_factory(engine)() as session:
            return [key.name for key in keys.list_keys(session)]
    finally:
        engine.dispose()


def test_a_demo_whose_server_cannot_start_revokes_its_admin_key(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/phalanx.db"
    migrate.upgrade(url)
    config = small_config(rounds=1)
    with socket.socket() as taken:  # the demo's port, held by another program
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = settings_for(url, tmp_path / "data", api_host="127.0.0.1", api_port=port)
        with pytest.raises(RuntimeError, match="the API did not start"):
            serve_demo(
                config,
                settings,
                say=print,
                federation=lambda run_id: inprocess_transport(config, run_id),
            )
    assert _active_keys(url) == []


def test_a_demo_whose_run_the_api_refuses_revokes_its_admin_key(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/phalanx.db"
    migrate.upgrade(url)
    outside = small_config(rounds=1, data={"dataset": "npz:/etc/elsewhere.npz"})
    settings = settings_for(url, tmp_path / "data", api_host="127.0.0.1", api_port=free_port())
    lines: list[str] = []
    with pytest.raises(RuntimeError, match="the API refused the run"):
        serve_demo(
            outside,
            settings,
            say=lines.append,
            federation=lambda run_id: inprocess_transport(outside, run_id),
        )
    assert _active_keys(url) == []
    assert not any(line.startswith("phx_") for line in lines)  # never shown
