"""A deployed run with a straggler and a machine that dies mid-run, on real Flower processes.

Four approved clients run real ``flower-supernode`` processes against a real
SuperLink (TLS, SuperNode authentication). One answers every task 20 s late
(``PHALANX_DELAY_S``, a straggler on purpose); another is killed once the run
has recorded its first round. Rounds close by the run's collection policy (the
fastest two workers) on the replies' real arrival times: the run finishes, the
straggler's replies come after their rounds closed and are counted late (its
responses recorded late, by their real times), nobody is flagged.

Every process is stopped by its pid at the end, and none may be left.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from phalanx.config import RunConfig
from phalanx.event_kinds import FAULT_KINDS, FLAG_KINDS
from phalanx.flower.deployment.control import FlowerControl
from phalanx.flower.deployment.node_config import NodeIdentity
from phalanx.flower.deployment.processes import ManagedProcess, free_port, wait_until
from phalanx.flower.deployment.superlink import RunningSuperLink
from phalanx.flower.deployment.supernode import SuperNodeOptions, start_supernode
from phalanx.runs.dispatcher import Dispatcher
from phalanx.store import RunStatus, clients, rounds, runs
from phalanx.store.models import DetectionEvent, WorkerResponseRow
from tests.support.deployment import admit_clients

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

DELAY_S = 20.0
ROUNDS = 5


def test_rounds_close_by_the_policy_without_the_straggler_and_the_dead_machine(
    tmp_path: Path,
    sqlite_sessions: sessionmaker[Session],
    superlink: tuple[RunningSuperLink, FlowerControl],
    started: list[ManagedProcess],
) -> None:
    link, control = superlink
    names = ("honest-a", "honest-b", "straggler", "doomed")
    deployment, ids = admit_clients(sqlite_sessions, control, names, tmp_path)

    nodes: dict[str, ManagedProcess] = {}
    for name in names:
        options = SuperNodeOptions(
            superlink=link.address,
            root_certificates=link.tls.ca_certificate,
            identity=NodeIdentity(ids[name], tmp_path / "keys" / f"{name}.key"),
            runtime_port=free_port(),
            flwr_home=tmp_path / "supernodes" / name,
        )
        env = {"PHALANX_DELAY_S": str(DELAY_S)} if name == "straggler" else {}
        nodes[name] = start_supernode(
            name, options, log_path=tmp_path / "logs" / f"{name}.log", env=env
        )
        started.append(nodes[name])
    wait_until(
        lambda: sum(n.status == "online" for n in control.supernodes()) == 4,
        timeout=300,
        what="four SuperNodes online",
        interval=2,
    )

    # Four workers, each file on three of them; a round closes once two workers
    # delivered, whatever the others do.
    config = RunConfig.model_validate(
        {
            "name": "stragglers",
            "seed": 5,
            "rounds": ROUNDS,
            "data": {"dataset": "digits", "model": "mlp", "samples_per_file": 16},
            "assignment": {"scheme": "subsets", "num_workers": 4, "r": 3},
            "training": {"optimizer": "adam", "server_lr": 0.01},
            "collect": {"policy": "fastest_k", "k": 2},
            "deployment": {"backend": "deployment"},
        }
    )
    with sqlite_sessions.begin() as session:
        run_id = runs.create_run(
            session, name=config.name, config=config.model_dump(mode="json"), seed=config.seed
        ).id

    def kill_after_the_first_round() -> None:
        # Seated and answering in round 1; gone from round 2 on, its task of round 2
        # already on its way.
        def first_round_recorded() -> bool:
            with sqlite_sessions() as session:
                return bool(rounds.list_rounds(session, run_id))

        wait_until(first_round_recorded, timeout=900, what="round 1 recorded", interval=0.2)
        nodes["doomed"].stop()

    killer = threading.Thread(target=kill_after_the_first_round, daemon=True)
    killer.start()
    said: list[str] = []
    Dispatcher(
        sqlite_sessions, "test-coordinator", {"deployment": deployment}, report=said.append
    ).serve(poll=1, once=True)
    killer.join(timeout=60)

    with sqlite_sessions() as session:
        run = runs.get_run(session, run_id)
        assert run.status == RunStatus.SUCCEEDED, (run.error, said)
        recorded = rounds.list_rounds(session, run_id)
        events = list(
            session.scalars(select(DetectionEvent).where(DetectionEvent.run_id == run_id))
        )
        responses = list(
            session.scalars(select(WorkerResponseRow).where(WorkerResponseRow.run_id == run_id))
        )
    assert [r.number for r in recorded] == list(range(1, ROUNDS + 1))
    # Slow and dead are not lying: nobody flagged or refused. The SuperLink may answer
    # for the dead node with an error, which is its fault (low severity), nothing more.
    straggler, doomed = ids["straggler"], ids["doomed"]
    about = [(e.round, e.kind, e.client_id) for e in events if e.client_id is not None]
    assert all(kind in FAULT_KINDS and client == doomed for _, kind, client in about), about
    assert not any(e.kind in FLAG_KINDS for e in events)
    late_counted = sum(r.metrics["late_from_earlier_rounds"] for r in recorded)
    assert late_counted >= 1, [r.metrics for r in recorded]
    assert all(r.metrics["update_applied"] == 1.0 for r in recorded)
    # Response times by real arrival, for every worker given work in every round. The
    # straggler's replies come at least 20 s after their tasks; one heard after its
    # round closed turned that round's missing response late, with its time.
    assert {r.round for r in responses} == set(range(1, ROUNDS + 1))
    slow = [(r.round, r.status, r.seconds) for r in responses if r.client_id == straggler]
    assert len(slow) == ROUNDS, slow
    assert all(t is None or t >= DELAY_S for _, _, t in slow), slow
    assert sum(r.status == "late" for r in responses) >= 1, [
        (r.round, r.client_id, r.status, r.seconds) for r in responses
    ]
    with sqlite_sessions() as session:
        assert clients.get_client(session, straggler).status.value == "approved"
