"""A node hosting several simulated workers keeps each one's replica apart.

An attack on node sharing: a worker that never received the model is sent a delta on
a node whose other worker holds the state that delta applies to. It must ask for the
model (``need_sync``), never answer from its neighbour's replica.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from phalanx.channel import CodecChannel
from phalanx.data import load_dataset
from phalanx.flower.transport import GridTransport
from phalanx.nets import flatten_params, init_model, layer_shapes
from phalanx_clients.app import build_client_app
from tests.support.configs import small_config
from tests.support.fake_grid import NODE_BASE, FakeGrid, server_task_identity
from tests.support.planned_tasks import planned_task

CONFIG = small_config(attack={"name": None, "q": 0}, codec={"enabled": True})


@pytest.fixture(autouse=True)
def _server_task_identity() -> Iterator[None]:
    with server_task_identity():
        yield


def test_a_worker_never_answers_from_the_replica_of_another_worker_on_its_node() -> None:
    model = init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=CONFIG.seed)
    params = flatten_params(model)
    channel = CodecChannel(layer_shapes(model), params, CONFIG.codec, CONFIG.seed)
    node = NODE_BASE
    grid = FakeGrid(build_client_app(), [node])
    transport = GridTransport(grid, {0: node, 1: node}, CONFIG.model_dump_json(), window=1)  # type: ignore[arg-type]
    size = len(load_dataset("digits", "train").y)

    first = transport.exchange([planned_task(CONFIG, size, 1, 0)], channel.sync())
    assert [(r.worker, r.need_sync) for r in first.replies] == [(0, False)]
    channel.commit(params + 0.01 * torch.ones_like(params), round=1)

    second = transport.exchange(
        [planned_task(CONFIG, size, 2, w) for w in (0, 1)], channel.downlink()
    )
    answers = {r.worker: r.need_sync for r in second.replies}
    assert answers == {0: False, 1: True}
