"""A deployed run with a straggler and a machine that dies mid-run, on real Flower processes.

Four approved clients run real ``flower-supernode`` processes against a real
SuperLink (TLS, SuperNode authentication). One answers every task 10 s late
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

from phalanx.agreement_record import AgreementRecord
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
from tests.support.deployment import admit_clients, run_to_success

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

# Every message costs a node a ClientApp start-up S first (it imports torch: 4-6 s
# idle, 15-30 s with the other xdist worker or a benchmark running real processes). A
# round closes once two workers delivered, about one S after it began (with 1-3 s of
# polling); from round 2 on, the dead machine's error counts as one of the two. The
# straggler's reply comes 10 s after its own start-up: late unless that start-up beat
# the round's closing one by 10 s (under load a round's four start-ups were measured
# up to 12 s apart, the fastest 7 s before the second fastest of the other three). A
# late reply to round 1, at S + 10 s, is heard before the 4th round ends (4 S or more)
# while S > 3.3 s (5 rounds and 20 s needed S > 5 s). Should a round's start-ups ever
# spread so that the straggler is 10 s ahead, its reply to the next round is late
# unless it beat the fastest honest node by 10 s again, and is heard while S > 5 s,
# which such a load makes sure of. The run's length does not depend on the delay:
# each round costs about one S.
DELAY_S = 10.0
ROUNDS = 4

Recorded = tuple[
    dict[str, float], set[int], dict[str, tuple[int, str, float | None]], list[DetectionEvent]
]
"""A one-round run's metrics, workers compared, responses by client, and events."""


def start_nodes(
    link: RunningSuperLink,
    control: FlowerControl,
    ids: dict[str, str],
    tmp_path: Path,
    started: list[ManagedProcess],
    env: dict[str, dict[str, str]],
    *,
    online: int | None = None,
) -> dict[str, ManagedProcess]:
    """Start a SuperNode per client (``env``: a node's own environment); wait for all online.

    ``online``: how many SuperNodes must then be online (default: those started).
    """
    nodes: dict[str, ManagedProcess] = {}
    for name, client_id in ids.items():
        options = SuperNodeOptions(
            superlink=link.address,
            root_certificates=link.tls.ca_certificate,
            identity=NodeIdentity(client_id, tmp_path / "keys" / f"{name}.key"),
            runtime_port=free_port(),
            flwr_home=tmp_path / "supernodes" / name,
        )
        nodes[name] = start_supernode(
            name, options, log_path=tmp_path / "logs" / f"{name}.log", env=env.get(name, {})
        )
        started.append(nodes[name])
    expected = len(ids) if online is None else online
    wait_until(
        lambda: sum(n.status == "online" for n in control.supernodes()) == expected,
        timeout=300,
        what=f"{expected} SuperNodes online",
        interval=1,
    )
    return nodes


def test_rounds_close_by_the_policy_without_the_straggler_and_the_dead_machine(
    tmp_path: Path,
    sqlite_sessions: sessionmaker[Session],
    superlink: tuple[RunningSuperLink, FlowerControl],
    started: list[ManagedProcess],
) -> None:
    link, control = superlink
    names = ("honest-a", "honest-b", "straggler", "doomed")
    deployment, ids = admit_clients(sqlite_sessions, control, names, tmp_path)

    env = {"straggler": {"PHALANX_DELAY_S": str(DELAY_S)}}
    nodes = start_nodes(link, control, ids, tmp_path, started, env)

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
    # straggler's replies come at least 10 s after their tasks; one heard after its
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


# DropCompute's budget counts the compute seconds the worker measures over its files,
# not the ClientApp's start-up, so a small slowness cuts at a boundary as surely as a
# large one: the first file takes 10 s plus its own training (a 16-sample MLP step,
# well under a second even on a loaded machine; it fits while that takes under 8 s),
# the second ends at 20 s or more, past the budget whatever the machine does. (The
# slow node computes its second file to the end before it drops it: the round lasts
# its start-up and 20 s, whatever the budget.)
BUDGET_SLOW_S = 10.0
BUDGET_S = 18.0
# One message per file with a real deadline. Each message costs a ClientApp process
# first, start-up S (it imports torch: about 5 s idle; 16 s measured with the other
# xdist worker running real processes, 25 s with a Ray benchmark beside it). The slow
# node handles its two messages one after the other: its first file arrives at
# S1 + 32 s, in time while S1 <= 36 s (the fast nodes' two messages each, by 2 S,
# while S <= 34 s); its second at S1 + S2 + 64 s or later, after the 68 s close while
# the two start-ups together take over 4 s, which two imports of torch always do.
# An 85 s deadline and 45 s a file would allow S1 <= 40 s, for 17 s more a run.
PER_FILE_SLOW_S = 32.0
PER_FILE_DEADLINE_S = 68.0


