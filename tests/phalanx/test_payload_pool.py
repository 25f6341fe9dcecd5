"""Identical payloads of an exchange are kept once; a round over them is unchanged."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.intake import RoundChecks
from phalanx.payload_pool import PayloadPool
from phalanx.replies import Reply
from tests.support.batch_grid import run_batched
from tests.support.configs import small_config
from tests.support.coordinator_runs import run
from tests.support.fake_grid import server_task_identity
from tests.support.signed_replies import resigned, unsigned_reply

HONEST = small_config(rounds=1, attack={"name": None, "q": 0})
"""Seven workers, seven files, each computed by three of them (r = 3)."""


def reply(worker: int, *payloads: Any) -> Reply:
    return unsigned_reply(worker, payloads)


@given(st.lists(st.lists(st.binary(max_size=6), min_size=1, max_size=3), max_size=12))
def test_equal_payloads_become_one_object_and_nothing_else_changes(
    sent: list[list[bytes]],
) -> None:
    pool = PayloadPool()
    # Fresh objects, as a transport reads them off the wire.
    replies = [
        pool.shared(reply(w, *(bytes(bytearray(p)) for p in ps))) for w, ps in enumerate(sent)
    ]
    for r, ps in zip(replies, sent, strict=True):
        assert list(r.payloads) == ps
        assert r == reply(r.worker, *ps)
    kept = {id(p) for r in replies for p in r.payloads}
    assert len(kept) == len({p for ps in sent for p in ps})


def test_a_payload_that_is_not_bytes_passes_unchanged() -> None:
    pool = PayloadPool()
    odd = reply(0, bytearray(b"ab"), ["not", "bytes"], b"ab")
    assert pool.shared(odd).payloads == odd.payloads
    unique = reply(1, b"xy")
    assert pool.shared(unique) is unique


@pytest.fixture
def admitted(monkeypatch: pytest.MonkeyPatch) -> list[Reply]:
    """The replies rounds admit (those the transport collected)."""
    seen: list[Reply] = []
    real = RoundChecks.admit_all

    def admit_all(self: RoundChecks, replies: Iterable[Reply]) -> None:
        replies = list(replies)
        seen.extend(replies)
        real(self, replies)

    monkeypatch.setattr(RoundChecks, "admit_all", admit_all)
    return seen


def distinct_objects(replies: list[Reply]) -> int:
    return len({id(p) for r in replies for p in r.payloads})


def test_in_process_the_three_replicas_of_a_file_share_one_payload(admitted: list[Reply]) -> None:
    (report,) = run(HONEST).reports
    assert len(admitted) == 7 and sum(len(r.payloads) for r in admitted) == 21
    assert distinct_objects(admitted) == 7
    assert not report.flagged and not report.events


def test_through_flower_batches_the_three_replicas_of_a_file_share_one_payload(
    admitted: list[Reply],
) -> None:
    with server_task_identity():
        (report,), _ = run_batched(HONEST)
    assert len(admitted) == 7 and distinct_objects(admitted) == 7
    assert not report.flagged and not report.events


def test_a_worker_sending_a_neighbours_payload_as_its_own_is_the_one_caught() -> None:
    # The pool shares the copied bytes with the worker they came from: the copy must
    # still be judged as the copier's alone.
    seen: dict[int, Reply] = {}

    def copy_worker_0(reply: Reply) -> Reply:
        seen.setdefault(reply.worker, reply)
        if reply.worker != 3:
            return reply
        stolen = seen[0].payloads[-1]
        return resigned(reply, payloads=(stolen,) * len(reply.payloads))

    (report,) = run(HONEST, tamper=copy_worker_0).reports
    assert report.flagged == (3,)
    assert {e.worker for e in report.events} == {3}
