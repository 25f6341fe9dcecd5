"""The compose file keeps its promises: health checks, required variables, a runnable demo."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from phalanx.config import RunConfig

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
ONE_SHOT = {"migrate", "certs"}


@pytest.fixture(scope="module")
def services() -> dict[str, dict[str, Any]]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    return dict(loaded["services"])


def test_every_long_running_service_has_a_health_check(services: dict[str, Any]) -> None:
    missing = [n for n, s in services.items() if n not in ONE_SHOT and "healthcheck" not in s]
    assert missing == []


def test_one_shot_services_run_once_and_their_dependents_wait_for_success(
    services: dict[str, Any],
) -> None:
    for name in ONE_SHOT:
        assert services[name]["restart"] == "no"
    waits = {
        (name, dep)
        for name, s in services.items()
        for dep, cond in (s.get("depends_on") or {}).items()
        if cond == {"condition": "service_completed_successfully"}
    }
    assert {("superlink", "certs"), ("superlink", "migrate"), ("api", "migrate")} <= waits


def test_secrets_are_required_not_defaulted() -> None:
    text = COMPOSE.read_text(encoding="utf-8")
    for variable in ("POSTGRES_PASSWORD", "PHALANX_SECRET_KEY", "PHALANX_SUPERLINK_PUBLIC_NAME"):
        uses = re.findall(r"\$\{" + variable + r"([^}]*)\}", text)
        assert uses and all(u.startswith(":?") for u in uses), variable


def test_the_postgres_health_check_asks_pg_isready(services: dict[str, Any]) -> None:
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    assert any(v.endswith(":/var/lib/postgresql/data") for v in services["postgres"]["volumes"])


def test_the_superlink_keeps_its_state_on_a_volume(services: dict[str, Any]) -> None:
    command = services["superlink"]["command"]
    database = command[command.index("--database") + 1]
    mounts = [v.split(":")[1] for v in services["superlink"]["volumes"]]
    assert any(database.startswith(m + "/") for m in mounts)


def test_exactly_one_demo_client_is_byzantine_and_the_demo_run_fits_the_clients(
    services: dict[str, Any],
) -> None:
    supernodes = {n: s for n, s in services.items() if n.startswith("supernode-")}
    liars = [n for n, s in supernodes.items() if "PHALANX_BYZANTINE" in s["environment"]]
    assert liars == ["supernode-3"]
    demo = json.loads((ROOT / "docker" / "demo-run.json").read_text(encoding="utf-8"))
    config = RunConfig.model_validate(demo)
    assert config.assignment.num_workers == len(supernodes)
    assert config.assignment.r >= 2  # a lone liar is outvoted on every file it shares
