from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from flwr.app import ConfigRecord, RecordDict
from hypothesis import given
from hypothesis import strategies as st

from phalanx.channel import Downlink
from phalanx.data_mode import ModelShape
from phalanx.flower.records import (
    FAULT,
    REPLY,
    TASK,
    MalformedRecordError,
    fault_content,
    read_fault,
    read_reply,
    read_task,
    reply_content,
    task_content,
)
from phalanx.local_training import ModelDataMismatchError
from phalanx.replies import Reply, Task

REPLY_FIELDS = (
    "worker",
    "client_id",
    "run_id",
    "round",
    "nonce",
    "files",
    "payloads",
    "digests",
    "signature",
    "need_sync",
    "node_id",
    "num_samples",
    "samples",
    "compute_s",
)

# Every value a Flower ConfigRecord can carry: scalars and homogeneous lists of them.
SCALARS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.binary(max_size=30),
    st.booleans(),
)
VALUES = st.one_of(
    SCALARS,
    st.lists(st.integers(min_value=-(2**70), max_value=2**70), max_size=4),
    st.lists(st.floats(), max_size=4),
    st.lists(st.text(max_size=8), max_size=4),
    st.lists(st.binary(max_size=8), max_size=4),
    st.lists(st.booleans(), max_size=4),
)


def honest_reply() -> Reply:
    return Reply(
        worker=3,
        client_id="c",
        run_id="r",
        round=2,
        nonce="n",
        files=(4, 9),
        payloads=(b"a", b"b"),
        digests=("d4", "d9"),
        signature=b"sig",
        node_id=2**64 - 1,
    )


def test_a_reply_survives_the_round_trip_with_a_64_bit_node_id() -> None:
    assert read_reply(reply_content(honest_reply()), worker=3) == honest_reply()


def test_a_local_data_reply_keeps_its_sample_count_and_an_assigned_one_has_none() -> None:
    local = dataclasses.replace(honest_reply(), num_samples=180)

    assert read_reply(reply_content(local), worker=3).num_samples == 180
    assert "num_samples" not in reply_content(honest_reply()).config_records[REPLY]


def downlink() -> Downlink:
    return Downlink(kind="full", target="t", weights=np.zeros(3, dtype=np.float32))


@pytest.mark.parametrize("shape", [None, ModelShape(1, 8, 10)])
def test_a_task_survives_the_round_trip_with_its_model_shape_or_without(
    shape: ModelShape | None,
) -> None:
    task = Task("r", 2, "n", 5, (5,), model_shape=shape)

    read, _, config = read_task(task_content(task, downlink(), "{}"))

    assert (read, config) == (task, "{}")


def test_a_task_carries_each_file_s_samples_and_a_reply_the_digest_it_signed() -> None:
    task = Task("r", 2, "n", 5, (5, 9, 1), samples=((7, 3), (0,), (2**31 - 1, 4, 4)))
    reply = dataclasses.replace(honest_reply(), samples=task.samples_digest)

    read, _, _ = read_task(task_content(task, downlink(), "{}"))

    assert read == task
    assert read.samples_by_file() == {5: (7, 3), 9: (0,), 1: (2**31 - 1, 4, 4)}
    assert read_reply(reply_content(reply), worker=3) == reply


@pytest.mark.parametrize(
    ("samples", "counts"),
    [
        ([1, 2, 3], [1, 1]),  # counts for two files, the task has one
        ([1, 2, 3], [4]),  # more than there are
        ([1, 2, 3], [2]),  # fewer than there are
        ([1, 2], [0]),  # a file without samples
        ([-1], [1]),  # an index out of range
        ([2**31], [1]),
        ([1, 2], None),  # indices without counts
        (None, [2]),
        (["1"], [1]),
        ([True], [1]),
    ],
)
def test_a_task_whose_samples_do_not_cut_into_its_files_is_refused(
    samples: object, counts: object
) -> None:
    content = task_content(Task("r", 2, "n", 5, (5,), samples=((1,),)), downlink(), "{}")
    record = content.config_records[TASK]
    for key, value in (("samples", samples), ("sample_counts", counts)):
        if value is None:
            del record[key]
        else:
            record[key] = value  # type: ignore[assignment]

    with pytest.raises(MalformedRecordError):
        read_task(content)


