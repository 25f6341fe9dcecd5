"""The collect setting refuses what no policy would read, and numbers that are not numbers."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from phalanx.collect import CollectConfig

NUMBERS = ["deadline_s", "k", "k_step", "burn_in", "m", "lazy_c", "max_staleness", "exploration"]
#: A policy that reads each number field, and what else it needs.
READER: dict[str, dict[str, Any]] = {
    "deadline_s": {"policy": "deadline"},
    "k": {"policy": "fastest_k"},
    "k_step": {"policy": "adaptive_k", "k": 2},
    "burn_in": {"policy": "adaptive_k", "k": 2},
    "m": {"policy": "quorum"},
    "lazy_c": {"policy": "group_fastest", "group_selection": "lazy"},
    "max_staleness": {"policy": "group_fastest", "group_selection": "lazy"},
    "exploration": {"policy": "bandit", "k": 2},
}


def test_the_default_is_to_wait_for_everyone() -> None:
    config = CollectConfig()

    assert (config.policy, config.parameters()) == ("all", {})


def test_each_policy_takes_its_parameters_and_fills_the_defaults() -> None:
    assert CollectConfig(policy="quorum", deadline_s=60).parameters() == {
        "deadline_s": 60.0,
        "m": 2,
    }
    assert CollectConfig(policy="adaptive_k", k=3).parameters() == {
        "k": 3,
        "k_step": 1,
        "burn_in": 10,
    }
    assert CollectConfig(policy="group_fastest").parameters() == {"group_selection": "all"}


@pytest.mark.parametrize("field", NUMBERS)
@pytest.mark.parametrize("value", [True, False])
def test_true_or_false_is_refused_wherever_a_number_is_meant(field: str, value: bool) -> None:
    with pytest.raises(ValidationError, match="not true or false"):
        CollectConfig.model_validate({**READER[field], field: value})


@pytest.mark.parametrize("field", NUMBERS)
@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), 10**12])
def test_negative_unbounded_and_non_finite_numbers_are_refused(field: str, value: float) -> None:
    with pytest.raises(ValidationError):
        CollectConfig.model_validate({**READER[field], field: value})


def test_an_unknown_policy_or_setting_is_refused() -> None:
    with pytest.raises(ValidationError, match="Input should be 'all'"):
        CollectConfig.model_validate({"policy": "fastest"})
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        CollectConfig.model_validate({"policy": "all", "timeout": 3})


def test_a_parameter_the_policy_does_not_read_is_refused_with_what_it_reads() -> None:
    with pytest.raises(
        ValidationError, match=r"m not read by policy 'fastest_k' \(it reads: deadline_s, k\)"
    ):
        CollectConfig(policy="fastest_k", k=3, m=2)
    with pytest.raises(ValidationError, match="deadline_s not read by policy 'all'"):
        CollectConfig(policy="all", deadline_s=5)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"policy": "deadline"}, "needs deadline_s"),
        ({"policy": "fastest_k"}, "needs k"),
        ({"policy": "bandit"}, "needs k"),
        ({"policy": "group_fastest", "lazy_c": 1.0}, "only with group_selection 'lazy'"),
    ],
)
def test_a_missing_or_inapplicable_parameter_is_named(body: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        CollectConfig.model_validate(body)


def test_the_setting_is_frozen_and_survives_json() -> None:
    config = CollectConfig(policy="quorum", m=2, deadline_s=30)

    assert CollectConfig.model_validate_json(config.model_dump_json()) == config
    with pytest.raises(ValidationError):
        config.m = 3
