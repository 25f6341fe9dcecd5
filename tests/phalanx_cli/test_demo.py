"""The served demo queues its run through the API like any operator, and prints its admin key."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import httpx
import pytest

from phalanx_cli.demo import queue_through_api
from tests.support.configs import small_config


class FakeApi:
    """Stands in for ``httpx.post`` to the demo's own API, answering one fixed response."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response

    def __call__(self, url: str, **kwargs: Any) -> httpx.Response:
        self.response.request = httpx.Request("POST", url)
        return self.response


def test_a_refused_run_raises_with_the_apis_message(monkeypatch: pytest.MonkeyPatch) -> None:
    detail = "body.data.dataset: idx:/npz: paths given through the API must name data inside"
    monkeypatch.setattr(httpx, "post", FakeApi(httpx.Response(422, json={"detail": detail})))
    with pytest.raises(RuntimeError) as info:
        queue_through_api("http://127.0.0.1:1", "secret", small_config())
    assert str(info.value) == f"the API refused the run (422): {detail}"


def test_a_queued_run_returns_its_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(httpx, "post", FakeApi(httpx.Response(202, json={"id": "r-1"})))
    assert queue_through_api("http://127.0.0.1:1", "secret", small_config()) == "r-1"


def test_the_admin_key_stands_whole_on_a_line_of_its_own_in_a_narrow_log() -> None:
    secret = "phx_" + "k" * 120
    script = (
        "import sys\n"
        "from phalanx_cli.demo import dashboard_lines\n"
        "from phalanx_cli.output import say\n"
        "for line in dashboard_lines('http://127.0.0.1:8080', sys.argv[1]):\n"
        "    say(line)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, secret],
        env={**os.environ, "COLUMNS": "40"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stderr.splitlines() == [
        "Dashboard: http://127.0.0.1:8080/",
        "Log in with this admin key:",
        secret,
    ]
    assert result.stdout == ""