def test_a_slow_nodes_finished_files_count_and_a_budget_cuts_its_files_at_a_boundary(
    tmp_path: Path,
    sqlite_sessions: sessionmaker[Session],
    superlink: tuple[RunningSuperLink, FlowerControl],
    started: list[ManagedProcess],
) -> None:
    """Partial work on real processes: DropCompute's budget, then one message per file.

    Three clients, each file on two of them (subsets, K = 3, r = 2: two files each).
    One is a slow device (``PHALANX_SLOW_COMPUTE_S``: each file takes longer to
    compute). First a run with a compute budget of 18 s, the node 10 s slower a file:
    it computes its first file, overruns the budget on its second and sends the first
    alone, a prefix its reply names; the round counts the cut file, compares what
    came, and nobody is flagged. Then, its SuperNode restarted 32 s slower a file, a
    run with one message per file and a 68 s deadline: the slow node's first file
    arrives in time and is compared with its replica, its second after the close; in
    one reply it would have sent nothing in time.
    """
    link, control = superlink
    names = ("fast-a", "fast-b", "slow")
    deployment, ids = admit_clients(sqlite_sessions, control, names, tmp_path)
    nodes = start_nodes(
        link,
        control,
        ids,
        tmp_path,
        started,
        {"slow": {"PHALANX_SLOW_COMPUTE_S": str(BUDGET_SLOW_S)}},
    )

    def run_once(name: str, collect: dict[str, object]) -> str:
        config = RunConfig.model_validate(
            {
                "name": name,
                "seed": 7,
                "rounds": 1,
                "data": {"dataset": "digits", "model": "mlp", "samples_per_file": 16},
                "assignment": {"scheme": "subsets", "num_workers": 3, "r": 2},
                "training": {"optimizer": "adam", "server_lr": 0.01},
                "collect": collect,
                "deployment": {"backend": "deployment"},
            }
        )
        return run_to_success(sqlite_sessions, deployment, config)

    def recorded(run_id: str) -> Recorded:
        with sqlite_sessions() as session:
            (round_,) = rounds.list_rounds(session, run_id)
            stored = rounds.get_agreement(session, run_id, 1)
            responses = session.scalars(
                select(WorkerResponseRow).where(WorkerResponseRow.run_id == run_id)
            )
            by_client = {r.client_id: (r.worker, r.status, r.seconds) for r in responses}
            events = list(
                session.scalars(select(DetectionEvent).where(DetectionEvent.run_id == run_id))
            )
        assert stored is not None
        replied = set(AgreementRecord.from_dict(stored).replied)
        return dict(round_.metrics), replied, by_client, events

    slow = ids["slow"]

    budgeted = run_once("budget", {"drop_compute": True, "compute_budget_s": BUDGET_S})
    metrics, replied, by_client, events = recorded(budgeted)
    assert metrics["compute_budget_s"] == BUDGET_S
    assert metrics["files_cut"] == 1.0, metrics  # the slow node's second file
    assert metrics["update_applied"] == 1.0
    worker, status, seconds = by_client[slow]
    assert status == "kept" and seconds is not None and seconds >= BUDGET_SLOW_S
    assert replied == {0, 1, 2}  # its first file was compared like any other
    assert events == [], [(e.kind, e.client_id) for e in events]

    # The same client, a slower device now: its SuperNode again with another slowness.
    with sqlite_sessions() as session:
        slow_node = clients.get_client(session, slow).flower_node_id
    nodes["slow"].stop()
    wait_until(
        lambda: all(n.status != "online" for n in control.supernodes() if n.node_id == slow_node),
        timeout=120,
        what="the slow SuperNode offline",
        interval=1,
    )
    start_nodes(
        link,
        control,
        {"slow": slow},
        tmp_path,
        started,
        {"slow": {"PHALANX_SLOW_COMPUTE_S": str(PER_FILE_SLOW_S)}},
        online=len(names),
    )

    per_file = run_once(
        "per-file",
        {"policy": "deadline", "deadline_s": PER_FILE_DEADLINE_S, "messages": "per_file"},
    )
    metrics, replied, by_client, events = recorded(per_file)
    assert metrics["collected_s"] == PER_FILE_DEADLINE_S  # the slow node's second file was out
    assert metrics["update_applied"] == 1.0
    worker, status, seconds = by_client[slow]
    # Its first file came in time and counts; the second came after the close.
    assert status == "kept" and seconds is not None
    assert PER_FILE_SLOW_S <= seconds <= PER_FILE_DEADLINE_S
    assert worker in replied
    assert not any(e.kind in FLAG_KINDS for e in events), [(e.kind, e.client_id) for e in events]
    with sqlite_sessions() as session:
        assert clients.get_client(session, slow).status.value == "approved"


