"""Red team of GET /api/v1/runs/{run_id}/responses: odd ids and pages are answered, never a 500.

These held on the code as it was; they stay as tests beside the route's own
(``test_runs_responses.py``), which covers unknown and hostile ids, the page bounds
and a run of a thousand workers.
"""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from phalanx_api.routes.params import MAX_INT32
from tests.support.factories import Keys, TestClient
from tests.support.response_rounds import seed_timed_run

RUNS = "/api/v1/runs"


@pytest.mark.parametrize(
    "params",
    [
        {"limit": "1e3"},
        {"limit": "5.5"},
        {"limit": "0x10"},
        {"limit": str(10**30)},
        {"limit": ""},
        {"limit": "NaN"},
        {"offset": "1e2"},
        {"offset": str(10**30)},
        {"offset": "-0.5"},
        {"slow": "NaN"},
        {"slow": ""},
        {"slow": "<script>"},
    ],
)
def test_an_odd_page_parameter_is_a_422_naming_it(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session], params: dict[str, str]
) -> None:
    timed = seed_timed_run(sessions)
    answer = client.get(
        f"{RUNS}/{timed.run_id}/responses", params=params, headers=api_keys.headers("viewer")
    )
    assert answer.status_code == 422, answer.text
    assert next(iter(params)) in answer.text


def test_the_last_possible_offset_is_an_empty_page_with_no_next(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    timed = seed_timed_run(sessions)
    page = client.get(
        f"{RUNS}/{timed.run_id}/responses",
        params={"offset": MAX_INT32, "limit": 500},
        headers=api_keys.headers("viewer"),
    )
    assert page.status_code == 200, page.text
    assert (page.json()["items"], page.json()["next_offset"]) == ([], None)
    assert page.json()["slow_workers"] == 2  # the summary still counts the whole run


def test_a_run_id_in_another_spelling_of_the_same_uuid_finds_the_same_run(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    timed = seed_timed_run(sessions)
    viewer = api_keys.headers("viewer")
    plain = client.get(f"{RUNS}/{timed.run_id}/responses", headers=viewer).json()
    for spelling in (timed.run_id.upper(), timed.run_id.replace("-", "")):
        answer = client.get(f"{RUNS}/{spelling}/responses", headers=viewer)
        assert answer.status_code == 200, spelling
        assert answer.json() == plain
