"""A deployed local-data run in one process: the ServerApp's Grid federation, enrolled ClientApps.

Each node's ClientApp (the real ``enrolled_app`` handler, through a Grid test double)
trains on the file its node config names. The run's own dataset, which the coordinator
evaluates on, holds 500 training samples; the clients' files hold 40, 50 and 300, and those
are the counts every reply signs: nobody trained on a part of the run's dataset. The
coordinator knows no partition, so a claim counts for at most 4 x the round's median. When
most nodes hold data the model does not take, the run fails in one line that says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from flwr.app import Message
from sqlalchemy.orm import Session, sessionmaker

from phalanx.config import RunConfig
from phalanx.faults import RunFailedError
from phalanx.flower.deployment.node_config import DATA_PATH_KEY, NodeIdentity
from phalanx.flower.evaluation_records import EVALUATION
from phalanx.flower.records import REPLY
from phalanx.identity import save_private_key
from phalanx.local_evaluation import split_sizes
from phalanx.local_rounds import MEDIAN_MULTIPLE
from phalanx.store import EventFilter, RunStatus, events, rounds, runs
from phalanx_clients.app import EnrolledWorker, build_client_app
from tests.support.deployment import add_client, execute_on_grid
from tests.support.fake_grid import FakeGrid, Rewrite, server_task_identity, untouched

SIZES = {2**64 - 3: 40, 17: 50, 2**63 + 5: 300}  # node id -> samples in its own file


@pytest.fixture(autouse=True)
def _server_task_identity() -> Iterator[None]:
    with server_task_identity():
        yield


def _save(path: Path, size: int, *, side: int = 8, test: int = 0) -> str:
    rng = np.random.default_rng(size + side)
    arrays = {
        "x_train": rng.random((size, side, side), dtype=np.float32),
        "y_train": np.arange(size, dtype=np.int64) % 10,
    }
    if test:
        arrays |= {"x_test": arrays["x_train"][:test], "y_test": arrays["y_train"][:test]}
    np.savez(path, **arrays)  # type: ignore[arg-type]
    return f"npz:{path}"


def _run(
    sessions: sessionmaker[Session], tmp_path: Path, sides: dict[int, int], rewrite: Rewrite
) -> str:
    """Run two rounds on the run's 500 samples of 8x8 images and nodes with their own files.

    ``sides``: each node's image side (8 fits the run's model).
    """
    node_configs: dict[int, dict[str, str]] = {}
    for node, size in SIZES.items():
        client_id, key = add_client(sessions, f"client-{node}", node_id=node)
        key_path = tmp_path / f"{node}.key"
        save_private_key(key_path, key)
        own = _save(tmp_path / f"own-{node}.npz", size, side=sides[node])
        identity = NodeIdentity(client_id, key_path, data_path=own)
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
                # The coordinator's: the model's shape and its evaluation.
                "dataset": _save(tmp_path / "run.npz", 500, test=50),
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
    app = build_client_app(EnrolledWorker(environ={}))
    grid = FakeGrid(app, list(SIZES), rewrite, node_configs=node_configs)
    return execute_on_grid(sessions, config, grid, tmp_path / "checkpoints")


def test_each_client_trains_on_its_own_file_and_a_claim_weighs_at_most_4x_the_median(
    sqlite_sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    claimed: dict[int, list[int | None]] = {node: [] for node in SIZES}
    tested: dict[int, list[int | None]] = {node: [] for node in SIZES}

    def observe(index: int, reply: Message) -> Message:  # each reply as its node sent it
        node = list(SIZES)[index]
        records = reply.content.config_records
        if REPLY in records:
            claimed[node].append(records[REPLY].get("num_samples"))  # type: ignore[arg-type]
        else:
            tested[node].append(records[EVALUATION].get("num_samples"))  # type: ignore[arg-type]
        return reply

    run_id = _run(sqlite_sessions, tmp_path, dict.fromkeys(SIZES, 8), observe)

    with sqlite_sessions() as session:
        assert runs.get_run(session, run_id).status == RunStatus.SUCCEEDED
        assert runs.get_partition(session, run_id) is None  # the coordinator made none
        recorded = rounds.list_rounds(session, run_id)
        assert events.list_events(session, EventFilter(run_id=run_id), limit=10).items == []
    # Each node holds out a fifth of its own file to evaluate on, and trains on the rest.
    held_out = {node: split_sizes(size, 0.2) for node, size in SIZES.items()}
    assert claimed == {node: [train, train] for node, (train, _) in held_out.items()}
    assert tested == {node: [test, test] for node, (_, test) in held_out.items()}
    trained = sorted(train for train, _ in held_out.values())
    cap = MEDIAN_MULTIPLE * trained[1]
    for r in recorded:
        assert (r.metrics["count_cap"], r.metrics["capped_claims"]) == (cap, 1.0)
        assert r.metrics["samples_weighted"] == trained[0] + trained[1] + cap


def test_a_run_whose_model_most_nodes_data_does_not_fit_fails_in_one_line(
    sqlite_sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    sides = dict(zip(SIZES, (28, 28, 8), strict=True))

    with pytest.raises(RunFailedError, match="2 of 3 workers failed with the same error"):
        _run(sqlite_sessions, tmp_path, sides, untouched)

    with sqlite_sessions() as session:
        (run,) = runs.list_runs(session)
        assert run.status == RunStatus.FAILED
    assert run.error is not None and "2 of 3 workers failed with the same error" in run.error
    assert "holds 1x28x28 images; the run's model takes 1x8x8" in run.error
