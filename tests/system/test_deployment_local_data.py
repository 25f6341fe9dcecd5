"""Local data in a deployment: real SuperNodes, each training on the file it names.

A real SuperLink (TLS, SuperNode authentication) and four real ``flower-supernode``
processes, one per approved client, each started with its own ``data-path`` in its node
config: a small ``.npz`` file written here. Three hold different digits, in different
amounts; the run (``data.mode = "local"``, FedAvg's weighted mean) names only the model's
dataset, for the coordinator's evaluation, and no client's file. Each client signs its
own file's sample count; every round records the weighting those counts give, capped at
4 x the round's median claim (the coordinator knows no partition). The fourth node's file
holds 28x28 images, which the run's 8x8 model does not take: that client reports
``data_mismatch`` every round, a low-severity fault, a run problem, never a flag, and the
run goes on without it.

One federation for both cases, since each ClientApp process imports torch afresh for every
message: four nodes cost one round's start-up, two federations two.

Every process is stopped by its pid at the end, and none may be left.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from phalanx.config import RunConfig
from phalanx.event_kinds import EventKind
from phalanx.flower.deployment.backend import DeploymentBackend
from phalanx.flower.deployment.control import FlowerControl
from phalanx.flower.deployment.node_config import NodeIdentity
from phalanx.flower.deployment.processes import ManagedProcess, free_port, wait_until
from phalanx.flower.deployment.superlink import RunningSuperLink
from phalanx.flower.deployment.supernode import SuperNodeOptions, start_supernode
from phalanx.store import rounds, runs
from phalanx.store.models import DetectionEvent, Round
from tests.support.deployment import admit_clients, serve_to_success

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROUNDS = 2
#: Samples per node: the third holds more than 4 x the median, so its weight is capped.
SIZES = {"clinic-a": 40, "clinic-b": 50, "clinic-c": 300}
#: A fourth node whose file holds 28x28 images, which the run's 8x8 model does not take.
MISFIT = "clinic-d"


def _write_own_data(path: Path, first: int, size: int, *, side: int = 8) -> None:
    """Write ``size`` digits from ``first`` on (pixels in [0, 1]) as this node's own file."""
    digits = load_digits()
    images = (digits.images[first : first + size] / 16.0).astype(np.float32)
    labels = digits.target[first : first + size].astype(np.int64)
    if side != 8:  # another kind of image: the same digits, bigger
        images = np.kron(images, np.ones((side // 8, side // 8), dtype=np.float32))
        images = np.pad(images, ((0, 0), (0, side % 8), (0, side % 8)))
    np.savez(path, x_train=images, y_train=labels)


def _local_run(sessions: sessionmaker[Session], rounds: int) -> str:
    config = RunConfig.model_validate(
        {
            "name": "own-data",
            "seed": 11,
            "rounds": rounds,
            "data": {
                "dataset": "digits",  # the coordinator's evaluation; no client reads it
                "model": "mlp",
                "mode": "local",
                "eval_samples": 200,
                # Evaluated by the clients after the last round only: each evaluation
                # costs every node a ClientApp start of its own.
                "local": {"steps": 6, "batch_size": 16, "lr": 0.1, "evaluate_every": ROUNDS},
            },
            "assignment": {"scheme": "none", "num_workers": len(SIZES) + 1, "r": 1},
            "aggregation": {"rule": "mean"},
            "training": {"optimizer": "sgd", "server_lr": 1.0, "momentum": 0.0},
            "deployment": {"backend": "deployment"},
        }
    )
    with sessions.begin() as session:
        return runs.create_run(
            session, name=config.name, config=config.model_dump(mode="json"), seed=config.seed
        ).id


def _federation(
    tmp_path: Path,
    sessions: sessionmaker[Session],
    superlink: tuple[RunningSuperLink, FlowerControl],
    started: list[ManagedProcess],
    data_paths: dict[str, Path],
) -> tuple[DeploymentBackend, dict[str, str]]:
    """Approve a client per node, start its SuperNode with its own data-path; wait for all."""
    link, control = superlink
    deployment, ids = admit_clients(sessions, control, data_paths, tmp_path)
    for name, data_path in data_paths.items():
        identity = NodeIdentity(
            ids[name], tmp_path / "keys" / f"{name}.key", data_path=f"npz:{data_path}"
        )
        options = SuperNodeOptions(
            superlink=link.address,
            root_certificates=link.tls.ca_certificate,
            identity=identity,
            runtime_port=free_port(),
            flwr_home=tmp_path / "supernodes" / name,
        )
        started.append(start_supernode(name, options, log_path=tmp_path / "logs" / f"{name}.log"))
    wait_until(
        lambda: sum(n.status == "online" for n in control.supernodes()) == len(data_paths),
        timeout=300,
        what="every SuperNode online",
        interval=1,
    )
    return deployment, ids


def _recorded(
    sessions: sessionmaker[Session], run_id: str
) -> tuple[list[Round], list[DetectionEvent]]:
    """The run's rounds and its events."""
    with sessions() as session:
        recorded = rounds.list_rounds(session, run_id)
        events = list(
            session.scalars(
                select(DetectionEvent)
                .where(DetectionEvent.run_id == run_id)
                .order_by(DetectionEvent.round, DetectionEvent.id)
            )
        )
    return recorded, events


def test_each_node_trains_on_its_own_file_and_a_misfit_file_is_a_run_problem(
    tmp_path: Path,
    sqlite_sessions: sessionmaker[Session],
    superlink: tuple[RunningSuperLink, FlowerControl],
    started: list[ManagedProcess],
) -> None:
    (tmp_path / "own-data").mkdir()
    data_paths = {name: tmp_path / "own-data" / f"{name}.npz" for name in (*SIZES, MISFIT)}
    first = 0
    for name, size in SIZES.items():
        _write_own_data(data_paths[name], first, size)
        first += size  # different samples on every node
    _write_own_data(data_paths[MISFIT], first, 60, side=28)  # the run's model takes 8x8
    deployment, ids = _federation(tmp_path, sqlite_sessions, superlink, started, data_paths)
    run_id = _local_run(sqlite_sessions, ROUNDS)

    serve_to_success(sqlite_sessions, deployment, run_id)

    recorded, events = _recorded(sqlite_sessions, run_id)
    assert [r.number for r in recorded] == list(range(1, ROUNDS + 1))
    # The misfit: a low-severity data_mismatch fault every round, a run problem, no flag.
    assert [(e.round, e.client_id, e.kind, e.severity) for e in events] == [
        (t, ids[MISFIT], EventKind.DATA_MISMATCH.value, "low") for t in range(1, ROUNDS + 1)
    ]
    reason = events[0].evidence["reason"]
    assert "28x28" in reason and "8x8" in reason, reason
    # Screening is on, and no honest node is flagged: among three updates whose data
    # differ the robust z-score alone flagged one (22 robust deviations), while its
    # distance to the median update was nowhere near 5 times the typical one.
    # Each of the three claimed what it trained on, its own file less the fifth it holds
    # out to evaluate on (32, 40, 240): the median claim is clinic-b's 40, so a claim
    # counts for at most 160 (no partition is known); clinic-c's 240 is the one capped,
    # and the weights sum to 32 + 40 + 160.
    for r in recorded:
        assert (r.metrics["accepted_files"], r.metrics["count_cap"]) == (3.0, 160.0)
        assert (r.metrics["capped_claims"], r.metrics["samples_weighted"]) == (1.0, 232.0)
        assert r.metrics["update_applied"] == 1.0
    # The three that fit evaluated the last model on their own held-out data; the
    # rounds before the last were not evaluated.
    assert [r.metrics.get("fed_reports") for r in recorded] == [None] * (ROUNDS - 1) + [3.0]
    # It trains: FedAvg on 312 digits beats chance (0.1), better every round.
    accuracies = [r.metrics["accuracy"] for r in recorded]
    assert accuracies[-1] > 0.3 and accuracies == sorted(accuracies), accuracies
