"""Tasks and replies as Flower records, both directions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar, cast

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from phalanx.channel import Downlink
from phalanx.data_mode import ModelShape
from phalanx.faults import describe, fault_kind, fault_kind_named, one_line
from phalanx.replies import MAX_COMPUTE_S, Reply, Task

TASK = "task"
MODEL = "model"
REPLY = "reply"
FAULT = "fault"
MESSAGE_TYPE = "train"
BATCH_TYPE = "train.batch"
"""The message type of a batch: several workers' tasks on one virtual node."""

#: Most tasks a batch message may hold (a node's workers in one round).
MAX_BATCH = 4096

#: Largest file id or round number a reply may carry (they are indices, not sizes).
MAX_ID = 2**31 - 1
#: Longest identifier, nonce or digest a reply may carry.
MAX_TEXT = 256
#: Longest signature (a DER ECDSA signature over P-384 is at most 104 bytes).
MAX_SIGNATURE_BYTES = 512

T = TypeVar("T")


class MalformedRecordError(ValueError):
    """A reply's records do not have the expected fields and types."""


def task_content(task: Task, downlink: Downlink, run_config_json: str) -> RecordDict:
    """Build the content of a task message: the task, the run config and the downlink."""
    record = _round_record(task, downlink, run_config_json)
    record.update(_task_record(task))
    return RecordDict({TASK: record, MODEL: _model_record(downlink)})


def batch_content(tasks: Sequence[Task], downlink: Downlink, run_config_json: str) -> RecordDict:
    """Build the content of a batch message: several workers' tasks of one round, one model.

    A virtual node of Flower's simulation hosts several workers; their tasks travel in
    one message (:data:`BATCH_TYPE`), the round's fields, the run config and the
    downlink once, each task's own fields in record ``task.<i>``.

    Raises
    ------
    ValueError
        When ``tasks`` is empty, longer than :data:`MAX_BATCH`, or of several rounds.
    """
    if not 1 <= len(tasks) <= MAX_BATCH:
        raise ValueError(f"a batch holds 1 to {MAX_BATCH} tasks, got {len(tasks)}")
    first = tasks[0]
    if any((t.run_id, t.round, t.nonce) != (first.run_id, first.round, first.nonce) for t in tasks):
        raise ValueError("a batch holds tasks of one run's one round")
    record = _round_record(first, downlink, run_config_json)
    record["count"] = len(tasks)
    content = RecordDict({TASK: record, MODEL: _model_record(downlink)})
    for i, task in enumerate(tasks):
        content[f"{TASK}.{i}"] = _task_record(task)
    return content


def _round_record(task: Task, downlink: Downlink, run_config_json: str) -> ConfigRecord:
    """Return the fields a round's tasks share: the round, the run config, the downlink."""
    return ConfigRecord(
        {
            "run_id": task.run_id,
            "round": task.round,
            "nonce": task.nonce,
            "run_config": run_config_json,
            "downlink": downlink.kind,
            "target": downlink.target,
            "base": downlink.base,
            "delta": downlink.delta,
        }
    )


def _task_record(task: Task) -> ConfigRecord:
    """Return the fields of one worker's task: who, which files, their samples, its budget."""
    record = ConfigRecord({"worker": task.worker, "files": list(task.files)})
    if task.model_shape is not None:  # local data: the model the client builds
        record["model_shape"] = task.model_shape.as_list()
    if task.samples is not None:  # assigned data: each file's sample indices, flat
        record["samples"] = [i for idx in task.samples for i in idx]
        record["sample_counts"] = [len(idx) for idx in task.samples]
    if task.budget_s is not None:  # DropCompute: seconds of compute this round
        record["budget_s"] = task.budget_s
    return record


def _model_record(downlink: Downlink) -> ArrayRecord:
    arrays = {f"history.{k}": v for k, v in downlink.history.items()}
    if downlink.weights is not None:
        arrays["weights"] = downlink.weights
    return ArrayRecord(array_dict={k: Array(np.array(v, order="C")) for k, v in arrays.items()})


