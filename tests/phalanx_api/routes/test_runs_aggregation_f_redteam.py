"""Red team: ``aggregation.f`` through ``POST /api/v1/runs`` is 202 or a clear 422, never 500."""

from __future__ import annotations

import json

import pytest

from tests.support.factories import TestClient, launch


@pytest.mark.parametrize(
    "f",
    [
        '"AUTO"',
        '"3"',
        '""',
        "true",
        "false",
        "2.5",
        "null",
        "-1",
        "1e400",
        "[1]",
        '{"a": 1}',
        "100001",
        "1e300",
        '"auto "',
        "NaN",
        "Infinity",
    ],
)
def test_an_odd_f_is_a_422_naming_the_field(
    operator: tuple[TestClient, dict[str, str]], f: str
) -> None:
    status, text = launch(operator, '{"rounds": 1, "aggregation": {"f": ' + f + "}}")
    assert status == 422, text
    assert "f" in text


@pytest.mark.parametrize("f", ['"auto"', "0", "2", "3.0"])
def test_a_count_or_auto_is_accepted(operator: tuple[TestClient, dict[str, str]], f: str) -> None:
    status, text = launch(operator, '{"rounds": 1, "aggregation": {"f": ' + f + "}}")
    assert status in (200, 201, 202), text
    assert json.loads(text)
