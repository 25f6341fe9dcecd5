"""Red team of deployed rounds that close by their policy on real arrival times.

The transport is the double with a clock of its own (`TimedTransport`): a worker's
reply arrives ``delays[w]`` seconds after the tasks went out, and nothing still in
flight when the round closes is delivered, as with Flower's Grid. A Byzantine
worker here is a well-signed reply rewritten on its way back.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from phalanx.channel import Downlink
from phalanx.event_kinds import EventKind
from phalanx.exchange import Exchange, Listener
from phalanx.replies import Reply, Task
from phalanx.reports import RoundReport
from phalanx.response_times import settle_late, summarize
from phalanx.runs import execute_run
from phalanx_clients.inprocess import Tamper
from tests.support.configs import small_config
from tests.support.coordinator_runs import RUN_ID, FakeSink, transport
from tests.support.signed_replies import resigned
from tests.support.timed_transport import TimedTransport, deployed, run_timed

CODEC = {"enabled": True, "rd_lambda": 0.1}


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


class ForgettingTransport(TimedTransport):
    """Wipes one worker's copy of the model before round 2 (a restarted SuperNode)."""

    forgetful: int = 5

    def exchange(
        self, tasks: Sequence[Task], downlink: Downlink, listener: Listener | None = None
    ) -> Exchange:
        if tasks[0].round == 2 and downlink.kind == "delta":
            self.inner.workers[self.forgetful].replica.model = None
        return super().exchange(tasks, downlink, listener)


def forgetting_run(collect: dict[str, object], delays: dict[int, float]) -> FakeSink:
    """Three deployed rounds closed by ``collect``; worker 5 loses the model before round 2."""
    config = small_config(
        rounds=3,
        attack={"name": None, "q": 0},
        deployment={"backend": "deployment"},
        codec=CODEC,
        collect=collect,
    )
    sink = FakeSink()
    execute_run(
        config, run_id=RUN_ID, sink=sink, transport=ForgettingTransport(transport(config), delays)
    )
    return sink


def test_a_worker_that_lost_the_model_gets_it_even_after_a_quick_close_and_is_back() -> None:
    # Worker 5's files have two other holders that agree before it is sent the model
    # again, so the quorum closes without it. Before the fix the full model went out only
    # while the round was open: worker 5 asked for it every round, was never sent it, and
    # was missing for good (then called slow).
    sink = forgetting_run({"policy": "quorum", "m": 2}, {6: 2.0})

    first, second, third = sink.reports
    assert 5 in replied(first)
    assert 5 not in replied(second)  # its answer to the sync comes after the close
    assert 5 in replied(third)  # in step again
    assert all(r.rejected == () and r.flagged == () for r in sink.reports)


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


def test_a_round_its_policy_never_closes_took_as_long_as_the_transport_waited() -> None:
    # Worker 3 never answers and the round waits for all seven: it ends when the transport
    # gives up, at its timeout. Before the fix it reported the last arrival (1.0 s).
    config = deployed(rounds=1, policy="fastest_k", k=7)
    timed = TimedTransport(transport(config), {3: 1e9}, timeout_s=600.0)
    sink = FakeSink()
    execute_run(config, run_id=RUN_ID, sink=sink, transport=timed)
    (report,) = sink.reports
    assert report.metrics["collected_s"] == 600.0
    assert report.metrics["missing_replies"] == 1.0 and report.flagged == ()


def test_the_bandit_learns_that_a_silent_worker_held_its_round_up_to_the_timeout() -> None:
    # Worker 0 never answers. Observed at the round's true end (the timeout) it is not
    # chosen again soon; observed at the last arrival, as before the fix, it tied with the
    # slowest answering worker and was chosen again, holding the next round up as well.
    config = deployed(rounds=3, policy="bandit", k=6)
    delays = {w: 1.0 + 0.1 * w for w in range(7)}
    delays[0] = 1e9
    timed = TimedTransport(transport(config), delays, timeout_s=600.0)
    sink = FakeSink()
    execute_run(config, run_id=RUN_ID, sink=sink, transport=timed)
    first, *later = sink.reports
    assert (first.metrics["missing_replies"], first.metrics["collected_s"]) == (1.0, 600.0)
    for report in later:
        assert report.metrics["missing_replies"] == 0.0
        assert report.metrics["collected_s"] < 600.0


def test_a_worker_just_beyond_the_kth_is_never_recorded_as_missing_or_slow() -> None:
    # Workers 5 and 6 answer half a second after the fifth reply closes each round; the
    # Grid is no longer read by then. Before the fix a deployed round recorded them as
    # missing and soon as "sent no reply in 4 of its 4 rounds": slow, for replies that
    # came. Their replies, late, come during the next round and are recorded onto theirs.
    sink, _ = run_timed(deployed(rounds=4, policy="fastest_k", k=5), {5: 1.5, 6: 1.6})
    assert all(r.metrics["collected_s"] == 1.0 for r in sink.reports)
    timed = summarize(
        settle_late(
            ((r.round, x) for r in sink.reports for x in r.responses),
            (late for r in sink.reports for late in r.late_responses),
        )
    )
    assert timed.slow == ()
    by_worker = {w.worker: w for w in timed.workers}
    assert (by_worker[5].late, by_worker[5].missing) == (3, 1)  # the last round's never came


def test_a_reply_that_comes_while_its_own_round_sends_the_model_again_is_late_not_missing() -> None:
    # Round 2: worker 5 (0.5 s) lost the model and is sent it after the five fastest
    # closed the round; worker 6 (2 s) answers its round-2 task during that second
    # sending. Before the fix that reply was listed late for round 2 by round 2 itself,
    # then dropped (only earlier rounds were settled): worker 6 stayed missing in round 2
    # for a reply that came.
    sink = forgetting_run({"policy": "fastest_k", "k": 5}, {5: 0.5, 6: 2.0})

    settled = settle_late(
        ((r.round, x) for r in sink.reports for x in r.responses),
        (late for r in sink.reports for late in r.late_responses),
    )
    assert [(t, x.seconds, x.status) for t, x in settled if x.worker == 6] == [
        (1, 2.0, "late"),
        (2, 2.0, "late"),
        (3, None, "missing"),  # the run ended before its reply came
    ]
    # Round 2 heard round 1's replies of workers 4 and 6, and its own of worker 6.
    assert sink.reports[1].metrics["late_from_earlier_rounds"] == 2.0
