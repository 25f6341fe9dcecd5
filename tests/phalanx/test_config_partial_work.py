"""Per-file messages and DropCompute are run configs a deployment accepts, as simulation does."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from phalanx.config import RunConfig

DEPLOYED = {"deployment": {"backend": "deployment"}, "attack": {"q": 0}}


@pytest.mark.parametrize(
    "collect",
    [
        {"messages": "per_file"},
        {"drop_compute": True},
        {"drop_compute": True, "warmup_rounds": 2},
        {"policy": "quorum", "m": 2, "messages": "per_file", "drop_compute": True},
        {"policy": "deadline", "deadline_s": 30.0, "compute_budget_s": 12.5, "drop_compute": True},
    ],
)
def test_a_deployment_runs_partial_work(collect: dict[str, object]) -> None:
    config = RunConfig.model_validate({**DEPLOYED, "collect": collect})
    assert config.collect.per_file == (collect.get("messages") == "per_file")


@pytest.mark.parametrize(
    ("collect", "message"),
    [
        ({"drop_compute": True, "compute_budget_s": float("nan")}, "compute_budget_s"),
        ({"drop_compute": True, "compute_budget_s": -1.0}, "compute_budget_s"),
        ({"drop_compute": True, "compute_budget_s": 1e9}, "compute_budget_s"),
        ({"messages": "per_chunk"}, "messages"),
        ({"compute_budget_s": 3.0}, "apply only with drop_compute"),
    ],
)
def test_a_deployment_still_refuses_a_budget_or_messages_it_cannot_honour(
    collect: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        RunConfig.model_validate({**DEPLOYED, "collect": collect})
