"""Red team: hostile run launches are 4xx, import nothing, and name no host path.

These attacks held on the code as it was; they stay as tests. Each can fail: a 500, a
202 for the ``subprocess:Popen`` plug-in (the marker file would appear), or a refusal
whose text differs between a path that exists and one that does not (an oracle on the
host's files) turns them red.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi import FastAPI

from phalanx_api.main import create_app
from phalanx_api.settings import ApiSettings
from tests.support.factories import TestClient, launch


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("datasets")
    (root / "escape").symlink_to("/etc")
    return root


@pytest.fixture(scope="module")
def app(api_settings: ApiSettings, datasets: Path) -> FastAPI:
    return create_app(
        api_settings.model_copy(update={"api_allow_attacks": True, "datasets_dir": datasets})
    )


def test_the_code_execution_payload_is_refused_and_runs_nothing(
    operator: tuple[TestClient, dict[str, str]], tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    for name in ("subprocess:Popen", "os:system", "builtins:eval", "os.path:join"):
        body = {
            "attack": {"name": name, "q": 1, "params": {"args": f"touch {marker}", "shell": True}}
        }
        status, text = launch(operator, json.dumps(body))
        assert status == 422, text
        assert "not allowed on this host" in text
    assert not marker.exists()


HOSTILE = [
    '{"data": {"dataset": "npz:../../../../etc/passwd"}}',
    '{"data": {"dataset": "npz:/etc/passwd"}}',
    '{"data": {"dataset": "npz:escape/passwd"}}',
    '{"data": {"dataset": "idx:escape"}}',
    '{"data": {"dataset": "npz:/nonexistent/file.npz"}}',
    '{"data": {"dataset": "npz:a\\u0000b"}}',
    '{"data": {"dataset": "npz:\\ud800"}}',
    '{"data": {"dataset": "npz:."}}',
    '{"rounds": true}',
    '{"aggregation": {"f": 10000000000000000000000000000000000000000}}',
    '{"name": "\\ud800"}',
    '{"training": {"server_lr": Infinity}}',
    '{"training": {"local_lr": NaN}}',
    '{"rounds": 1e400}',
    '{"seed": 100000000000000000000000000000000000000}',
    '{"assignment": {"num_workers": "100000"}}',
    '{"assignment": {"num_workers": 50000.0}}',
    '{"aggregation": {"options": {"m": {"nested": [1, 2]}}}}',
    '{"attack": {"name": "alie", "q": 1, "params": {"z": [1]}}}',
    '{"attack": {"name": "alie", "q": 1, "params": {"__class__": 1}}}',
    '{"codec": {"enabled": true, "rd_lambda": 1e400}}',
    "[" * 5000 + "]" * 5000,
    '{"a": ' * 5000 + "1" + "}" * 5000,
    "null",
    '"x"',
]


@pytest.mark.parametrize("body", HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_launch_is_a_4xx_that_names_no_host_path(
    operator: tuple[TestClient, dict[str, str]], body: str
) -> None:
    status, text = launch(operator, body)
    assert 400 <= status < 500, text
    assert "/etc" not in text and "Traceback" not in text


def test_outside_paths_get_one_answer_whether_they_exist_or_not(
    operator: tuple[TestClient, dict[str, str]],
) -> None:
    answers = {
        launch(operator, json.dumps({"data": {"dataset": f"npz:{path}"}}))
        for path in ("/etc/passwd", "/etc/no-such-file", "escape/passwd", "escape/no-such-file")
    }
    assert len(answers) == 1
    ((status, _),) = answers
    assert status == 422
