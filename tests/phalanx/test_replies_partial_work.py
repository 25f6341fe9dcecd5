"""Tasks cut into messages and replies cut by a compute budget, as the checks see them."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from phalanx.detection import payload_digest
from phalanx.identity import sign_reply
from phalanx.replies import (
    Reply,
    ReplyRejectedError,
    Task,
    check_reply,
    float32_payload,
    make_float32_decoder,
)
from phalanx.roster import simulated_identity

RUN = "run-partial"
IDENTITY = simulated_identity(RUN, 3)
TASK = Task(RUN, 2, "nonce", 3, (1, 4, 6), samples=((7, 3), (0,), (4,)), budget_s=1.0)


def reply_covering(files: tuple[int, ...], task: Task = TASK) -> Reply:
    payloads = tuple(float32_payload(torch.full((4,), float(f))) for f in files)
    digests = tuple(payload_digest(p) for p in payloads)
    signature = sign_reply(
        IDENTITY.private_key,
        run_id=RUN,
        round=task.round,
        nonce=task.nonce,
        client_id=IDENTITY.client_id,
        file_ids=files,
        digests=digests,
        samples=task.samples_digest,
    )
    return Reply(
        3,
        IDENTITY.client_id,
        RUN,
        task.round,
        task.nonce,
        files,
        payloads,
        digests,
        signature,
        samples=task.samples_digest,
    )


def check(reply: Reply, task: Task = TASK, *, partial: bool = True) -> list[int]:
    replicas = check_reply(
        reply,
        task,
        client_id=IDENTITY.client_id,
        public_key=IDENTITY.private_key.public_key(),
        decode=make_float32_decoder(4),
        partial=partial,
    )
    return [r.file for r in replicas]


@pytest.mark.parametrize("covered", [(), (1,), (1, 4), (1, 4, 6)])
def test_a_budgeted_reply_may_cover_the_first_files_of_its_task(covered: tuple[int, ...]) -> None:
    assert check(reply_covering(covered)) == list(covered)


@pytest.mark.parametrize("covered", [(4,), (1, 6), (4, 1), (6, 4, 1)])
def test_a_budgeted_reply_that_is_not_a_prefix_in_order_is_malformed(
    covered: tuple[int, ...],
) -> None:
    with pytest.raises(ReplyRejectedError) as refused:
        check(reply_covering(covered))
    assert refused.value.kind == "malformed_reply"


def test_a_budgeted_reply_still_cannot_claim_a_file_it_was_not_given() -> None:
    with pytest.raises(ReplyRejectedError) as refused:
        check(reply_covering((1, 4, 6, 8)))
    assert refused.value.kind == "unassigned_file"


def test_without_a_budget_a_prefix_is_a_reply_that_leaves_files_out() -> None:
    with pytest.raises(ReplyRejectedError, match="leaves out assigned files"):
        check(reply_covering((1,)), partial=False)


def test_a_message_of_one_file_is_answered_with_that_file_and_its_samples_alone() -> None:
    one = TASK.narrowed((4,))
    assert check(reply_covering((4,), one), one, partial=False) == [4]
    # Signed with the whole task's samples, it answers another question.
    with pytest.raises(ReplyRejectedError, match="other sample indices"):
        check(dataclasses.replace(reply_covering((4,)), samples=TASK.samples_digest), one)


def test_narrowing_a_task_keeps_its_files_order_and_their_samples_alone() -> None:
    one = TASK.narrowed((4,))
    assert (one.files, one.samples, one.budget_s) == ((4,), ((0,),), 1.0)
    assert TASK.narrowed((6, 1)).files == (1, 6)
    assert one.samples_digest != TASK.samples_digest
    for files in [(2,), (1, 1), (1, 2)]:
        with pytest.raises(ValueError, match="not distinct files"):
            TASK.narrowed(files)


@pytest.mark.parametrize("budget", [math.nan, -1.0, 0.0, math.inf, 3, 1e9])
def test_the_coordinator_cannot_build_a_task_with_a_bad_budget(budget: object) -> None:
    with pytest.raises(ValueError, match="compute budget"):
        dataclasses.replace(TASK, budget_s=budget)  # type: ignore[arg-type]
