"""The asynchronous section: what it needs, what it refuses and why, in plain words."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from phalanx.asynchronous import AsynchronousConfig
from phalanx.config import RunConfig
from phalanx.validation_messages import describe

BASE: dict[str, Any] = {
    "rounds": 3,
    "data": {"dataset": "digits", "model": "mlp"},
    "assignment": {"scheme": "none", "num_workers": 15, "r": 1},
    "systems": {"enabled": True},
}


def config(**overrides: Any) -> RunConfig:
    data = {**BASE, "asynchronous": {"enabled": True}}
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return RunConfig.model_validate(data)


def refusal(**overrides: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        config(**overrides)
    return " ".join(describe(caught.value, RunConfig))


def test_it_is_off_unless_enabled_and_its_defaults_are_fedbuffs() -> None:
    assert not RunConfig().asynchronous.enabled
    on = config().asynchronous
    assert (on.buffer_size, on.max_staleness, on.step_size) == (10, 10, "delay_adaptive")
    assert on.exponent == 0.5


def test_replicas_are_refused_with_the_reason() -> None:
    message = refusal(assignment={"scheme": "bibd", "num_workers": 7, "r": 3})
    assert "asynchronous.enabled needs assignment.r = 1" in message
    assert "cannot be compared" in message
    assert "outlier screening per buffer" in message


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"deployment": {"backend": "deployment"}}, "which a deployment has for real"),
        ({"systems": {"enabled": False}}, "set systems.enabled = true"),
        ({"collect": {"policy": "fastest_k", "k": 3}}, "remove the collect section"),
        ({"codec": {"enabled": True}}, "turn the codec off"),
    ],
)
def test_what_the_mode_cannot_do_is_refused_with_the_way_out(
    overrides: dict[str, Any], words: str
) -> None:
    assert words in refusal(**overrides)


def test_a_buffer_larger_than_the_workers_is_refused_since_each_holds_one_slot() -> None:
    message = refusal(asynchronous={"buffer_size": 16})
    assert "asynchronous.buffer_size is 16, more than the 15 workers" in message
    assert "a worker holds at most one slot of a buffer" in message
    assert config(asynchronous={"buffer_size": 15}).asynchronous.buffer_size == 15


def test_a_deployment_runs_it_on_real_arrival_times_without_the_systems_model() -> None:
    deployed = config(deployment={"backend": "deployment"}, systems={"enabled": False})
    assert deployed.asynchronous.enabled and not deployed.systems.enabled


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("buffer_size", 0, "greater than or equal to 1"),
        ("buffer_size", -3, "greater than or equal to 1"),
        ("buffer_size", 10**12, "less than or equal to 10000"),
        ("buffer_size", "ten", "valid integer"),
        ("buffer_size", True, "must be a number, not true or false"),
        ("buffer_size", 2.5, "valid integer"),
        ("buffer_size", None, "valid integer"),
        ("max_staleness", -1, "greater than or equal to 0"),
        ("max_staleness", 10**9, "less than or equal to 100000"),
        ("max_staleness", False, "must be a number, not true or false"),
        ("max_staleness", [3], "valid integer"),
        ("step_size", "fastest", "'delay_adaptive', 'polynomial' or 'constant'"),
        ("delay_threshold", 0, "greater than 0"),
        ("delay_threshold", float("inf"), "finite number"),
        ("delay_threshold", float("nan"), "finite number"),
        ("delay_threshold", 1e9, "less than or equal to 100000"),
        ("enabled", "yes", "valid boolean"),
        ("enabled", 1, "valid boolean"),
    ],
)
def test_hostile_values_are_refused_naming_the_field(field: str, value: Any, words: str) -> None:
    message = refusal(asynchronous={field: value})
    assert f"asynchronous.{field}" in message
    assert words in message


def test_a_rule_parameter_the_rule_does_not_read_is_refused() -> None:
    message = refusal(asynchronous={"staleness_exponent": 1.0})
    assert "staleness_exponent not read by step_size 'delay_adaptive'" in message
    polynomial = config(asynchronous={"step_size": "polynomial", "staleness_exponent": 1.0})
    assert polynomial.asynchronous.exponent == 1.0


def test_a_misspelt_field_gets_did_you_mean() -> None:
    assert "did you mean `buffer_size`" in refusal(asynchronous={"buffersize": 4})


def test_the_rule_must_fit_in_one_buffer() -> None:
    message = refusal(asynchronous={"buffer_size": 4}, aggregation={"rule": "krum", "f": 2})
    assert "asynchronous.buffer_size is 4" in message


def test_the_section_alone_refuses_unknown_fields() -> None:
    with pytest.raises(ValidationError, match="Extra inputs"):
        AsynchronousConfig.model_validate({"buffer": 3})


def test_the_readmes_example_is_a_config_that_runs_asynchronously() -> None:
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    (block,) = [
        b for b in re.findall(r"```toml\n(.*?)```", readme, re.DOTALL) if "[asynchronous]" in b
    ]
    example = RunConfig.model_validate(tomllib.loads(block))
    assert example.asynchronous.enabled and example.assignment.r == 1
