"""The ClientApp answers any batch message with a reply it can send, never a crash.

A batch it cannot read is one fault for all of it; a task of a readable batch that its
node cannot compute is that task's fault alone, its neighbours answering as usual.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flwr.app import ConfigRecord, Context, Message, RecordDict

from phalanx.channel import PlainChannel
from phalanx.data import load_dataset
from phalanx.flower.records import (
    BATCH_TYPE,
    TASK,
    batch_content,
    batch_part,
    read_fault,
    read_reply,
)
from phalanx.nets import flatten_params, init_model
from phalanx_clients.app import build_client_app
from tests.support.configs import small_config
from tests.support.fake_grid import NODE_BASE, server_task_identity
from tests.support.planned_tasks import planned_task

CONFIG = small_config(attack={"name": None, "q": 0})


@pytest.fixture(autouse=True)
def _server_task_identity() -> Iterator[None]:
    with server_task_identity():
        yield


def batch(workers: tuple[int, ...]) -> RecordDict:
    model = init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=CONFIG.seed)
    size = len(load_dataset("digits", "train").y)
    tasks = [planned_task(CONFIG, size, 1, w) for w in workers]
    return batch_content(
        tasks, PlainChannel(flatten_params(model)).downlink(), CONFIG.model_dump_json()
    )


def answer(content: RecordDict) -> Message:
    message = Message(content, dst_node_id=NODE_BASE, message_type=BATCH_TYPE)
    message.metadata.__dict__["_message_id"] = "m"
    context = Context(
        run_id=1, node_id=NODE_BASE, node_config={}, state=RecordDict(), run_config={}
    )
    return build_client_app()(message=message, context=context)


def shared(**fields: object) -> RecordDict:
    content = batch((0, 2))
    content[TASK] = ConfigRecord({**dict(content.config_records[TASK]), **fields})  # type: ignore[dict-item]
    return content


@pytest.mark.parametrize(
    "content",
    [
        shared(count=3),
        shared(count=2**40),
        shared(downlink="sparse"),
        shared(round="1"),
        shared(run_config="{"),
        RecordDict(),
    ],
    ids=[
        "count-past-its-tasks",
        "huge-count",
        "unknown-downlink",
        "round-as-text",
        "bad-config",
        "empty",
    ],
)
def test_a_batch_the_node_cannot_read_or_run_is_answered_with_a_fault(content: RecordDict) -> None:
    reply = answer(content)
    assert not reply.has_error()
    if read_fault(reply.content) is None:  # read, but no task could run: each says so
        assert all(read_fault(batch_part(reply.content, i)) for i in range(2))
    else:
        assert list(reply.content.config_records) == ["fault"]


def test_a_task_its_node_cannot_compute_is_its_own_fault_and_its_neighbour_answers() -> None:
    content = batch((0, 2))
    own = dict(content.config_records[f"{TASK}.0"])
    # Sample indices past the node's dataset: its data cannot serve this task.
    own["samples"] = [2**31 - 1] * len(own["samples"])  # type: ignore[arg-type]
    content[f"{TASK}.0"] = ConfigRecord(own)  # type: ignore[arg-type]
    reply = answer(content)
    assert read_fault(batch_part(reply.content, 0)) is not None
    assert read_fault(batch_part(reply.content, 1)) is None
    assert (
        read_reply(batch_part(reply.content, 1), worker=2).files
        == planned_task(CONFIG, len(load_dataset("digits", "train").y), 1, 2).files
    )
