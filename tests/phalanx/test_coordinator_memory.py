"""A round holds its replies' payloads no longer than it needs them."""

from __future__ import annotations

import dataclasses
import gc
from typing import Any

import pytest

from phalanx import coordinator
from phalanx.intake import RoundChecks
from phalanx.replies import Reply
from tests.support.configs import small_config
from tests.support.coordinator_runs import run


class TrackedPayload(bytes):
    """A payload the garbage collector tracks (plain bytes are not), so live ones can be counted."""


def live_payloads() -> int:
    return sum(isinstance(o, TrackedPayload) for o in gc.get_objects())


def tracked(reply: Reply) -> Reply:
    return dataclasses.replace(reply, payloads=tuple(TrackedPayload(p) for p in reply.payloads))


def test_a_round_lets_go_of_its_payloads_before_detection(monkeypatch: pytest.MonkeyPatch) -> None:
    config = small_config()
    admitted: list[int] = []
    judged: list[int] = []
    real_admit, real_judge = RoundChecks.admit, coordinator.judge

    def admit(self: RoundChecks, reply: Reply) -> Any:
        admitted.append(live_payloads())
        return real_admit(self, reply)

    def judge(*args: Any, **kwargs: Any) -> Any:
        judged.append(live_payloads())
        return real_judge(*args, **kwargs)

    monkeypatch.setattr(RoundChecks, "admit", admit)
    monkeypatch.setattr(coordinator, "judge", judge)
    sink = run(config, tamper=tracked)
    assert len(sink.reports) == config.rounds and all(r.bytes_up > 0 for r in sink.reports)
    # Every reply's payloads were alive while the round admitted them...
    replies_per_round = len(admitted) // config.rounds
    assert replies_per_round == config.assignment.num_workers
    assert min(admitted) >= replies_per_round * config.assignment.r
    # ...and none is by the time the round judges its replicas.
    assert judged == [0] * config.rounds
