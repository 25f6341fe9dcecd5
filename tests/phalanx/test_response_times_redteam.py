"""Red team of response times: a reply the checks refused did respond, and is never "no reply".

Before the fix a worker whose reply arrived every round and was refused every round
(a bad signature, say) was recorded as missing, and then as persistently slow: "sent
no reply in 4 of its 4 rounds", beside the round's own count of missing replies (0).
"""

from __future__ import annotations

import dataclasses

from phalanx.collect.pieces import Collection, Piece
from phalanx.replies import Reply
from phalanx.response_times import round_responses, summarize
from tests.support.configs import small_config
from tests.support.coordinator_runs import run

REFUSED = 4


def test_a_refused_reply_responds_when_it_arrived_kept_or_late_by_the_close() -> None:
    collection = Collection((Piece(0, 0, 1.0, "d"),), (), ((1, 0), (2, 0), (3, 0)), 2.0, "policy")
    answered = {0: 1.0, 1: 0.5, 2: 3.0}  # 1 and 2 were refused, 3 never answered

    got = {
        r.worker: (r.seconds, r.status)
        for r in round_responses(collection, range(4), answered=answered)
    }

    assert got == {0: (1.0, "kept"), 1: (0.5, "kept"), 2: (3.0, "late"), 3: (None, "missing")}


def forged(reply: Reply) -> Reply:
    if reply.worker != REFUSED:
        return reply
    return dataclasses.replace(reply, signature=reply.signature[:-4] + b"abcd")


def test_a_worker_refused_every_round_is_never_recorded_as_sending_no_reply() -> None:
    config = small_config(
        rounds=3,
        attack={"name": None, "q": 0},
        systems={"enabled": True},
        collect={"policy": "fastest_k", "k": 5},
    )
    sink = run(config, tamper=forged)
    for report in sink.reports:
        assert report.rejected == (REFUSED,) and report.metrics["missing_replies"] == 0
        (response,) = [r for r in report.responses if r.worker == REFUSED]
        assert response.status != "missing" and response.seconds is not None
    timed = summarize((r.round, x) for r in sink.reports for x in r.responses)
    (worker,) = [w for w in timed.workers if w.worker == REFUSED]
    assert worker.missing == 0
    assert not worker.slow and "no reply" not in str(worker.slow_reason)
