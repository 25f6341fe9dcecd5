"""The served demo queues its run through the API like any operator."""

from __future__ import annotations

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