def read_task(content: RecordDict) -> tuple[Task, Downlink, str]:
    """Parse a task message (the worker side).

    Raises
    ------
    MalformedRecordError
        When any field is missing or of the wrong type.
    """
    try:
        record = content.config_records[TASK]
        return (
            _read_task(record, record),
            _read_downlink(content),
            _scalar(record, "run_config", str),
        )
    except MalformedRecordError:
        raise
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise MalformedRecordError(f"task message is malformed: {exc}") from exc


def read_batch(content: RecordDict) -> tuple[list[Task], Downlink, str]:
    """Parse a batch message (the worker side): its tasks, in order, the downlink, the config.

    Raises
    ------
    MalformedRecordError
        When any field is missing or of the wrong type, or the count is out of range.
    """
    try:
        shared = content.config_records[TASK]
        count = _scalar(shared, "count", int)
        if not 1 <= count <= MAX_BATCH:
            raise MalformedRecordError(f"a batch of {count} tasks is out of range")
        tasks = [_read_task(shared, content.config_records[f"{TASK}.{i}"]) for i in range(count)]
        return tasks, _read_downlink(content), _scalar(shared, "run_config", str)
    except MalformedRecordError:
        raise
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise MalformedRecordError(f"batch message is malformed: {exc}") from exc


def _read_task(shared: ConfigRecord, own: ConfigRecord) -> Task:
    files = tuple(_list(own, "files", int))
    return Task(
        run_id=_scalar(shared, "run_id", str),
        round=_scalar(shared, "round", int),
        nonce=_scalar(shared, "nonce", str),
        worker=_scalar(own, "worker", int),
        files=files,
        model_shape=_model_shape(own),
        samples=_samples(own, len(files)),
        budget_s=_budget(own.get("budget_s")),
    )


def _read_downlink(content: RecordDict) -> Downlink:
    record = content.config_records[TASK]
    arrays = {k: _array(k, v) for k, v in content.array_records[MODEL].items()}
    kind = _scalar(record, "downlink", str)
    if kind not in ("full", "delta"):
        raise MalformedRecordError(f"unknown downlink kind {kind!r}")
    return Downlink(
        kind=kind,  # type: ignore[arg-type]
        target=_scalar(record, "target", str),
        weights=arrays.get("weights"),
        history={k.removeprefix("history."): v for k, v in arrays.items() if k != "weights"},
        delta=_scalar(record, "delta", bytes),
        base=_scalar(record, "base", str),
    )


def _array(key: str, array: Array) -> np.ndarray:
    """Load one array of a task's model: a NumPy array, or a malformed record."""
    try:
        value = array.numpy()
    except Exception as exc:  # numpy.load on any bytes: EOFError, BadZipFile, ValueError...
        raise MalformedRecordError(f"array {key!r} cannot be loaded: {exc}") from exc
    if not isinstance(value, np.ndarray):  # an .npz archive loads as a mapping of arrays
        raise MalformedRecordError(f"array {key!r} is not one array")
    return value


def reply_content(reply: Reply) -> RecordDict:
    """Build the content of a reply message."""
    fields: dict[str, object] = {
        "worker": reply.worker,
        "client_id": reply.client_id,
        "run_id": reply.run_id,
        "round": reply.round,
        "nonce": reply.nonce,
        "files": list(reply.files),
        "payloads": list(reply.payloads),
        "digests": list(reply.digests),
        "signature": reply.signature,
        "need_sync": reply.need_sync,
    }
    if reply.node_id is not None:
        fields["node_id"] = str(reply.node_id)
    if reply.num_samples is not None:
        fields["num_samples"] = reply.num_samples
    if reply.samples is not None:
        fields["samples"] = reply.samples
    if reply.compute_s:
        fields["compute_s"] = [float(t) for t in reply.compute_s]
    return RecordDict({REPLY: ConfigRecord(fields)})  # type: ignore[arg-type]


