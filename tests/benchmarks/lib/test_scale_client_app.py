"""The scale benchmark's ClientApp answers what Phalanx's does: a task, and a node's batch."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks.lib.scale_client_app import app as scale_app
from phalanx.channel import CodecChannel
from phalanx.data import load_dataset
from phalanx.flower.transport import GridTransport
from phalanx.nets import flatten_params, init_model, layer_shapes
from tests.support.configs import small_config
from tests.support.fake_grid import NODE_BASE, FakeGrid, server_task_identity
from tests.support.planned_tasks import planned_task

CONFIG = small_config(attack={"name": None, "q": 0})


@pytest.fixture(autouse=True)
def _server_task_identity() -> Iterator[None]:
    with server_task_identity():
        yield


def test_a_batch_of_three_workers_on_one_node_is_answered_by_each() -> None:
    model = init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=CONFIG.seed)
    channel = CodecChannel(layer_shapes(model), flatten_params(model), CONFIG.codec, CONFIG.seed)
    grid = FakeGrid(scale_app, [NODE_BASE])
    nodes = dict.fromkeys((0, 1, 2), NODE_BASE)
    transport = GridTransport(grid, nodes, CONFIG.model_dump_json(), window=1, batch=True)  # type: ignore[arg-type]
    size = len(load_dataset("digits", "train").y)

    exchange = transport.exchange([planned_task(CONFIG, size, 1, w) for w in nodes], channel.sync())
    assert sorted(r.worker for r in exchange.replies) == [0, 1, 2]
    assert exchange.malformed == []
