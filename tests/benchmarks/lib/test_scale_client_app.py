"""The scale benchmark's ClientApp answers what Phalanx's does, batches of a node's tasks too."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks.lib.scale_client_app import app
from tests.support.batch_grid import run_batched
from tests.support.configs import small_config
from tests.support.fake_grid import FakeGrid, server_task_identity


@pytest.fixture(autouse=True)
def _server_task_identity() -> Iterator[None]:
    with server_task_identity():
        yield


def test_a_simulated_run_in_batches_gets_every_workers_reply_through_the_scale_app() -> None:
    config = small_config(rounds=1, attack={"name": None, "q": 0})
    (report,), _ = run_batched(config, grid=lambda nodes: FakeGrid(app, nodes))
    assert report.events == ()
    assert report.metrics["accepted_files"] == 7
