"""A worker computes its task from the task alone: its own files, never the round's plan."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from phalanx.channel import PlainChannel
from phalanx.config import RunConfig
from phalanx.data import load_dataset
from phalanx.identity import generate_private_key
from phalanx.nets import flatten_params, init_model
from phalanx.replies import ReplyRejectedError, check_reply, make_float32_decoder
from phalanx_clients.worker import Worker
from tests.support.configs import small_config
from tests.support.planned_tasks import planned_task
from tests.support.task_work import count_plan_calls, count_trainings


def random_config(k: int) -> RunConfig:
    return small_config(
        data={"samples_per_file": 4},
        assignment={"scheme": "random", "num_workers": k, "r": 3},
        attack={"name": None, "q": 0},
    )


@pytest.mark.parametrize("k", [12, 240])
def test_a_worker_trains_its_own_files_and_derives_nothing_of_the_round_s_plan(
    monkeypatch: pytest.MonkeyPatch, k: int
) -> None:
    config = random_config(k)
    train = load_dataset("digits", "train")
    task = planned_task(config, len(train.y), 2, worker=5)
    model = init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=config.seed)
    downlink = PlainChannel(flatten_params(model)).downlink()
    worker = Worker(config, train, "c", generate_private_key())
    trained = count_trainings(monkeypatch)
    plan_calls = count_plan_calls(monkeypatch)

    reply = worker.handle(task, downlink)

    assert plan_calls == Counter()
    assert trained == [len(s) for s in task.samples or ()]
    assert len(trained) == len(task.files) == 3  # r files of a random r-regular plan, any K
    assert reply.files == tuple(sorted(task.files))


def test_a_reply_binds_the_samples_its_task_named() -> None:
    config = random_config(12)
    train = load_dataset("digits", "train")
    task = planned_task(config, len(train.y), 1, worker=0)
    model = init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=config.seed)
    params = flatten_params(model)
    key = generate_private_key()
    worker = Worker(config, train, "c", key)
    # On its way the task's samples were changed: the worker trains on those, says so,
    # and the coordinator, which knows what it asked, refuses the reply.
    swapped = dataclasses.replace(task, samples=tuple(s[::-1] for s in task.samples or ()))
    reply = worker.handle(swapped, PlainChannel(params).downlink())

    with pytest.raises(ReplyRejectedError, match="other sample indices than its task named"):
        check_reply(
            reply,
            task,
            client_id="c",
            public_key=key.public_key(),
            decode=make_float32_decoder(params.numel()),
        )
    asked = worker.handle(task, PlainChannel(params).downlink())
    replicas = check_reply(
        asked,
        task,
        client_id="c",
        public_key=key.public_key(),
        decode=make_float32_decoder(params.numel()),
    )
    assert [r.file for r in replicas] == sorted(task.files)
    # Claiming the asked samples while signing nothing of them does not verify either.
    with pytest.raises(ReplyRejectedError, match="signature does not verify"):
        check_reply(
            dataclasses.replace(reply, samples=task.samples_digest),
            task,
            client_id="c",
            public_key=key.public_key(),
            decode=make_float32_decoder(params.numel()),
        )


def test_a_task_without_samples_is_refused_in_words() -> None:
    config = random_config(12)
    train = load_dataset("digits", "train")
    task = dataclasses.replace(planned_task(config, len(train.y), 1, worker=0), samples=None)
    model = init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=config.seed)
    worker = Worker(config, train, "c", generate_private_key())

    with pytest.raises(ValueError, match="names no samples"):
        worker.handle(task, PlainChannel(flatten_params(model)).downlink())
