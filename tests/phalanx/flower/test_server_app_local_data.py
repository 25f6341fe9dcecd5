"""A deployed local-data run in one process: the ServerApp's Grid federation, enrolled ClientApps.

Each node's ClientApp (the real ``enrolled_app`` handler, through a Grid test double)
trains on the file its node config names. The run's own dataset, which the coordinator
evaluates on, holds 500 training samples; the clients' files hold 40, 50 and 300, and those
are the counts every reply signs: nobody trained on a part of the run's dataset. The
coordinator knows no partition, so a claim counts for at most 4 x the round's median.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from flwr.app import Message
from sqlalchemy.orm import Session, sessionmaker

from phalanx.config import RunConfig
from phalanx.flower.deployment.node_config import DATA_PATH_KEY, NodeIdentity
from phalanx.flower.records import REPLY
from phalanx.identity import save_private_key
from phalanx.local_rounds import MEDIAN_MULTIPLE
from phalanx.store import EventFilter, RunStatus, events, rounds, runs
from phalanx_clients.app import EnrolledWorker, build_client_app
from tests.support.deployment import add_client, execute_on_grid
from tests.support.fake_grid import FakeGrid, server_task_identity

SIZES = {2**64 - 3: 40, 17: 50, 2**63 + 5: 300}  # node id -> samples in its own file


@pytest.fixture(autouse=True)
def _server_task_identity() -> Iterator[None]:
    with server_task_identity():
        yield


def _images(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    labels = np.arange(size, dtype=np.int64) % 10
    return rng.random((size, 8, 8), dtype=np.float32), labels


def test_each_client_trains_on_its_own_file_and_a_claim_weighs_at_most_4x_the_median(
    sqlite_sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    rng = np.random.default_rng(0)
    run_data = tmp_path / "run.npz"  # the coordinator's: model shape and evaluation
    x, y = _images(rng, 500)
    x_test, y_test = _images(rng, 50)
    np.savez(run_data, x_train=x, y_train=y, x_test=x_test, y_test=y_test)
    node_configs: dict[int, dict[str, str]] = {}
    for node, size in SIZES.items():
        client_id, key = add_client(sqlite_sessions, f"client-{node}", node_id=node)
        save_private_key(tmp_path / f"{node}.key", key)
        own = tmp_path / f"own-{node}.npz"
        x, y = _images(rng, size)
        np.savez(own, x_train=x, y_train=y)
        identity = NodeIdentity(client_id, tmp_path / f"{node}.key", data_path=f"npz:{own}")
        node_configs[node] = {
            "phalanx-client-id": identity.client_id,
            "phalanx-key": str(identity.key_path),
            DATA_PATH_KEY: str(identity.data_path),
        }
    config = RunConfig.model_validate(
        {
            "name": "own-data",
            "seed": 2,
            "rounds": 2,
            "data": {
                "dataset": f"npz:{run_data}",
                "model": "mlp",
                "mode": "local",
                "local": {"steps": 3, "batch_size": 8, "lr": 0.05},
            },
            "assignment": {"scheme": "none", "num_workers": 3, "r": 1},
            "aggregation": {"rule": "mean"},
            "training": {"optimizer": "sgd", "server_lr": 1.0, "momentum": 0.0},
            "detection": {"outlier_threshold": None},
            "deployment": {"backend": "deployment"},
        }
    )
    claimed: dict[int, list[int | None]] = {node: [] for node in SIZES}

    def observe(index: int, reply: Message) -> Message:  # each reply as its node sent it
        record = reply.content.config_records[REPLY]
        claimed[list(SIZES)[index]].append(record.get("num_samples"))  # type: ignore[arg-type]
        return reply

    grid = FakeGrid(
        build_client_app(EnrolledWorker(environ={})),
        list(SIZES),
        observe,
        node_configs=node_configs,
    )

    run_id = execute_on_grid(sqlite_sessions, config, grid, tmp_path / "checkpoints")

    with sqlite_sessions() as session:
        assert runs.get_run(session, run_id).status == RunStatus.SUCCEEDED
        assert runs.get_partition(session, run_id) is None  # the coordinator made none
        recorded = rounds.list_rounds(session, run_id)
        assert events.list_events(session, EventFilter(run_id=run_id), limit=10).items == []
    assert claimed == {node: [size, size] for node, size in SIZES.items()}
    cap = MEDIAN_MULTIPLE * 50
    for r in recorded:
        assert (r.metrics["count_cap"], r.metrics["capped_claims"]) == (cap, 1.0)
        assert r.metrics["samples_weighted"] == 40 + 50 + cap
