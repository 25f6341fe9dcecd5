from __future__ import annotations

from typing import Any

from flwr.app import ConfigRecord, RecordDict
from hypothesis import given
from hypothesis import strategies as st

from phalanx.flower.records import (
    FAULT,
    REPLY,
    MalformedRecordError,
    fault_content,
    read_fault,
    read_reply,
    reply_content,
)
from phalanx.replies import Reply

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
    cause = read_fault(fault_content(FileNotFoundError("/home/op/data/train.npz")))
    assert cause == "FileNotFoundError: .../train.npz"
    assert read_fault(reply_content(honest_reply())) is None


@given(VALUES)
def test_whatever_a_fault_record_holds_it_reads_as_one_short_line(error: Any) -> None:
    cause = read_fault(RecordDict({FAULT: ConfigRecord({"error": error})}))
    assert cause and "\n" not in cause and len(cause) <= 300
