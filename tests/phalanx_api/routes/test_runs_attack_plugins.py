"""Launching a run with a simulated attack: off unless the server allows it, host plug-ins only."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import audit, runs
from phalanx_api.main import create_app
from phalanx_api.settings import ApiSettings
from tests.support.factories import Keys, TestClient
from tests.support.plugin_files import SHRINK, STRICT, TOUCH_ON_IMPORT, TOUCH_ON_INIT, PluginFiles

RUNS = "/api/v1/runs"


@pytest.fixture
def attack_client(
    api_settings: ApiSettings, plugin_files: PluginFiles
) -> Iterator[tuple[TestClient, PluginFiles, dict[str, str]]]:
    """A server that allows attacks and a few plug-ins, on the module's database."""
    allowed = {
        "shrink": f"{plugin_files.module(SHRINK)}:Shrink",
        "scaled": f"{plugin_files.module(STRICT)}:Scaled",
        "no_name": f"{plugin_files.module(TOUCH_ON_INIT)}:NoName",
        "popen": "subprocess:Popen",
    }
    settings = api_settings.model_copy(
        update={"api_allow_attacks": True, "attack_plugins": tuple(allowed.values())}
    )
    with TestClient(create_app(settings)) as client:
        yield client, plugin_files, allowed


def _launch(client: TestClient, keys: Keys, attack: dict[str, Any]) -> tuple[str, Any]:
    name = f"attack-{uuid.uuid4().hex[:8]}"
    body = {"name": name, "attack": {"q": 1, **attack}}
    return name, client.post(RUNS, json=body, headers=keys.headers("operator"))


def _with_marker(params: dict[str, Any], files: PluginFiles) -> dict[str, Any]:
    """Replace ``MARKER`` in text values by the file a spawned command would create."""
    return {
        key: value.replace("MARKER", str(files.marker)) if isinstance(value, str) else value
        for key, value in params.items()
    }


def _audit(sessions: sessionmaker[Session], name: str) -> list[tuple[str, dict[str, Any]]]:
    with sessions() as session:
        entries = audit.list_audit(session, limit=500)
        return [(e.action, e.details) for e in entries if (e.details or {}).get("name") == name]


def _queued(sessions: sessionmaker[Session], name: str) -> bool:
    with sessions() as session:
        return any(run.name == name for run in runs.list_runs(session, limit=500))


@pytest.mark.parametrize(
    "attack",
    [
        {"name": "alie"},
        {"name": "reversed_gradient", "q": 0},
        {"name": "subprocess:Popen", "params": {"args": "touch MARKER", "shell": True}},
    ],
    ids=["built-in", "named-without-adversaries", "popen"],
)
def test_a_launch_with_an_attack_is_403_unless_the_server_allows_attacks(
    attack: dict[str, Any],
    client: TestClient,
    api_keys: Keys,
    sessions: sessionmaker[Session],
    plugin_files: PluginFiles,
) -> None:
    attack = {**attack, "params": _with_marker(attack.get("params", {}), plugin_files)}
    name, response = _launch(client, api_keys, attack)
    assert response.status_code == 403
    assert "PHALANX_API_ALLOW_ATTACKS=true" in response.json()["detail"]
    assert not _queued(sessions, name)
    ((action, details),) = _audit(sessions, name)
    assert action == "run.launch_refused"
    assert details["attack"]["name"] == attack["name"]
    assert not plugin_files.marker.exists()


def test_a_launch_without_an_attack_needs_no_permission(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    name, response = _launch(client, api_keys, {"q": 0})
    assert response.status_code == 202
    ((action, details),) = _audit(sessions, name)
    assert action == "run.launch" and "attack" not in details


@pytest.mark.parametrize("spec", ["subprocess:Popen", "os:system"])
def test_the_remote_code_payload_is_422_and_spawns_nothing_when_attacks_are_on(
    spec: str,
    attack_client: tuple[TestClient, PluginFiles, dict[str, str]],
    api_keys: Keys,
    sessions: sessionmaker[Session],
) -> None:
    client, files, _ = attack_client
    attack = {"name": spec, "params": {"args": f"touch {files.marker}", "shell": True}}
    name, response = _launch(client, api_keys, attack)
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", "attack", "name"]
    assert not files.marker.exists()
    assert not _queued(sessions, name)
    assert [action for action, _ in _audit(sessions, name)] == ["run.launch_refused"]


def test_a_plugin_module_the_host_does_not_allow_is_422_and_never_imported(
    attack_client: tuple[TestClient, PluginFiles, dict[str, str]], api_keys: Keys
) -> None:
    client, files, _ = attack_client
    module = files.module(TOUCH_ON_IMPORT)
    _, response = _launch(client, api_keys, {"name": f"{module}:Attack"})
    assert response.status_code == 422
    assert "not allowed on this host" in response.json()["detail"]
    assert module not in sys.modules
    assert not files.marker.exists()


@pytest.mark.parametrize(
    ("plugin", "params", "field", "message"),
    [
        ("popen", {"args": "touch MARKER", "shell": True}, "name", "must declare the class"),
        ("no_name", {}, "name", "must declare the class"),
        ("scaled", {"scale": "big"}, "params", "parameter 'scale'='big'"),
        ("scaled", {"scale": -1.0}, "params", "scale must be > 0"),
        ("scaled", {}, "params", "missing a required argument"),
    ],
)
def test_an_allowed_plugin_that_is_no_attack_or_rejects_its_params_is_422(
    plugin: str,
    params: dict[str, Any],
    field: str,
    message: str,
    attack_client: tuple[TestClient, PluginFiles, dict[str, str]],
    api_keys: Keys,
    sessions: sessionmaker[Session],
) -> None:
    client, files, allowed = attack_client
    params = _with_marker(params, files)
    name, response = _launch(client, api_keys, {"name": allowed[plugin], "params": params})
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", "attack", field]
    assert message in response.json()["detail"]
    assert not files.marker.exists()
    assert not _queued(sessions, name)


def test_a_built_in_attack_with_bad_params_is_422(
    attack_client: tuple[TestClient, PluginFiles, dict[str, str]], api_keys: Keys
) -> None:
    client, _, _ = attack_client
    _, response = _launch(client, api_keys, {"name": "gaussian", "params": {"std": -1.0}})
    assert response.status_code == 422
    assert "gaussian std must be >= 0" in response.json()["detail"]


def test_an_accepted_attack_is_queued_and_named_in_the_audit_log(
    attack_client: tuple[TestClient, PluginFiles, dict[str, str]],
    api_keys: Keys,
    sessions: sessionmaker[Session],
) -> None:
    client, _, allowed = attack_client
    attack = {"name": allowed["shrink"], "q": 2, "params": {"factor": -2.0}}
    name, response = _launch(client, api_keys, attack)
    assert response.status_code == 202
    assert response.json()["config"]["attack"]["name"] == allowed["shrink"]
    ((action, details),) = _audit(sessions, name)
    assert action == "run.launch"
    assert details["attack"] == {"name": allowed["shrink"], "q": 2}
