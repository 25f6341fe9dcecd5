"""An update attack's reference on assigned data: derived once per round, whatever K and q."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from torch import Tensor

from phalanx.channel import PlainChannel
from phalanx.config import RunConfig
from phalanx.data import ImageDataset, load_dataset
from phalanx.identity import generate_private_key
from phalanx.nets import flatten_params, init_model
from phalanx_clients.behaviour import REFERENCE_FILES, RedTeam, reference_file_updates
from phalanx_clients.worker import Worker
from tests.support.configs import small_config
from tests.support.planned_tasks import planned_task
from tests.support.scribbling_attack import FakeScribblingAttack
from tests.support.task_work import count_plan_calls, count_trainings

ROUND = 2


def random_config(k: int) -> RunConfig:
    """K workers, r = 3 of a random plan, a quarter of them adversaries."""
    return small_config(
        data={"samples_per_file": 4},
        assignment={"scheme": "random", "num_workers": k, "r": 3},
        attack={"name": "reversed_gradient", "q": k // 4},
    )


@pytest.fixture(scope="module")
def train() -> ImageDataset:
    return load_dataset("digits", "train")


def initial_params(config: RunConfig) -> Tensor:
    model = init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=config.seed)
    return flatten_params(model)


@pytest.mark.parametrize("k", [12, 240])
def test_a_round_s_adversaries_derive_its_samples_and_reference_once_whatever_k(
    monkeypatch: pytest.MonkeyPatch, train: ImageDataset, k: int
) -> None:
    config = random_config(k)
    team = RedTeam.from_config(config)
    assert team is not None
    tasks = [planned_task(config, len(train.y), ROUND, w) for w in sorted(team.adversaries)]
    downlink = PlainChannel(initial_params(config)).downlink()
    team.round_plan(config, ROUND)  # the assignment: once per round (test_behaviour)
    trained = count_trainings(monkeypatch)
    plan_calls = count_plan_calls(monkeypatch)

    for task in tasks:
        behaviour = team.behaviour_of(task.worker)
        Worker(config, train, "c", generate_private_key(), behaviour=behaviour).handle(
            task, downlink
        )

    # Each adversary trains its own r files; the round's samples and the reference's
    # files are derived and trained once for all of them, at K = 12 as at K = 240.
    assert plan_calls == Counter({"round_samples": 1, "round_batch": 1})
    assert len(trained) == 3 * len(tasks) + REFERENCE_FILES


def test_the_kept_reference_is_the_round_s_honest_updates_and_follows_the_model(
    train: ImageDataset,
) -> None:
    config = random_config(12)
    team = RedTeam.from_config(config)
    assert team is not None
    params = initial_params(config)
    num_files = team.round_plan(config, ROUND).assignment.num_files

    first = team.file_references(config, train, ROUND, params)
    again = team.file_references(config, train, ROUND, params.clone())
    moved = team.file_references(config, train, ROUND, params + 0.01)

    assert again is first
    assert torch.equal(first, reference_file_updates(config, train, ROUND, num_files, params))
    assert first.shape == (REFERENCE_FILES, params.numel())
    assert not torch.equal(moved, first)
    assert torch.equal(
        moved, reference_file_updates(config, train, ROUND, num_files, params + 0.01)
    )


def test_an_attack_that_writes_into_its_reference_changes_no_other_adversary_s(
    train: ImageDataset,
) -> None:
    config = random_config(12)
    attack = FakeScribblingAttack()
    team = RedTeam(frozenset({1, 4, 7}), attack, "all")
    downlink = PlainChannel(initial_params(config)).downlink()

    for worker in sorted(team.adversaries):
        task = planned_task(config, len(train.y), ROUND, worker)
        Worker(
            config, train, "c", generate_private_key(), behaviour=team.behaviour_of(worker)
        ).handle(task, downlink)

    assert len(attack.seen) == 3 * 3  # three files each
    assert bool(attack.seen[0].abs().sum() > 0)
    assert all(torch.equal(s, attack.seen[0]) for s in attack.seen[::3])