@pytest.mark.parametrize(
    "value", [[1, 8], [1, 8, 10, 2], [0, 8, 10], [1, -8, 10], ["1", "8", "10"]]
)
def test_a_task_with_a_malformed_model_shape_is_refused(value: object) -> None:
    content = task_content(Task("r", 2, "n", 5, (5,)), downlink(), "{}")
    content.config_records[TASK]["model_shape"] = value  # type: ignore[assignment]

    with pytest.raises(MalformedRecordError):
        read_task(content)


@given(st.dictionaries(st.sampled_from(REPLY_FIELDS), VALUES, max_size=len(REPLY_FIELDS)))
def test_any_record_either_parses_or_is_refused_as_malformed(changes: dict[str, Any]) -> None:
    fields = dict(reply_content(honest_reply()).config_records[REPLY])
    fields.update(changes)
    content = RecordDict({REPLY: ConfigRecord(fields)})
    try:
        reply = read_reply(content, worker=3)
    except MalformedRecordError:
        return
    assert reply.worker == 3
    assert all(isinstance(f, int) and not isinstance(f, bool) and f >= 0 for f in reply.files)
    assert reply.node_id is None or 0 <= reply.node_id < 2**64
    assert reply.round >= 0
    # Its range is the coordinator's check (phalanx.replies); its type is checked here.
    assert reply.num_samples is None or type(reply.num_samples) is int


@given(st.dictionaries(st.text(max_size=10), VALUES, max_size=6))
def test_a_record_of_any_other_shape_is_refused_as_malformed(fields: dict[str, Any]) -> None:
    content = RecordDict({REPLY: ConfigRecord(fields)})
    try:
        read_reply(content, worker=3)
    except MalformedRecordError:
        return
    raise AssertionError("a record without the reply's fields parsed")


def test_the_values_that_once_stopped_a_run_are_refused() -> None:
    for changes in ({"node_id": "-1"}, {"node_id": str(2**64)}, {"files": [True]}):
        fields = {**dict(reply_content(honest_reply()).config_records[REPLY]), **changes}
        content = RecordDict({REPLY: ConfigRecord(fields)})
        try:
            read_reply(content, worker=3)
        except MalformedRecordError:
            continue
        raise AssertionError(f"{changes} parsed")


def test_a_worker_that_failed_says_so_in_one_line() -> None:
    fault = read_fault(fault_content(FileNotFoundError("/home/op/data/train.npz")))
    assert fault == ("worker_error", "FileNotFoundError: .../train.npz")
    assert read_fault(reply_content(honest_reply())) is None


def test_data_that_does_not_fit_the_model_is_reported_as_a_data_mismatch() -> None:
    error = ModelDataMismatchError("mine/train: the data has 10 classes but the model only 3")

    fault = read_fault(fault_content(error))

    assert fault == (
        "data_mismatch",
        "ModelDataMismatchError: mine/train: the data has 10 classes but the model only 3",
    )


@pytest.mark.parametrize("kind", ["outlier", "bad_signature", "unchecked_reply", 7, b"x", ""])
def test_a_worker_names_no_fault_kind_but_its_own_failures(kind: object) -> None:
    fault = read_fault(RecordDict({FAULT: ConfigRecord({"error": "boom", "kind": kind})}))

    assert fault == ("worker_error", "boom")


@given(VALUES)
def test_whatever_a_fault_record_holds_it_reads_as_one_short_line(error: Any) -> None:
    fault = read_fault(RecordDict({FAULT: ConfigRecord({"error": error})}))
    assert fault is not None
    kind, cause = fault
    assert kind == "worker_error"
    assert cause and "\n" not in cause and len(cause) <= 300
