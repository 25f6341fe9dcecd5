"""The data.local setting (one length of training, each optimizer its options); ModelShape."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from phalanx.data_mode import DEFAULT_MOMENTUM, LocalTrainingConfig, ModelShape


def test_the_default_is_one_epoch_of_plain_sgd() -> None:
    config = LocalTrainingConfig()

    assert (config.epochs, config.steps, config.optimizer) == (None, None, "sgd")
    assert (config.batch_size, config.lr) == (32, 0.01)


def test_federated_evaluation_follows_every_round_and_the_last_by_default() -> None:
    config = LocalTrainingConfig()
    assert (config.evaluate_every, config.test_fraction, config.evaluates) == (1, 0.2, True)
    every_three = LocalTrainingConfig(evaluate_every=3)
    assert [every_three.evaluates_after(t, 7) for t in range(1, 8)] == [
        False, False, True, False, False, True, True,
    ]  # fmt: skip
    off = LocalTrainingConfig(evaluate_every=0)
    assert not off.evaluates and not off.evaluates_after(7, 7)


def test_momentum_defaults_for_the_momentum_optimizer() -> None:
    assert LocalTrainingConfig(optimizer="momentum").momentum_value == DEFAULT_MOMENTUM
    assert LocalTrainingConfig(optimizer="momentum", momentum=0.5).momentum_value == 0.5


def test_epochs_and_steps_together_are_refused() -> None:
    with pytest.raises(ValidationError, match="give epochs or steps, not both"):
        LocalTrainingConfig(epochs=2, steps=10)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_momentum_for_another_optimizer_is_refused(optimizer: Any) -> None:
    with pytest.raises(ValidationError, match="momentum is read by optimizer = 'momentum' only"):
        LocalTrainingConfig(optimizer=optimizer, momentum=0.9)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("epochs", 0),
        ("epochs", 1001),
        ("epochs", True),
        ("steps", 0),
        ("steps", 1.5),
        ("batch_size", 0),
        ("batch_size", 10**9),
        ("lr", 0.0),
        ("lr", -0.1),
        ("lr", float("nan")),
        ("lr", float("inf")),
        ("lr", 1e9),
        ("optimizer", "sgdd"),
        ("momentum", 1.0),
        ("momentum", -0.1),
        ("evaluate_every", -1),
        ("evaluate_every", 10**6),
        ("evaluate_every", True),
        ("evaluate_every", 1.5),
        ("evaluate_every", "often"),
        ("test_fraction", 0.0),
        ("test_fraction", 1.0),
        ("test_fraction", float("nan")),
        ("test_fraction", False),
    ],
)
def test_hostile_values_are_refused_with_the_field_named(field: str, value: Any) -> None:
    given: dict[str, Any] = {field: value}
    if field == "momentum":
        given["optimizer"] = "momentum"

    with pytest.raises(ValidationError) as raised:
        LocalTrainingConfig.model_validate(given)
    assert [error["loc"] for error in raised.value.errors()] == [(field,)]


@pytest.mark.parametrize("values", [(0, 8, 10), (1, -1, 10), (1, 8, True), (1, 8, 2**31)])
def test_a_model_shape_outside_its_range_is_refused(values: tuple[int, int, int]) -> None:
    with pytest.raises(ValueError, match=r"must be a whole number in 1\.\."):
        ModelShape(*values)


def test_a_model_shape_travels_as_three_numbers() -> None:
    assert ModelShape(3, 32, 100).as_list() == [3, 32, 100]
