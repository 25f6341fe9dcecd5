"""A worker with a compute budget computes its files in order and stops at a file boundary.

What it sends for a file is bit for bit what it sends without a budget: a cut replica
is still compared exactly with the others. The worker's clock is a test double here
(:class:`FakeClock`): each file takes exactly ``slow_compute_s`` of it.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import pytest

import phalanx_clients.worker
from phalanx.channel import Downlink, PlainChannel
from phalanx.data import load_dataset
from phalanx.identity import generate_private_key
from phalanx.nets import flatten_params, init_model
from phalanx.replies import Task, check_reply, make_float32_decoder
from phalanx_clients.worker import Worker
from tests.support.configs import small_config
from tests.support.planned_tasks import planned_task

SLOW_S = 2.0
CONFIG = small_config(
    data={"samples_per_file": 4},
    assignment={"scheme": "random", "num_workers": 12, "r": 3},
    attack={"name": None, "q": 0},
)
KEY = generate_private_key()


class FakeClock:
    """A clock that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Setting(NamedTuple):
    slow: Worker
    fast: Worker
    task: Task
    downlink: Downlink


@pytest.fixture
def setting(monkeypatch: pytest.MonkeyPatch) -> Setting:
    monkeypatch.setattr(phalanx_clients.worker, "time", FakeClock())
    train = load_dataset("digits", "train")
    task = planned_task(CONFIG, len(train.y), 2, worker=5)
    model = init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=CONFIG.seed)
    downlink = PlainChannel(flatten_params(model)).downlink()
    slow = Worker(CONFIG, train, "c", KEY, slow_compute_s=SLOW_S)
    return Setting(slow, Worker(CONFIG, train, "c", KEY), task, downlink)


def test_a_budget_for_two_files_sends_the_first_two_exactly_as_without_one(
    setting: Setting,
) -> None:
    budgeted = dataclasses.replace(setting.task, budget_s=2.5 * SLOW_S)
    answer = setting.slow.answer(budgeted, setting.downlink)
    whole = setting.fast.handle(setting.task, setting.downlink)

    assert answer.reply.files == setting.task.files[:2]
    assert answer.reply.payloads == whole.payloads[:2]
    assert answer.reply.compute_s == (SLOW_S, SLOW_S)
    # The third file finished past the budget: computed, dropped, counted as spent.
    assert answer.spent_s == 3 * SLOW_S
    replicas = check_reply(
        answer.reply,
        budgeted,
        client_id="c",
        public_key=KEY.public_key(),
        decode=make_float32_decoder(len(answer.reply.payloads[0]) // 4),
        partial=True,
    )
    assert [r.file for r in replicas] == list(setting.task.files[:2])


def test_a_budget_already_spent_on_the_round_sends_nothing_without_computing(
    setting: Setting,
) -> None:
    budgeted = dataclasses.replace(setting.task, budget_s=1.0)
    answer = setting.slow.answer(budgeted, setting.downlink, spent_s=1.0)
    assert (answer.reply.files, answer.reply.compute_s, answer.spent_s) == ((), (), 1.0)


def test_one_message_per_file_spends_one_budget_across_the_rounds_messages(
    setting: Setting,
) -> None:
    budgeted = dataclasses.replace(setting.task, budget_s=1.5 * SLOW_S)
    spent = 0.0
    sent = []
    for file in budgeted.files:
        answer = setting.slow.answer(budgeted.narrowed((file,)), setting.downlink, spent_s=spent)
        spent = answer.spent_s
        sent.append(answer.reply.files)
    # The second file overran the budget; the third was not computed at all.
    assert sent == [budgeted.files[:1], (), ()]
    assert spent == 2 * SLOW_S


def test_without_a_budget_every_file_goes_out_with_its_compute_time(setting: Setting) -> None:
    reply = setting.slow.handle(setting.task, setting.downlink)
    assert reply.files == setting.task.files
    assert reply.compute_s == (SLOW_S,) * 3
