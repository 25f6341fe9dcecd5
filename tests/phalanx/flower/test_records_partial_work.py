"""A task's compute budget and a reply's compute times on the wire: bounded, or refused."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from phalanx.channel import Downlink
from phalanx.flower.records import (
    REPLY,
    TASK,
    MalformedRecordError,
    read_reply,
    read_task,
    reply_content,
    task_content,
)
from phalanx.replies import MAX_COMPUTE_S, Reply, Task

TASK_OF_TWO = Task("r", 2, "n", 5, (5, 9), samples=((1, 2), (3,)))


def downlink() -> Downlink:
    return Downlink(kind="full", target="t", weights=np.zeros(3, dtype=np.float32))


def reply(**fields: object) -> Reply:
    base = Reply(3, "c", "r", 2, "n", (4, 9), (b"a", b"b"), ("d4", "d9"), b"sig")
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


def test_a_task_keeps_its_budget_and_a_task_without_one_sends_none() -> None:
    budgeted = dataclasses.replace(TASK_OF_TWO, budget_s=2.5)
    read, _, _ = read_task(task_content(budgeted, downlink(), "{}"))
    assert read == budgeted
    assert "budget_s" not in task_content(TASK_OF_TWO, downlink(), "{}").config_records[TASK]


@pytest.mark.parametrize(
    "budget", [math.nan, math.inf, -1.0, 0.0, MAX_COMPUTE_S * 2, "2.5", 2, True, [2.5]]
)
def test_a_worker_refuses_a_task_whose_budget_is_no_number_of_seconds(budget: object) -> None:
    content = task_content(TASK_OF_TWO, downlink(), "{}")
    content.config_records[TASK]["budget_s"] = budget  # type: ignore[assignment]
    with pytest.raises(MalformedRecordError, match="budget_s"):
        read_task(content)


def test_a_reply_keeps_its_compute_times_one_per_file() -> None:
    timed = reply(compute_s=(0.25, 1.5))
    assert read_reply(reply_content(timed), worker=3) == timed
    assert "compute_s" not in reply_content(reply()).config_records[REPLY]


@pytest.mark.parametrize(
    "times",
    [
        [0.25],  # one time for two files
        [0.25, 1.5, 2.0],
        [math.nan, 1.0],
        [math.inf, 1.0],
        [-0.5, 1.0],
        [1.0, MAX_COMPUTE_S * 10],
        [1, 2],  # not floats
        ["1.0", "2.0"],
        [True, False],
        1.0,
    ],
)
def test_a_reply_with_absurd_compute_times_is_malformed(times: object) -> None:
    content = reply_content(reply())
    content.config_records[REPLY]["compute_s"] = times  # type: ignore[assignment]
    with pytest.raises(MalformedRecordError, match="compute_s"):
        read_reply(content, worker=3)
