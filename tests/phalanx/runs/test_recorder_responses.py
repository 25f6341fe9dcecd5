"""The recorder writes a round's response times in the transaction of the round itself.

And a simulated run whose systems model has a straggler leaves it slow in the store,
with no detection event.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from phalanx.response_times import WorkerResponse
from phalanx.roster import simulated_roster
from phalanx.runs.recorder import StoreRecorder, claimer_name, create_simulated_run, load_checkpoint
from phalanx.store import (
    DetectionEvent,
    WorkerResponseRow,
    make_engine,
    migrate,
    response_times,
    session_factory,
)
from phalanx.systems.profiles import draw_profiles
from tests.support.configs import small_config
from tests.support.inprocess import execute_inprocess
from tests.support.reports import round_report


def test_a_round_is_recorded_with_its_responses_and_a_bad_one_records_nothing(
    migrated_url: str, tmp_path: Path
) -> None:
    engine = make_engine(migrated_url)
    sessions = session_factory(engine)
    config = small_config(rounds=3, attack={"name": None, "q": 0})
    claimer = claimer_name()
    run_id = create_simulated_run(sessions, config, claimer)
    ids = [i.client_id for i in simulated_roster(run_id, config.assignment.num_workers)]
    recorder = StoreRecorder(sessions, run_id, tmp_path, claimer)
    timed = tuple(
        WorkerResponse(w, 90.0, "late", ids[w])
        if w == 6
        else WorkerResponse(w, 1.0 + w, "kept", ids[w])
        for w in range(7)
    )

    recorder.round_finished(replace(round_report(1), responses=timed), b"one")

    with sessions() as session:
        rows = session.scalars(select(WorkerResponseRow).order_by(WorkerResponseRow.worker)).all()
        assert [(r.round, r.worker, r.client_id, r.seconds, r.status) for r in rows] == [
            (1, w.worker, w.client_id, w.seconds, w.status) for w in timed
        ]
        assert session.scalar(select(func.count()).select_from(DetectionEvent)) == 0

    twice = (timed[0], timed[0])
    with pytest.raises(IntegrityError):
        recorder.round_finished(replace(round_report(2), responses=twice), b"two")
    assert load_checkpoint(sessions, run_id) == (1, b"one")  # round 2 left nothing behind
    engine.dispose()


def test_a_simulated_run_with_a_straggler_leaves_it_slow_in_the_store_and_flags_nobody(
    sqlite_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    sessions = session_factory(engine)
    config = small_config(
        rounds=3,
        attack={"name": None, "q": 0},
        systems={"enabled": True, "straggler_fraction": 0.15, "straggler_slowdown": 50.0},
        collect={"policy": "fastest_k", "k": 6},
    )
    (straggler,) = [
        w for w, p in enumerate(draw_profiles(config.systems, 7, config.seed)) if p.straggler
    ]
    claimer = claimer_name()
    run_id = create_simulated_run(sessions, config, claimer)

    execute_inprocess(sessions, config, run_id, claimer, tmp_path)

    with sessions() as session:
        found = response_times.run_response_times(session, run_id)
        assert session.scalar(select(func.count()).select_from(DetectionEvent)) == 0
    assert [w.rounds for w in found.workers] == [3] * 7
    (slow,) = found.slow
    assert (slow.worker, slow.late, slow.client_id) == (
        straggler,
        3,
        simulated_roster(run_id, 7)[straggler].client_id,
    )
    assert all(w.kept == 3 for w in found.workers if w.worker != straggler)
    engine.dispose()
