"""Hostile batch messages and batch replies: read as malformed, never as anything else.

A batch message is read by a node's ClientApp, a batch reply by the coordinator; either
may come from a broken or hostile peer. Whatever a batch message holds, reading it
either gives 1 to :data:`MAX_BATCH` tasks of its one round or raises
:class:`MalformedRecordError`; whatever a batch reply holds, part ``i`` is read from
records named exactly ``reply.<i>`` and ``fault.<i>``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict
from hypothesis import given
from hypothesis import strategies as st

from phalanx.flower.records import (
    FAULT,
    MAX_BATCH,
    MODEL,
    REPLY,
    TASK,
    MalformedRecordError,
    batch_content,
    batch_part,
    read_batch,
    read_task,
    task_content,
)
from tests.support.batch_tasks import DOWNLINK, TASKS

# Every value a Flower ConfigRecord can carry: scalars and homogeneous lists of them.
SCALARS = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.binary(max_size=12),
    st.booleans(),
)
VALUES = st.one_of(
    SCALARS,
    st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=4),
    st.lists(st.floats(), max_size=4),
    st.lists(st.text(max_size=8), max_size=4),
    st.lists(st.booleans(), max_size=4),
)
SHARED_FIELDS = ("run_id", "round", "nonce", "run_config", "downlink", "target", "base", "delta")
TASK_FIELDS = ("worker", "files", "model_shape", "samples", "sample_counts", "budget_s")
RECORDS = st.sampled_from([TASK, *(f"{TASK}.{i}" for i in (0, 1, 2, 3, -1)), "task.01"])
FIELDS = st.sampled_from(("count", *SHARED_FIELDS, *TASK_FIELDS))

# Bytes a model array may hold instead of NumPy's: empty, a zip, truncated, pickled, any.
ARRAY_BYTES = st.one_of(
    st.sampled_from([b"", b"PK\x03\x04", b"PK\x05\x06" + bytes(18), b"\x93NUMPY", b"\x80\x04N."]),
    st.binary(max_size=64),
)

# A change to a batch message: a field set (or dropped: None), a record dropped or put in
# under another record type, or the model's array given other bytes.
CHANGES = st.one_of(
    st.tuples(st.just("set"), RECORDS, FIELDS, st.one_of(st.none(), VALUES)),
    st.tuples(st.just("set"), st.just(TASK), st.just("count"), st.integers(-2, 5)),
    st.tuples(st.just("drop"), st.sampled_from([TASK, MODEL, f"{TASK}.1"])),
    st.tuples(st.just("array"), st.sampled_from([TASK, f"{TASK}.0", MODEL])),
    st.tuples(st.just("bytes"), ARRAY_BYTES),
)


def changed(content: RecordDict, change: tuple[Any, ...]) -> RecordDict:
    match change:
        case ("set", name, key, value):
            fields = dict(content.config_records.get(name, {}))
            if value is None:
                fields.pop(key, None)
            else:
                fields[key] = value
            content[name] = ConfigRecord(fields)
        case ("drop", name):
            if name in content:
                del content[name]
        case ("array", name):
            content[name] = ArrayRecord({"x": Array(np.zeros(2, dtype=np.float32))})
        case ("bytes", data):
            array = Array(dtype="float32", shape=(6,), stype="numpy.ndarray", data=data)
            content[MODEL] = ArrayRecord({"weights": array})
    return content


@given(st.lists(CHANGES, max_size=6))
def test_any_batch_message_reads_as_its_tasks_or_is_refused_as_malformed(
    changes: list[tuple[Any, ...]],
) -> None:
    content = batch_content(TASKS, DOWNLINK, "{}")
    for change in changes:
        content = changed(content, change)
    try:
        tasks, downlink, config = read_batch(content)
    except MalformedRecordError:
        return
    assert 1 <= len(tasks) <= MAX_BATCH
    assert len({(t.run_id, t.round, t.nonce) for t in tasks}) == 1
    assert downlink.kind in ("full", "delta")
    assert downlink.weights is None or isinstance(downlink.weights, np.ndarray)
    assert isinstance(config, str)


@pytest.mark.parametrize(
    "data", [b"", b"PK\x03\x04", b"PK\x05\x06" + bytes(18)], ids=["empty", "zip", "empty-zip"]
)
def test_a_model_array_numpy_cannot_load_is_a_malformed_task_and_batch(data: bytes) -> None:
    """Empty bytes raised EOFError, a zip BadZipFile: the ClientApp's fault, not the reader's."""
    array = ArrayRecord(
        {"weights": Array(dtype="float32", shape=(6,), stype="numpy.ndarray", data=data)}
    )
    batch = batch_content(TASKS, DOWNLINK, "{}")
    batch[MODEL] = array
    single = task_content(TASKS[0], DOWNLINK, "{}")
    single[MODEL] = array
    with pytest.raises(MalformedRecordError, match="weights"):
        read_batch(batch)
    with pytest.raises(MalformedRecordError, match="weights"):
        read_task(single)


def test_a_batch_whose_count_falls_short_of_its_records_reads_only_the_counted_tasks() -> None:
    content = batch_content(TASKS, DOWNLINK, "{}")
    content[TASK]["count"] = 2
    tasks, _, _ = read_batch(content)
    assert tasks == TASKS[:2]


def test_a_task_record_of_another_record_type_is_malformed() -> None:
    content = batch_content(TASKS, DOWNLINK, "{}")
    content[f"{TASK}.1"] = ArrayRecord({"worker": Array(np.zeros(1, dtype=np.int64))})
    with pytest.raises(MalformedRecordError):
        read_batch(content)


NAMES = st.one_of(
    st.sampled_from(
        [f"{n}.{i}" for n in (REPLY, FAULT) for i in ("0", "1", "01", "-1", " 1", "1.0", "+1", "١")]
    ),
    st.text(max_size=10),
)


@given(names=st.lists(NAMES, max_size=8, unique=True), index=st.integers(-2, 3))
def test_a_part_holds_only_the_records_named_exactly_for_its_index(
    names: list[str], index: int
) -> None:
    content = RecordDict({name: ConfigRecord({"name": name}) for name in names})
    part = batch_part(content, index)
    expected = {n: f"{n}.{index}" for n in (REPLY, FAULT) if f"{n}.{index}" in names}
    assert {k: v["name"] for k, v in part.config_records.items()} == expected
