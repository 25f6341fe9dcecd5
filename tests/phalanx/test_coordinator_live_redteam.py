"""Red team of deployed rounds that close by their policy on real arrival times.

The transport is the double with a clock of its own (`TimedTransport`): a worker's
reply arrives ``delays[w]`` seconds after the tasks went out, and nothing still in
flight when the round closes is delivered, as with Flower's Grid. A Byzantine
worker here is a well-signed reply rewritten on its way back.
"""

from __future__ import annotations

import torch

from phalanx.event_kinds import EventKind
from phalanx.replies import Reply
from phalanx.reports import RoundReport
from phalanx_clients.inprocess import Tamper
from tests.phalanx.test_coordinator_live import deployed, run_timed
from tests.support.signed_replies import resigned


def keeping(worker: int, count: int) -> Tamper:
    """``worker`` answers only its first ``count`` files, signed."""

    def tamper(reply: Reply) -> Reply:
        if reply.worker != worker:
            return reply
        return resigned(reply, files=reply.files[:count], payloads=reply.payloads[:count])

    return tamper


def replied(report: RoundReport) -> set[int]:
    assert report.agreement is not None
    return set(report.agreement.replied)


def test_a_quick_reply_that_leaves_out_files_is_refused_and_not_recorded_as_quick() -> None:
    # Worker 0 answers at once with one of its three files, or none. Before the fix no
    # event named it and it counted as neither late nor missing; in simulation a partial
    # reply was recorded as the round's quickest response.
    for count in (0, 1):
        sink, _ = run_timed(deployed(rounds=1, policy="quorum", m=2), {0: 0.1}, keeping(0, count))
        (report,) = sink.reports
        assert report.rejected == (0,)
        assert [(e.worker, e.kind) for e in report.events] == [(0, EventKind.MALFORMED_REPLY)]
        assert 0 not in replied(report) and report.flagged == ()


def lying(worker: int) -> Tamper:
    """``worker`` sends ten times the reversed update of every file, signed."""

    def tamper(reply: Reply) -> Reply:
        if reply.worker != worker:
            return reply
        flipped = tuple(
            (-10 * torch.frombuffer(bytearray(p), dtype=torch.float32)).numpy().tobytes()
            for p in reply.payloads
        )
        return resigned(reply, payloads=flipped)

    return tamper


def test_the_bandit_prefers_a_fast_liar_but_detection_still_flags_it() -> None:
    # A liar that always answers first is chosen every round by the bandit (speed is
    # all it learns); its files keep other holders among the chosen, so it is flagged.
    liar = 2
    delays = {w: 1.0 + 0.1 * w for w in range(7)}
    delays[liar] = 0.1
    sink, _ = run_timed(deployed(rounds=3, policy="bandit", k=5), delays, lying(liar))
    for report in sink.reports:
        assert liar in replied(report)
        assert report.flagged == (liar,)
