"""Deployed rounds close by the collection policy on arrival times, as replies come in.

The transport here is a double with a clock of its own (`TimedTransport`): worker
``w``'s reply arrives ``delays[w]`` seconds after the tasks went out, and nothing
still in flight when the round closes is ever delivered, as with Flower's Grid.
"""

from __future__ import annotations

import dataclasses

import pytest

from phalanx.config import RunConfig
from phalanx.plan import round_assignment
from phalanx.replies import Reply
from phalanx.reports import RoundReport
from phalanx.response_times import LateResponse, settle_late
from phalanx.runs import execute_run
from phalanx_clients.inprocess import InProcessTransport, Tamper
from tests.support.coordinator_runs import RUN_ID, FakeSink, transport
from tests.support.timed_transport import TimedTransport, deployed, run_timed

SLOW_WORKER, SLOW_S = 4, 50.0


def replied(report: RoundReport) -> set[int]:
    assert report.agreement is not None
    return set(report.agreement.replied)


def test_a_quorum_closes_the_round_without_the_straggler_and_never_flags_it() -> None:
    sink, timed = run_timed(deployed(policy="quorum", m=2), {SLOW_WORKER: SLOW_S})
    assert all(timed.listened)
    for report in sink.reports:
        assert report.metrics["collected_s"] == 1.0
        assert report.metrics["missing_replies"] == 1.0
        assert SLOW_WORKER not in replied(report) and report.flagged == ()
        assert report.metrics["accepted_files"] == 7


def test_a_deadline_cuts_the_wait_for_a_round_whose_condition_never_holds() -> None:
    sink, _ = run_timed(deployed(policy="deadline", deadline_s=10.0), {SLOW_WORKER: SLOW_S})
    assert [r.metrics["collected_s"] for r in sink.reports] == [10.0, 10.0]
    assert all(SLOW_WORKER not in replied(r) for r in sink.reports)


def test_without_a_policy_a_deployed_round_waits_for_every_reply() -> None:
    sink, timed = run_timed(deployed(), {SLOW_WORKER: SLOW_S})
    assert all(timed.listened)
    for report in sink.reports:
        assert SLOW_WORKER in replied(report) and report.metrics["collected_s"] == SLOW_S
        times = {r.worker: (r.seconds, r.status) for r in report.responses}
        assert times == {w: (SLOW_S if w == SLOW_WORKER else 1.0, "kept") for w in range(7)}
        assert report.late_responses == ()


def test_a_reply_after_the_close_turns_its_rounds_missing_response_late() -> None:
    # Worker 4 answers 50 s after its tasks go out; a quorum closes each round at 1 s.
    sink, _ = run_timed(deployed(rounds=3, policy="quorum", m=2), {SLOW_WORKER: SLOW_S})
    for report in sink.reports:
        (slow,) = [r for r in report.responses if r.worker == SLOW_WORKER]
        assert (slow.seconds, slow.status) == (None, "missing")
    assert [r.late_responses for r in sink.reports] == [
        (),
        (LateResponse(1, SLOW_WORKER, SLOW_S),),
        (LateResponse(2, SLOW_WORKER, SLOW_S),),
    ]
    settled = settle_late(
        ((r.round, x) for r in sink.reports for x in r.responses),
        (late for r in sink.reports for late in r.late_responses),
    )
    assert [(t, x.seconds, x.status) for t, x in settled if x.worker == SLOW_WORKER] == [
        (1, SLOW_S, "late"),
        (2, SLOW_S, "late"),
        (3, None, "missing"),  # the run ended before its reply came
    ]


def broken_data(config: RunConfig, worker: int) -> InProcessTransport:
    """``worker``'s pixels hold NaN: its ClientApp fails on its own data, every round."""
    inner = transport(config)
    data = inner.workers[worker].train_set
    x = data.x.clone()
    x[:, :, 0, 0] = float("nan")
    inner.workers[worker].train_set = dataclasses.replace(data, x=x)
    return inner


def test_a_worker_that_failed_is_not_waited_for() -> None:
    # Everyone else answers at 1 s; the failed worker answered at once, with its fault.
    config = deployed(policy="deadline", deadline_s=30.0)
    timed = TimedTransport(broken_data(config, 2), {2: 0.5})
    sink = FakeSink()
    execute_run(config, run_id=RUN_ID, sink=sink, transport=timed)
    for report in sink.reports:
        assert report.metrics["collected_s"] == 1.0 and report.metrics["missing_replies"] == 0
        assert report.rejected == (2,) and report.flagged == ()


def test_a_refused_reply_does_not_hold_the_round_open_until_the_deadline() -> None:
    config = deployed(rounds=1, policy="deadline", deadline_s=30.0)
    sink, _ = run_timed(config, {0: 0.1}, bad_signature(0))
    (report,) = sink.reports
    assert report.metrics["collected_s"] == 1.0 and report.rejected == (0,)


def payload_swapped(worker: int) -> Tamper:
    """``worker`` sends other bytes under the digests (and signature) of its honest reply."""

    def swap(reply: Reply) -> Reply:
        if reply.worker != worker:
            return reply
        garbage = tuple(bytes(len(p)) for p in reply.payloads)
        return dataclasses.replace(reply, payloads=garbage)

    return swap


def bad_signature(worker: int) -> Tamper:
    def forge(reply: Reply) -> Reply:
        if reply.worker != worker:
            return reply
        return dataclasses.replace(reply, signature=reply.signature[:-4] + b"abcd")

    return forge


@pytest.mark.parametrize("tamper", [payload_swapped, bad_signature], ids=["payload", "signature"])
def test_a_reply_that_fails_its_checks_never_closes_a_file(tamper: object) -> None:
    # The first reply of a file shared with the straggler claims the honest digest. Were
    # the claim counted, the file (and the round) would close at once with one honest
    # replica; checked first, the file waits for its second honest replica.
    config = deployed(rounds=1, policy="quorum", m=2)
    assignment = round_assignment(config, 1)
    (shared,) = set(assignment.files_of(0)) & set(assignment.files_of(SLOW_WORKER))
    delays = {0: 0.1, SLOW_WORKER: SLOW_S}
    sink, _ = run_timed(config, delays, tamper(0))  # type: ignore[operator]
    (report,) = sink.reports
    assert report.metrics["collected_s"] == SLOW_S
    assert 0 in report.rejected and SLOW_WORKER in replied(report)
    assert shared not in report.dropped_files and report.metrics["accepted_files"] == 7
