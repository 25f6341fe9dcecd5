"""A deployed client switched Byzantine lies on every file it is given."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from phalanx.channel import PlainChannel
from phalanx.data import load_dataset
from phalanx.identity import generate_private_key
from phalanx.nets import flatten_params, init_model
from phalanx.plan import round_assignment
from phalanx.replies import Task
from phalanx_clients.behaviour import byzantine_behaviour
from phalanx_clients.worker import Worker
from tests.support.deployment import deployment_config


def test_a_byzantine_client_changes_every_file_and_an_honest_one_none() -> None:
    config = deployment_config()
    train = load_dataset("digits", "train")
    model = init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=config.seed)
    downlink = PlainChannel(flatten_params(model)).downlink()
    task = Task("run", 1, "nonce", worker=1, files=round_assignment(config, 1).files_of(1))
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
