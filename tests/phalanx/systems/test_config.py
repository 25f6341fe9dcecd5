from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from phalanx.systems import SystemsConfig


def _refusal(**fields: Any) -> str:
    with pytest.raises(ValidationError) as info:
        SystemsConfig(**fields)
    return str(info.value)


def test_the_default_is_off_constant_and_always_there() -> None:
    config = SystemsConfig()
    assert (config.enabled, config.speed_distribution, config.availability, config.trace) == (
        False,
        "constant",
        "always",
        None,
    )


def test_it_drops_into_a_run_config_section_as_it_is() -> None:
    class Run(BaseModel):
        systems: SystemsConfig = SystemsConfig()

    run = Run.model_validate({"systems": {"enabled": True, "straggler_fraction": 0.2}})
    assert run.systems.straggler_fraction == 0.2
    assert Run.model_validate_json(run.model_dump_json()) == run


@pytest.mark.parametrize(
    "fields",
    [
        {"speed_distribution": "lognormal", "speed_sigma": 0.5, "round_sigma": 0.2},
        {"speed_distribution": "pareto", "speed_alpha": 2.5, "speed_shift_s": 0.001},
        {"availability": "dropout", "dropout_probability": 0.1},
        {"availability": "on_off", "mean_rounds_on": 8, "mean_rounds_off": 2},
        {"trace": "examples/traces/devices-100.csv", "latency_s": 0.0},
    ],
)
def test_a_dumped_config_validates_back_to_itself(fields: dict[str, Any]) -> None:
    config = SystemsConfig(**fields)
    assert SystemsConfig.model_validate(json.loads(config.model_dump_json())) == config


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"speed_distribution": "lognormal"}, "speed_distribution 'lognormal' needs speed_sigma"),
        ({"speed_distribution": "pareto"}, "speed_distribution 'pareto' needs speed_alpha"),
        ({"speed_sigma": 0.5}, "speed_sigma applies only to speed_distribution 'lognormal'"),
        (
            {"speed_distribution": "lognormal", "speed_sigma": 0.5, "speed_alpha": 2.0},
            "speed_alpha applies only to speed_distribution 'pareto'",
        ),
        ({"availability": "dropout"}, "availability 'dropout' needs dropout_probability"),
        (
            {"availability": "on_off", "mean_rounds_on": 3},
            "availability 'on_off' needs mean_rounds_off",
        ),
        ({"dropout_probability": 0.1}, "dropout_probability applies only to availability"),
        (
            {"availability": "dropout", "dropout_probability": 0.1, "mean_rounds_on": 2},
            "mean_rounds_on applies only to availability 'on_off', not 'dropout'",
        ),
    ],
)
def test_a_mode_gets_exactly_its_parameters(fields: dict[str, Any], expected: str) -> None:
    assert expected in _refusal(**fields)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("speed_scale_s", 0.0),
        ("speed_scale_s", 3601.0),
        ("speed_shift_s", -0.001),
        ("round_sigma", -0.1),
        ("straggler_fraction", 1.01),
        ("straggler_slowdown", 0.5),
        ("up_bytes_per_s", 0.0),
        ("down_bytes_per_s", 2e12),
        ("latency_s", -1.0),
        ("speed_scale_s", float("inf")),
        ("latency_s", float("nan")),
        ("straggler_fraction", True),
        ("trace", ""),
        ("trace", "a\x00b"),
    ],
)
def test_out_of_bounds_values_are_refused_naming_the_field(field: str, value: object) -> None:
    assert field in _refusal(**{field: value})


def test_a_dropout_probability_of_one_is_refused() -> None:
    assert "dropout_probability" in _refusal(availability="dropout", dropout_probability=1.0)


def test_pareto_needs_a_finite_mean() -> None:
    assert "speed_alpha" in _refusal(speed_distribution="pareto", speed_alpha=1.0)


def test_an_unknown_field_or_distribution_is_refused() -> None:
    assert "speed_distrib" in _refusal(speed_distrib="constant")
    assert "speed_distribution" in _refusal(speed_distribution="weibull")


def test_the_config_is_frozen() -> None:
    with pytest.raises(ValidationError):
        SystemsConfig().enabled = True


@given(
    fraction=st.floats(min_value=0.0, max_value=1.0),
    slowdown=st.floats(min_value=1.0, max_value=1000.0),
    sigma=st.floats(min_value=0.0, max_value=2.0),
)
def test_every_value_within_the_bounds_is_accepted(
    fraction: float, slowdown: float, sigma: float
) -> None:
    config = SystemsConfig(
        straggler_fraction=fraction, straggler_slowdown=slowdown, round_sigma=sigma
    )
    assert (config.straggler_fraction, config.straggler_slowdown) == (fraction, slowdown)


@given(st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: not 0.0 <= x < 1.0))
def test_every_dropout_probability_outside_zero_to_one_is_refused(probability: float) -> None:
    with pytest.raises(ValidationError):
        SystemsConfig(availability="dropout", dropout_probability=probability)