def fault_content(error: BaseException) -> RecordDict:
    """Build the reply of a worker whose own computation failed: what failed, in one line.

    The worker's traceback stays in its own log; the coordinator records the line as a
    fault of this worker (never as a lie) and logs it, of the kind the error names
    (:func:`phalanx.faults.fault_kind`: ``data_mismatch`` for data that does not fit
    the run's model, else ``worker_error``).
    """
    return RecordDict({FAULT: ConfigRecord({"error": describe(error), "kind": fault_kind(error)})})


def read_fault(content: RecordDict) -> tuple[str, str] | None:
    """Return the fault kind and one-line cause of a fault reply, else ``None``.

    Whatever the worker wrote is cut to one sanitised line; a fault record without a
    readable cause still counts as a fault. The kind is one a worker may give its own
    failure (:func:`phalanx.faults.fault_kind_named`), ``worker_error`` otherwise.
    """
    record = content.config_records.get(FAULT)
    if record is None:
        return None
    error = record.get("error")
    cause = one_line(error) if isinstance(error, str) else "the worker reported a failure"
    return fault_kind_named(record.get("kind")), cause


def batch_reply_content(parts: Sequence[RecordDict]) -> RecordDict:
    """Build the reply to a batch: the ``i``-th task's reply or fault as records ``<name>.<i>``.

    Each part is what a single task's message would have answered
    (:func:`reply_content` or :func:`fault_content`), in the batch's order.
    """
    content = RecordDict()
    for i, part in enumerate(parts):
        for name, record in part.config_records.items():
            content[f"{name}.{i}"] = record
    return content


def batch_part(content: RecordDict, index: int) -> RecordDict:
    """Return the ``index``-th task's answer in a batch reply, as a single task's would read.

    A part the worker left out has neither a reply nor a fault record: reading it as
    a reply (:func:`read_reply`) says so.
    """
    part = RecordDict()
    for name in (REPLY, FAULT):
        record = content.config_records.get(f"{name}.{index}")
        if record is not None:
            part[name] = record
    return part


def read_reply(content: RecordDict, *, worker: int) -> Reply:
    """Parse a reply message sent by ``worker``, checking every field's type and range.

    Raises
    ------
    MalformedRecordError
        When any field is missing, of the wrong type, or out of range; never any
        other exception, whatever the record holds.
    """
    try:
        record = content.config_records[REPLY]
    except KeyError:
        raise MalformedRecordError("reply has no reply record") from None
    claimed = record.get("worker")
    if isinstance(claimed, bool) or claimed != worker:
        raise MalformedRecordError(
            f"reply claims worker {_shown(claimed)}, was sent to worker {worker}"
        )
    files = _list(record, "files", int)
    for file in files:
        if not 0 <= file <= MAX_ID:
            raise MalformedRecordError(f"file id {file} is out of range")
    signature = _scalar(record, "signature", bytes)
    if len(signature) > MAX_SIGNATURE_BYTES:
        raise MalformedRecordError(f"signature of {len(signature)} bytes is too long")
    need_sync = record.get("need_sync", False)
    if not isinstance(need_sync, bool):
        raise MalformedRecordError("field 'need_sync' is not bool")
    round_ = _scalar(record, "round", int)
    if not 0 <= round_ <= MAX_ID:
        raise MalformedRecordError(f"round {round_} is out of range")
    compute_s = _compute_times(record, len(files))
    return Reply(
        worker=worker,
        client_id=_text(record, "client_id"),
        run_id=_text(record, "run_id"),
        round=round_,
        nonce=_text(record, "nonce"),
        files=tuple(files),
        payloads=tuple(_list(record, "payloads", bytes)),
        digests=tuple(_text_list(record, "digests")),
        signature=signature,
        node_id=_node_id(record.get("node_id")),
        need_sync=need_sync,
        num_samples=_count(record.get("num_samples")),
        samples=None if record.get("samples") is None else _text(record, "samples"),
        compute_s=compute_s,
    )


def _budget(value: object) -> float | None:
    """Parse a task's compute budget: seconds in ``(0, MAX_COMPUTE_S]``, or absent."""
    if value is None:
        return None
    if not isinstance(value, float) or not (math.isfinite(value) and 0 < value <= MAX_COMPUTE_S):
        raise MalformedRecordError(
            f"field 'budget_s' is not a number of seconds in (0, {MAX_COMPUTE_S:g}]"
        )
    return value


