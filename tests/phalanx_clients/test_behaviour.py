"""A deployed client switched Byzantine lies on every file it is given."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from phalanx.assignment import Assignment
from phalanx.attacks import distortion_plan
from phalanx.channel import PlainChannel
from phalanx.config import RunConfig
from phalanx.data import load_dataset
from phalanx.identity import generate_private_key
from phalanx.nets import flatten_params, init_model
from phalanx_clients import behaviour
from phalanx_clients.behaviour import RedTeam, byzantine_behaviour
from phalanx_clients.worker import Worker
from tests.support.configs import small_config
from tests.support.deployment import deployment_config
from tests.support.planned_tasks import planned_task


def test_a_byzantine_client_changes_every_file_and_an_honest_one_none() -> None:
    config = deployment_config()
    train = load_dataset("digits", "train")
    model = init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=config.seed)
    downlink = PlainChannel(flatten_params(model)).downlink()
    task = planned_task(config, len(train.y), 1, worker=1)
    key = generate_private_key()

    def reply(behaviour: object) -> tuple[bytes, ...]:
        worker = Worker(config, train, "c", key, behaviour=behaviour, node_id=5)  # type: ignore[arg-type]
        return worker.handle(task, downlink).payloads

    honest, again = reply(None), reply(None)
    lying = reply(byzantine_behaviour("reversed_gradient", worker=1))
    assert honest == again
    assert all(h != b for h, b in zip(honest, lying, strict=True))


def test_an_unknown_attack_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown attack 'nonsense'"):
        byzantine_behaviour("nonsense", worker=0)


def test_an_attack_reference_the_host_does_not_allow_is_refused(
    allow_attack_plugins: Callable[..., None],
) -> None:
    with pytest.raises(ValueError, match="'subprocess:Popen' is not allowed on this host"):
        byzantine_behaviour("subprocess:Popen", worker=0)


def test_a_red_team_derives_each_round_s_plan_once_for_all_its_adversaries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = small_config()
    team = RedTeam.from_config(config)
    assert team is not None
    derived: list[int] = []
    original = behaviour.round_assignment

    def counted(config: RunConfig, round: int) -> Assignment:
        derived.append(round)
        return original(config, round)

    monkeypatch.setattr(behaviour, "round_assignment", counted)

    plans = [team.round_plan(config, t) for t in (1, 1, 2, 1, 2, 3)]

    assert derived == [1, 2, 3]
    assert plans[0].assignment == original(config, 1)
    assert plans[0].distort == distortion_plan(
        original(config, 1), team.adversaries, strategy="all", seed=config.seed
    )
    assert team.round_plan(config, 1) is not plans[0]  # only the last rounds are kept
