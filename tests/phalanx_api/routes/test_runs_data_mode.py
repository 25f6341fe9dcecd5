"""Runs on local data: launched like any run, refused in the config's words where they cannot run
yet, and a run's detail shows its partition."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from phalanx.config import RunConfig
from phalanx.data import load_dataset
from phalanx.local_data import run_partition
from phalanx.store import runs
from tests.support.factories import Keys, TestClient, seed_run

RUNS = "/api/v1/runs"
LOCAL: dict[str, Any] = {
    "data": {"dataset": "digits", "model": "mlp", "mode": "local"},
    "assignment": {"scheme": "none", "num_workers": 10, "r": 1},
    "aggregation": {"rule": "mean"},
}


def test_a_local_data_run_is_queued_with_its_partition_setting(
    client: TestClient, api_keys: Keys
) -> None:
    body = {**LOCAL, "data": {**LOCAL["data"], "partition": {"kind": "dirichlet", "alpha": 0.3}}}

    response = client.post(RUNS, json=body, headers=api_keys.headers("operator"))

    assert response.status_code == 202, response.text
    assert response.json()["config"]["data"]["partition"]["alpha"] == 0.3


def test_a_local_data_run_in_a_deployment_is_queued(client: TestClient, api_keys: Keys) -> None:
    body = {**LOCAL, "deployment": {"backend": "deployment"}}

    response = client.post(RUNS, json=body, headers=api_keys.headers("operator"))

    assert response.status_code == 202, response.text
    assert response.json()["config"]["data"]["mode"] == "local"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {**LOCAL, "assignment": {"scheme": "bibd", "num_workers": 7, "r": 3}},
            "replicas of private data cannot be compared",
        ),
        (
            {**LOCAL, "data": {**LOCAL["data"], "partition": {"kind": "dirichlet"}}},
            "body.data.partition: the dirichlet partition needs alpha",
        ),
        (
            {
                **LOCAL,
                "data": {**LOCAL["data"], "partition": {"kind": "iid"}},
                "deployment": {"backend": "deployment"},
            },
            "a deployed client trains on the data its node config names (data-path)",
        ),
    ],
)
def test_a_local_data_run_that_cannot_run_is_422_saying_why(
    body: dict[str, Any], expected: str, client: TestClient, api_keys: Keys
) -> None:
    response = client.post(RUNS, json=body, headers=api_keys.headers("operator"))

    assert response.status_code == 422
    assert expected in response.json()["detail"]


def test_a_runs_detail_shows_its_partition_and_a_listing_does_not(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    config = RunConfig.model_validate(
        {
            **LOCAL,
            "data": {**LOCAL["data"], "partition": {"kind": "shards", "labels_per_client": 2}},
        }
    )
    report = run_partition(config, load_dataset("digits", "train"))[1]
    run_id = seed_run(sessions)
    with sessions.begin() as session:
        runs.record_partition(session, run_id, report.to_dict())

    detail = client.get(f"{RUNS}/{run_id}", headers=api_keys.headers("viewer")).json()
    listed = client.get(RUNS, headers=api_keys.headers("viewer")).json()["items"]

    partition = detail["partition"]
    assert partition["kind"] == "shards" and partition["parameters"]["labels_per_client"] == 2
    assert partition["samples"] == list(report.samples) and len(partition["histograms"]) == 10
    assert sum(partition["samples"]) + partition["unassigned"] == 1438
    assert all("partition" not in item for item in listed)


def test_a_run_on_assigned_data_has_no_partition(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id = seed_run(sessions)

    detail = client.get(f"{RUNS}/{run_id}", headers=api_keys.headers("viewer")).json()

    assert detail["partition"] is None and detail["id"] == run_id
