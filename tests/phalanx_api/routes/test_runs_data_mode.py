"""Launching a run on local data: refused with a 422 in the config's own words until runs use it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.factories import Keys, TestClient

RUNS = "/api/v1/runs"
LOCAL: dict[str, Any] = {
    "data": {"dataset": "digits", "model": "mlp", "mode": "local"},
    "assignment": {"scheme": "none", "num_workers": 10, "r": 1},
    "aggregation": {"rule": "mean"},
}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (LOCAL, "local data mode is not wired into runs yet"),
        (
            {**LOCAL, "assignment": {"scheme": "bibd", "num_workers": 7, "r": 3}},
            "replicas of private data cannot be compared",
        ),
        (
            {**LOCAL, "data": {**LOCAL["data"], "partition": {"kind": "dirichlet"}}},
            "body.data.partition: the dirichlet partition needs alpha",
        ),
    ],
)
def test_a_local_data_run_is_422_saying_why(
    body: dict[str, Any], expected: str, client: TestClient, api_keys: Keys
) -> None:
    response = client.post(RUNS, json=body, headers=api_keys.headers("operator"))

    assert response.status_code == 422
    assert expected in response.json()["detail"]
