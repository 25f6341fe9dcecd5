"""A device trace is a file of the host: a run launched through the API may not name one."""

from __future__ import annotations

from tests.support.configs import small_config
from tests.support.factories import Keys, TestClient

RUNS = "/api/v1/runs"


def test_a_trace_path_through_the_api_is_a_422_that_reveals_nothing(
    client: TestClient, api_keys: Keys
) -> None:
    body = small_config(attack={"name": None, "q": 0}).model_dump(mode="json")
    answers = []
    for path in ("/etc/passwd", "/nonexistent/devices.csv", "examples/traces/devices-100.csv"):
        body["systems"] = {"enabled": True, "trace": path}
        answers.append(client.post(RUNS, json=body, headers=api_keys.headers("operator")))
    assert {a.status_code for a in answers} == {422}
    details = [a.json()["detail"] for a in answers]
    assert details[0] == details[1] == details[2]
    assert "systems.trace" in str(details[0]) and "passwd" not in str(details[0])
