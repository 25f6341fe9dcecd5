"""A local-data reply's sample count: signed, required and bounded; none with assigned data."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from phalanx.data_mode import ModelShape
from phalanx.detection import payload_digest
from phalanx.identity import sign_reply
from phalanx.replies import (
    MAX_SAMPLES,
    Reply,
    ReplyRejectedError,
    Task,
    check_reply,
    float32_payload,
    make_float32_decoder,
)
from phalanx.roster import simulated_identity

RUN = "run-counts"
IDENTITY = simulated_identity(RUN, 3)
LOCAL = Task(RUN, 2, "nonce", 3, (3,), model_shape=ModelShape(1, 8, 10))
ASSIGNED = Task(RUN, 2, "nonce", 3, (3,))


def reply_to(task: Task, num_samples: int | None) -> Reply:
    payloads = (float32_payload(torch.ones(4)),)
    digests = tuple(payload_digest(p) for p in payloads)
    signature = sign_reply(
        IDENTITY.private_key,
        run_id=RUN,
        round=task.round,
        nonce=task.nonce,
        client_id=IDENTITY.client_id,
        file_ids=task.files,
        digests=digests,
        num_samples=num_samples,
    )
    return Reply(
        worker=3,
        client_id=IDENTITY.client_id,
        run_id=RUN,
        round=task.round,
        nonce=task.nonce,
        files=task.files,
        payloads=payloads,
        digests=digests,
        signature=signature,
        num_samples=num_samples,
    )


def check(reply: Reply, task: Task) -> None:
    check_reply(
        reply,
        task,
        client_id=IDENTITY.client_id,
        public_key=IDENTITY.private_key.public_key(),
        decode=make_float32_decoder(4),
    )


def refusal(reply: Reply, task: Task) -> tuple[str, str]:
    with pytest.raises(ReplyRejectedError) as refused:
        check(reply, task)
    return refused.value.kind, refused.value.reason


def test_a_signed_count_passes_and_an_assigned_reply_keeps_its_old_signature() -> None:
    check(reply_to(LOCAL, 180), LOCAL)
    check(reply_to(LOCAL, MAX_SAMPLES), LOCAL)
    check(reply_to(ASSIGNED, None), ASSIGNED)


@pytest.mark.parametrize("changed", [181, 1, 540, MAX_SAMPLES])
def test_a_count_changed_after_signing_fails_the_signature(changed: int) -> None:
    tampered = dataclasses.replace(reply_to(LOCAL, 180), num_samples=changed)

    assert refusal(tampered, LOCAL)[0] == "bad_signature"


@pytest.mark.parametrize(
    ("count", "reason"),
    [
        (None, "reply reports no sample count, which local data needs"),
        (0, "sample count 0 is not a whole number in 1..2**53"),
        (-5, "sample count -5 is not a whole number in 1..2**53"),
        (MAX_SAMPLES + 1, "sample count 9007199254740993 is not"),
        (10**400, "is not a whole number in 1..2**53"),
        (True, "sample count bool is not"),
        (3.0, "sample count float is not"),
        ("180", "sample count str is not"),
    ],
)
def test_a_missing_or_impossible_count_is_a_malformed_reply(count: object, reason: str) -> None:
    hostile = dataclasses.replace(reply_to(LOCAL, 180), num_samples=count)

    kind, said = refusal(hostile, LOCAL)

    assert kind == "malformed_reply"
    assert reason in said and len(said) < 120


def test_an_assigned_reply_with_a_count_is_malformed_even_when_signed() -> None:
    kind, reason = refusal(reply_to(ASSIGNED, 180), ASSIGNED)

    assert (kind, reason) == (
        "malformed_reply",
        "reply reports a sample count, which assigned data has not",
    )


def test_a_count_stripped_from_a_signed_local_reply_is_refused() -> None:
    stripped = dataclasses.replace(reply_to(LOCAL, 180), num_samples=None)

    assert refusal(stripped, LOCAL) == (
        "malformed_reply",
        "reply reports no sample count, which local data needs",
    )
