"""Red team: a run config never holds an infinite or NaN number, from a file as from the API.

TOML spells ``inf`` and ``nan`` and Python's JSON reader takes ``Infinity``. ``RunConfig``
accepted ``training.server_lr = inf`` (``gt=0`` holds for infinity) and ``nan`` wherever a
bound was not checked (``aggregation.options``, ``attack.params``): the API refused them only
in its own storage check, while ``phalanx run`` recorded the run, started Ray, and every
worker then failed to read the run config it was sent (pydantic writes ``inf`` to JSON as
``null``): ``round 1: 7 of 7 workers failed with the same error: ValidationError``. Before
the fix the tests below fail because the config is accepted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from phalanx.config import RunConfig, load_run_config

NON_FINITE = [
    ("training", "server_lr", "inf"),
    ("training", "local_lr", "inf"),
    ("deployment", "nodes_timeout_s", "inf"),
    ("deployment", "round_timeout_s", "inf"),
    ("detection", "outlier_threshold", "inf"),
    ("detection", "outlier_ratio", "inf"),
]


@pytest.mark.parametrize(("section", "key", "value"), NON_FINITE)
def test_an_infinite_number_in_a_toml_config_is_refused_naming_the_field(
    tmp_path: Path, section: str, key: str, value: str
) -> None:
    path = tmp_path / "run.toml"
    path.write_text(f"[{section}]\n{key} = {value}\n", encoding="utf-8")
    with pytest.raises(ValidationError) as refused:
        load_run_config(path)
    (error,) = refused.value.errors()
    assert error["loc"] == (section, key)


@pytest.mark.parametrize(
    "section",
    [
        {"aggregation": {"rule": "geometric_median", "options": {"eps": float("nan")}}},
        {"attack": {"name": "gaussian", "q": 1, "params": {"std": float("inf")}}},
    ],
    ids=["aggregation-options", "attack-params"],
)
def test_non_finite_numbers_inside_mappings_are_refused(section: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="finite"):
        RunConfig.model_validate(section)


def test_every_accepted_config_survives_the_json_its_workers_receive() -> None:
    # What the coordinator sends each worker must validate again, unchanged.
    config = RunConfig.model_validate({"training": {"server_lr": 1e308, "local_lr": 1e-300}})
    again = RunConfig.model_validate(json.loads(config.model_dump_json()))
    assert again == config
