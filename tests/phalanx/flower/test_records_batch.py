"""A batch message (a virtual node's workers' tasks in one) and its reply, both directions."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import ConfigRecord, RecordDict
from hypothesis import given
from hypothesis import strategies as st

from phalanx.flower.records import (
    MAX_BATCH,
    REPLY,
    TASK,
    MalformedRecordError,
    batch_content,
    batch_part,
    batch_reply_content,
    fault_content,
    read_batch,
    read_fault,
    read_reply,
    reply_content,
)
from phalanx.replies import Reply, Task
from tests.support.batch_tasks import DOWNLINK, TASKS
from tests.support.signed_replies import unsigned_reply


def reply_of(worker: int) -> Reply:
    return unsigned_reply(worker, (b"p",), files=(worker,), round_=4)


def test_a_batch_survives_the_round_trip_task_by_task_with_one_downlink() -> None:
    tasks, downlink, config = read_batch(batch_content(TASKS, DOWNLINK, '{"x": 1}'))
    assert tasks == TASKS
    assert config == '{"x": 1}'
    assert (downlink.kind, downlink.target, downlink.base, downlink.delta) == (
        "delta",
        "t" * 64,
        "b" * 64,
        b"\x01\x02",
    )
    assert downlink.weights is not None
    np.testing.assert_array_equal(downlink.weights, DOWNLINK.weights)
    np.testing.assert_array_equal(downlink.history["layer.0"], DOWNLINK.history["layer.0"])


def test_a_batch_carries_the_model_once_whatever_its_workers() -> None:
    content = batch_content(TASKS, DOWNLINK, "{}")
    assert list(content.array_records) == ["model"]
    assert sorted(content.config_records) == [TASK, f"{TASK}.0", f"{TASK}.1", f"{TASK}.2"]


@pytest.mark.parametrize(
    "tasks",
    [
        [],
        [TASKS[0], Task("run", 5, "nonce", 1, (0,))],
        [TASKS[0], Task("other", 4, "nonce", 1, (0,))],
    ],
    ids=["empty", "two-rounds", "two-runs"],
)
def test_a_batch_of_no_task_or_of_several_rounds_is_not_built(tasks: list[Task]) -> None:
    with pytest.raises(ValueError, match="batch"):
        batch_content(tasks, DOWNLINK, "{}")


def tampered(**changes: object) -> RecordDict:
    content = batch_content(TASKS, DOWNLINK, "{}")
    record = dict(content.config_records[TASK])
    record.update(changes)
    content[TASK] = ConfigRecord(record)  # type: ignore[arg-type]
    return content


@pytest.mark.parametrize("count", [0, -1, MAX_BATCH + 1, 4, True, "3", 3.0, [3]], ids=repr)
def test_a_batch_whose_count_is_out_of_range_or_past_its_tasks_is_refused(count: object) -> None:
    with pytest.raises(MalformedRecordError):
        read_batch(tampered(count=count))


def test_a_batch_with_a_malformed_task_is_refused_whole() -> None:
    content = batch_content(TASKS, DOWNLINK, "{}")
    content[f"{TASK}.1"] = ConfigRecord({"worker": 9, "files": [True]})
    with pytest.raises(MalformedRecordError, match="files"):
        read_batch(content)


def test_a_batch_reply_gives_each_task_its_own_answer_in_order() -> None:
    parts = [reply_content(reply_of(0)), fault_content(OSError("disk full")), RecordDict()]
    content = batch_reply_content(parts)
    assert read_reply(batch_part(content, 0), worker=0) == reply_of(0)
    assert read_fault(batch_part(content, 1)) == ("worker_error", "OSError: disk full")
    with pytest.raises(MalformedRecordError, match="no reply record"):
        read_reply(batch_part(content, 2), worker=17)


@given(index=st.integers(min_value=-5, max_value=10))
def test_a_part_is_read_only_from_its_own_records(index: int) -> None:
    content = batch_reply_content([reply_content(reply_of(0)), reply_content(reply_of(9))])
    part = batch_part(content, index)
    expected = {0: reply_of(0), 9: reply_of(9)}.get({0: 0, 1: 9}.get(index, -1))
    if expected is None:
        assert REPLY not in part.config_records
    else:
        assert read_reply(part, worker=expected.worker) == expected
