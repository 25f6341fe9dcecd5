"""Simulated adversaries on local data: each trains on its own part or forges from the crowd.

A round's tasks are answered by the in-process workers of a run with an attack and of the
same run without one, from the same global model: honest clients reply the same bytes,
adversaries do not, and everyone claims the count an honest client of its data claims.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
import torch
from torch import Tensor

from phalanx.attacks import AttackContext
from phalanx.channel import PlainChannel
from phalanx.config import RunConfig
from phalanx.data import ImageDataset, load_dataset
from phalanx.data_mode import LocalTrainingConfig, ModelShape
from phalanx.local_data import model_shape
from phalanx.local_training import train_locally
from phalanx.nets import flatten_params, init_model
from phalanx.plan import adversaries
from phalanx.replies import Reply
from phalanx.training import derive_seed
from phalanx_clients import crowd
from phalanx_clients.behaviour import RedTeam
from phalanx_clients.crowd import reference_clients
from phalanx_clients.local_updates import local_model
from phalanx_clients.worker import Worker
from tests.support.configs import local_config
from tests.support.inprocess import inprocess_workers
from tests.support.planned_tasks import local_task
from tests.support.scribbling_attack import FakeScribblingAttack

RUN_ID = "local-attacks"
ROUND = 2


@pytest.fixture(scope="module")
def shape() -> ModelShape:
    return model_shape(load_dataset("digits", "test"))


@pytest.fixture(scope="module")
def params(shape: ModelShape) -> Tensor:
    model = init_model(
        "mlp",
        in_channels=shape.in_channels,
        image_size=shape.image_size,
        num_classes=shape.num_classes,
        seed=11,
    )
    return flatten_params(model)


def attacked(name: str | None, **params: Any) -> RunConfig:
    attack = {"name": name, "q": 2, "params": params} if name else {}
    return local_config(data={"partition": {"kind": "dirichlet", "alpha": 0.5}}, attack=attack)


def replies(config: RunConfig, params: Tensor, shape: ModelShape) -> dict[int, Reply]:
    workers = inprocess_workers(config, RUN_ID)
    downlink = PlainChannel(params).downlink()
    return {
        w: worker.handle(local_task(config, ROUND, w, shape, run_id=RUN_ID), downlink)
        for w, worker in workers.items()
    }


@pytest.fixture(scope="module")
def without_attack(params: Tensor, shape: ModelShape) -> dict[int, Reply]:
    return replies(attacked(None), params, shape)


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("alie", {}),
        ("ipm", {"epsilon": 100.0}),
        ("sign_flip", {}),
        ("label_flip", {}),
        ("reversed_gradient", {"scale": -100.0}),
        ("mimic", {}),
        ("gaussian", {}),
        ("constant", {}),
    ],
)
def test_an_attack_on_local_data_changes_exactly_the_adversaries_updates(
    name: str,
    options: dict[str, Any],
    params: Tensor,
    shape: ModelShape,
    without_attack: dict[int, Reply],
) -> None:
    config = attacked(name, **options)
    liars = adversaries(config)
    assert len(liars) == 2

    lying = replies(config, params, shape)

    assert lying.keys() == without_attack.keys()
    for w, reply in lying.items():
        honest = without_attack[w]
        assert reply.files == honest.files and len(reply.files) == 1
        # An adversary claims the count an honest client of its data claims.
        assert reply.num_samples == honest.num_samples is not None
        if w in liars:
            assert reply.payloads != honest.payloads, w
        else:
            assert reply.payloads == honest.payloads, w  # to the bit


def own_training_data(config: RunConfig, worker: int) -> ImageDataset:
    return inprocess_workers(config, RUN_ID)[worker].local_data(worker).train


def test_label_flip_trains_on_the_adversary_s_own_data_with_flipped_labels(
    params: Tensor, shape: ModelShape
) -> None:
    config = attacked("label_flip")
    liar = min(adversaries(config))
    worker = inprocess_workers(config, RUN_ID)[liar]
    task = local_task(config, ROUND, liar, shape, run_id=RUN_ID)
    honest = worker.honest_updates(task, params)
    assert worker.behaviour is not None

    sent = worker.behaviour.updates(
        honest, task, params, config=config, train_set=worker.local_data(liar).train
    )

    own = worker.local_data(liar).train
    flipped = ImageDataset(x=own.x, y=9 - own.y, num_classes=10, name=own.name)
    expected = train_locally(
        local_model(config, shape),
        params,
        flipped,
        config.data.local or LocalTrainingConfig(),
        seed=derive_seed(config.seed, ROUND, task.files[0]),
    )
    (file,) = task.files
    assert torch.equal(sent[file], expected.update)
    assert not torch.equal(sent[file], honest[file])
    # Its own part less its held-out test split, as the honest client of that data trains on.
    assert len(own) < len(worker.train_set)


@dataclass
class FakeRecordingAttack:
    """A test double of an update attack: sends ``-honest`` and keeps every context it saw."""

    name: ClassVar[str] = "fake_recording"
    seen: list[AttackContext] = field(default_factory=list)

    def __call__(self, honest: Tensor, ctx: AttackContext) -> Tensor:
        self.seen.append(ctx)
        return -honest


def test_every_adversary_sees_one_crowd_of_honest_clients_computed_once_per_round(
    params: Tensor, shape: ModelShape, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 12 clients, 3 adversaries: the crowd is a sample of 8 of the 9 honest ones.
    config = local_config(
        assignment={"num_workers": 12},
        attack={"name": "sign_flip", "q": 3},
        data={"partition": {"kind": "dirichlet", "alpha": 0.5}},
    )
    liars = adversaries(config)
    train = load_dataset("digits", "train")
    recorder = FakeRecordingAttack()
    team = RedTeam(liars, recorder, "all", train_data=lambda _: train)
    workers = inprocess_workers(config, RUN_ID)
    computed: list[int] = []
    original = crowd.LocalCrowd.reference_updates

    def counted(self: crowd.LocalCrowd, *args: Any, **kwargs: Any) -> Tensor:
        computed.append(args[2])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(crowd.LocalCrowd, "reference_updates", counted)

    for liar in sorted(liars):
        worker = workers[liar]
        task = local_task(config, ROUND, liar, shape, run_id=RUN_ID)
        team.behaviour_of(liar).updates(  # type: ignore[union-attr]
            worker.honest_updates(task, params),
            task,
            params,
            config=config,
            train_set=worker.local_data(liar).train,
        )

    assert computed == [ROUND]
    assert [ctx.worker for ctx in recorder.seen] == sorted(liars)
    stacks = [ctx.honest_updates for ctx in recorder.seen]
    assert all(s is not None and torch.equal(s, stacks[0]) for s in stacks)  # type: ignore[arg-type]
    members = reference_clients(12, liars, config.seed, ROUND)
    assert len(members) == 8 and not set(members) & liars
    # Each row is that honest client's own update, to the bit.
    expected = [
        workers[c].honest_updates(local_task(config, ROUND, c, shape, run_id=RUN_ID), params)
        for c in members
    ]
    assert stacks[0] is not None
    assert torch.equal(stacks[0], torch.stack([next(iter(e.values())) for e in expected]))
    for ctx in recorder.seen:
        assert ctx.holders == (ctx.worker,)
        assert ctx.fellows == frozenset({ctx.worker})
        assert ctx.majority
        assert (ctx.num_workers, ctx.num_byzantine) == (12, 3)


def test_an_attack_that_writes_into_its_crowd_changes_no_other_adversary_s(
    params: Tensor, shape: ModelShape
) -> None:
    config = attacked("sign_flip")
    train = load_dataset("digits", "train")
    scribbler = FakeScribblingAttack()
    team = RedTeam(adversaries(config), scribbler, "all", train_data=lambda _: train)
    workers = inprocess_workers(config, RUN_ID)

    for liar in sorted(team.adversaries):
        task = local_task(config, ROUND, liar, shape, run_id=RUN_ID)
        team.behaviour_of(liar).updates(  # type: ignore[union-attr]
            workers[liar].honest_updates(task, params),
            task,
            params,
            config=config,
            train_set=workers[liar].local_data(liar).train,
        )

    first, second = scribbler.seen
    assert torch.equal(first, second) and bool(first.abs().sum() > 0)


def test_a_crowd_computed_from_other_parameters_is_not_reused(
    params: Tensor, shape: ModelShape
) -> None:
    config = attacked("ipm")
    train = load_dataset("digits", "train")
    team = RedTeam.from_config(config, train_data=lambda _: train)
    assert team is not None

    first = team.reference_updates(config, ROUND, params, shape)
    again = team.reference_updates(config, ROUND, params.clone(), shape)
    moved = team.reference_updates(config, ROUND, params + 0.01, shape)

    assert again is first
    assert moved is not first and not torch.equal(moved, first)


def test_an_honest_worker_of_a_local_run_has_no_behaviour_and_an_adversary_one() -> None:
    config = attacked("alie")
    workers: dict[int, Worker] = inprocess_workers(config, RUN_ID)

    assert {w for w, worker in workers.items() if worker.behaviour is not None} == adversaries(
        config
    )


@dataclass
class FakeShortAttack:
    """A test double of a buggy plug-in: sends the honest update less its last entry."""

    name: ClassVar[str] = "fake_short"

    def __call__(self, honest: Tensor, ctx: AttackContext) -> Tensor:
        return honest[:-1]


def test_a_plug_in_that_forges_an_update_of_the_wrong_shape_fails_with_its_name(
    params: Tensor, shape: ModelShape
) -> None:
    # Red team: the shorter vector went out as the adversary's reply, refused by the
    # coordinator as malformed, so a plug-in's bug read as the defence at work.
    config = attacked("sign_flip")
    train = load_dataset("digits", "train")
    team = RedTeam(adversaries(config), FakeShortAttack(), "all", train_data=lambda _: train)
    liar = min(team.adversaries)
    worker = inprocess_workers(config, RUN_ID)[liar]
    task = local_task(config, ROUND, liar, shape, run_id=RUN_ID)
    with pytest.raises(ValueError, match="'fake_short' must return a float update shaped"):
        team.behaviour_of(liar).updates(  # type: ignore[union-attr]
            worker.honest_updates(task, params),
            task,
            params,
            config=config,
            train_set=worker.local_data(liar).train,
        )
