"""Tasks and replies as Flower records, both directions."""

from __future__ import annotations

from typing import TypeVar, cast

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from phalanx.channel import Downlink
from phalanx.replies import Reply, Task

TASK = "task"
MODEL = "model"
REPLY = "reply"
MESSAGE_TYPE = "train"

T = TypeVar("T")


class MalformedRecordError(ValueError):
    """A reply's records do not have the expected fields and types."""


def task_content(task: Task, downlink: Downlink, run_config_json: str) -> RecordDict:
    """Build the content of a task message: the task, the run config and the downlink."""
    record = ConfigRecord(
        {
            "run_id": task.run_id,
            "round": task.round,
            "nonce": task.nonce,
            "worker": task.worker,
            "files": list(task.files),
            "run_config": run_config_json,
            "downlink": downlink.kind,
            "target": downlink.target,
            "base": downlink.base,
            "delta": downlink.delta,
        }
    )
    arrays = {f"history.{k}": v for k, v in downlink.history.items()}
    if downlink.weights is not None:
        arrays["weights"] = downlink.weights
    model = ArrayRecord(array_dict={k: Array(np.array(v, order="C")) for k, v in arrays.items()})
    return RecordDict({TASK: record, MODEL: model})


def read_task(content: RecordDict) -> tuple[Task, Downlink, str]:
    """Parse a task message (the worker side).

    Raises
    ------
    MalformedRecordError
        When any field is missing or of the wrong type.
    """
    try:
        record = content.config_records[TASK]
        task = Task(
            run_id=_scalar(record, "run_id", str),
            round=_scalar(record, "round", int),
            nonce=_scalar(record, "nonce", str),
            worker=_scalar(record, "worker", int),
            files=tuple(_list(record, "files", int)),
        )
        arrays = {k: v.numpy() for k, v in content.array_records[MODEL].items()}
        kind = _scalar(record, "downlink", str)
        if kind not in ("full", "delta"):
            raise MalformedRecordError(f"unknown downlink kind {kind!r}")
        downlink = Downlink(
            kind=kind,  # type: ignore[arg-type]
            target=_scalar(record, "target", str),
            weights=arrays.get("weights"),
            history={k.removeprefix("history."): v for k, v in arrays.items() if k != "weights"},
            delta=_scalar(record, "delta", bytes),
            base=_scalar(record, "base", str),
        )
        return task, downlink, _scalar(record, "run_config", str)
    except MalformedRecordError:
        raise
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise MalformedRecordError(f"task message is malformed: {exc}") from exc


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
    return RecordDict({REPLY: ConfigRecord(fields)})  # type: ignore[arg-type]


def read_reply(content: RecordDict, *, worker: int) -> Reply:
    """Parse a reply message sent by ``worker``.

    Raises
    ------
    MalformedRecordError
        When any field is missing or of the wrong type.
    """
    try:
        record = content.config_records[REPLY]
        claimed = record["worker"]
        if claimed != worker:
            raise MalformedRecordError(
                f"reply claims worker {claimed!r}, was sent to worker {worker}"
            )
        files = _list(record, "files", int)
        payloads = _list(record, "payloads", bytes)
        digests = _list(record, "digests", str)
        signature = record["signature"]
        if not isinstance(signature, bytes):
            raise MalformedRecordError("signature is not bytes")
        node_id = record.get("node_id")
        return Reply(
            worker=worker,
            client_id=_scalar(record, "client_id", str),
            run_id=_scalar(record, "run_id", str),
            round=_scalar(record, "round", int),
            nonce=_scalar(record, "nonce", str),
            files=tuple(files),
            payloads=tuple(payloads),
            digests=tuple(digests),
            signature=signature,
            node_id=int(node_id) if isinstance(node_id, str) else None,
            need_sync=record.get("need_sync") is True,
        )
    except MalformedRecordError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedRecordError(f"reply is malformed: {exc!r}") from exc


def _scalar(record: ConfigRecord, key: str, kind: type[T]) -> T:
    value = record[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise MalformedRecordError(f"field {key!r} is not {kind.__name__}")
    return value


def _list(record: ConfigRecord, key: str, kind: type[T]) -> list[T]:
    value = record.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, kind) for v in value):
        raise MalformedRecordError(f"field {key!r} is not a list of {kind.__name__}")
    return cast(list[T], list(value))
