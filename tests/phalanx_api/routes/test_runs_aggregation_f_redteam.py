"""Red team: ``aggregation.f`` through ``POST /api/v1/runs`` is 202 or a clear 422, never 500."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from sqlalchemy.orm import Session, sessionmaker

from phalanx_api.main import create_app
from phalanx_api.settings import ApiSettings
from tests.support.factories import TestClient, bearer, make_keys


@pytest.fixture(scope="module")
def app(api_settings: ApiSettings) -> FastAPI:
    return create_app(api_settings)


@pytest.fixture(scope="module")
def operator(app: FastAPI) -> Iterator[tuple[TestClient, dict[str, str]]]:
    sessions: sessionmaker[Session] = app.state.phalanx.sessions
    keys = make_keys(sessions)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, bearer(keys.operator)


def launch(operator: tuple[TestClient, dict[str, str]], body: str) -> tuple[int, str]:
    client, headers = operator
    answer = client.post(
        "/api/v1/runs", content=body, headers={**headers, "Content-Type": "application/json"}
    )
    return answer.status_code, answer.text


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