# The straggler's one answer comes ASYNC_DELAY_S after its ClientApp's start-up; the run
# needs ASYNC_ROUNDS model updates of two answers each, one start-up S apiece (5 s idle,
# up to 30 s under load): done by 2 S, long before S + 120 s.
ASYNC_DELAY_S = 120.0
ASYNC_ROUNDS = 2


def test_an_asynchronous_run_goes_by_real_arrival_times_without_the_straggler(
    tmp_path: Path,
    sqlite_sessions: sessionmaker[Session],
    superlink: tuple[RunningSuperLink, FlowerControl],
    started: list[ManagedProcess],
) -> None:
    """Buffered asynchronous aggregation on real SuperNodes (r = 1, a buffer of two).

    Three clients; one answers ``ASYNC_DELAY_S`` late. Each model update applies the
    first two answers that come, and a worker that answered pulls the newest model at
    once: the run finishes on the two fast nodes while the straggler's first task is
    still out, and nobody is flagged.
    """
    link, control = superlink
    names = ("fast-a", "fast-b", "straggler")
    deployment, ids = admit_clients(sqlite_sessions, control, names, tmp_path)
    slow = {"straggler": {"PHALANX_DELAY_S": str(ASYNC_DELAY_S)}}
    start_nodes(link, control, ids, tmp_path, started, slow)
    config = RunConfig.model_validate(
        {
            "name": "asynchronous",
            "seed": 11,
            "rounds": ASYNC_ROUNDS,
            "data": {"dataset": "digits", "model": "mlp", "samples_per_file": 16},
            "assignment": {"scheme": "none", "num_workers": 3, "r": 1},
            "training": {"optimizer": "adam", "server_lr": 0.01},
            "asynchronous": {"enabled": True, "buffer_size": 2, "max_staleness": 1},
            "deployment": {"backend": "deployment"},
        }
    )
    run_id = run_to_success(sqlite_sessions, deployment, config)

    with sqlite_sessions() as session:
        recorded = rounds.list_rounds(session, run_id)
        events = list(
            session.scalars(select(DetectionEvent).where(DetectionEvent.run_id == run_id))
        )
        responses = list(
            session.scalars(select(WorkerResponseRow).where(WorkerResponseRow.run_id == run_id))
        )
    assert [r.number for r in recorded] == list(range(1, ASYNC_ROUNDS + 1))
    for number, round_ in enumerate(recorded, start=1):
        metrics = round_.metrics
        assert metrics["model_version"] == number
        assert metrics["buffered_updates"] == 2 and metrics["update_applied"] == 1.0
        assert metrics["collected_s"] > 0 and "simulated_s" not in metrics
    assert events == [], [(e.kind, e.client_id) for e in events]
    # Every update came from the two fast nodes, each answering on the model it pulled.
    fast = {ids["fast-a"], ids["fast-b"]}
    assert {(r.round, r.client_id) for r in responses} == {
        (t, c) for t in range(1, ASYNC_ROUNDS + 1) for c in fast
    }
    assert all(r.status == "kept" and r.seconds is not None for r in responses)