def _compute_times(record: ConfigRecord, num_files: int) -> tuple[float, ...]:
    """Parse a reply's claimed compute seconds: none, or one per file, each finite and bounded.

    A claim all the same: the coordinator bounds it by the reply's real response time.
    """
    if record.get("compute_s") is None:
        return ()
    times = _list(record, "compute_s", float)
    if len(times) != num_files:
        raise MalformedRecordError(
            f"field 'compute_s' holds {len(times)} times for {num_files} files"
        )
    if any(not (math.isfinite(t) and 0 <= t <= MAX_COMPUTE_S) for t in times):
        raise MalformedRecordError(
            f"field 'compute_s' holds a time that is not in [0, {MAX_COMPUTE_S:g}] s"
        )
    return tuple(times)


def _count(value: object) -> int | None:
    """Parse a sample count: an int (its range is the coordinator's check), or absent."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedRecordError("field 'num_samples' is not int")
    return value


def _model_shape(record: ConfigRecord) -> ModelShape | None:
    """Parse a local-data task's model shape (three ints), or ``None`` for assigned data."""
    if record.get("model_shape") is None:
        return None
    values = _list(record, "model_shape", int)
    if len(values) != 3:
        raise MalformedRecordError("field 'model_shape' does not hold three ints")
    return ModelShape(*values)


def _samples(record: ConfigRecord, num_files: int) -> tuple[tuple[int, ...], ...] | None:
    """Parse each file's sample indices (flat, with a count per file), or ``None``."""
    if record.get("samples") is None and record.get("sample_counts") is None:
        return None
    flat = _list(record, "samples", int)
    counts = _list(record, "sample_counts", int)
    if len(counts) != num_files:
        raise MalformedRecordError(
            f"sample counts for {len(counts)} files, the task has {num_files}"
        )
    if any(not 1 <= n <= len(flat) for n in counts) or sum(counts) != len(flat):
        raise MalformedRecordError(f"sample counts {counts[:8]} do not cut {len(flat)} indices")
    if any(not 0 <= i <= MAX_ID for i in flat):
        raise MalformedRecordError("a sample index is out of range")
    out = []
    start = 0
    for n in counts:
        out.append(tuple(flat[start : start + n]))
        start += n
    return tuple(out)


def _node_id(value: object) -> int | None:
    """Parse a Flower node id sent as a decimal string (unsigned 64-bit)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.isascii() or not value.isdecimal():
        raise MalformedRecordError("field 'node_id' is not a decimal string")
    if len(value) > 20 or int(value) >= 2**64:
        raise MalformedRecordError("field 'node_id' is not an unsigned 64-bit integer")
    return int(value)


def _shown(value: object) -> str:
    """Show a value a worker sent, briefly, without trusting its ``repr``."""
    if isinstance(value, bool | int | float):
        return repr(value)[:40]
    return f"a {type(value).__name__}"


def _scalar(record: ConfigRecord, key: str, kind: type[T]) -> T:
    value = record.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise MalformedRecordError(f"field {key!r} is not {kind.__name__}")
    return value


def _text(record: ConfigRecord, key: str) -> str:
    value = _scalar(record, key, str)
    if len(value) > MAX_TEXT:
        raise MalformedRecordError(f"field {key!r} is longer than {MAX_TEXT} characters")
    return value


def _list(record: ConfigRecord, key: str, kind: type[T]) -> list[T]:
    value = record.get(key, [])
    if not isinstance(value, list) or not all(
        isinstance(v, kind) and (kind is bool or not isinstance(v, bool)) for v in value
    ):
        raise MalformedRecordError(f"field {key!r} is not a list of {kind.__name__}")
    return cast(list[T], list(value))


def _text_list(record: ConfigRecord, key: str) -> list[str]:
    values = _list(record, key, str)
    if any(len(v) > MAX_TEXT for v in values):
        raise MalformedRecordError(f"field {key!r} holds a string longer than {MAX_TEXT}")
    return values
