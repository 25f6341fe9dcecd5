"""Simulated attacks in local-data runs on the in-process transport: r = 1 screening finds liars.

Ten clients train on a Dirichlet(0.5) partition of digits; two are adversaries. Updates scaled
by -100 and IPM with epsilon 100 sit far beyond any honest client's distance to the median
update, so outlier screening (a robust z-score over 8 and a distance over 5 times the median
one on local data) flags both adversaries in every round and no honest client; the subtler
attacks are left to the robust rule and flag nobody honest either.
"""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.config import RunConfig
from phalanx.plan import adversaries
from tests.support.configs import local_config
from tests.support.coordinator_runs import run


def attacked(name: str, **params: Any) -> RunConfig:
    return local_config(
        rounds=2,
        assignment={"num_workers": 10},
        data={"partition": {"kind": "dirichlet", "alpha": 0.5}},
        attack={"name": name, "q": 2, "params": params},
    )


@pytest.mark.parametrize(
    ("name", "params"),
    [("reversed_gradient", {"scale": -100.0}), ("ipm", {"epsilon": 100.0})],
    ids=["scaled", "ipm-100"],
)
def test_screening_flags_every_far_adversary_and_no_honest_client(
    name: str, params: dict[str, Any]
) -> None:
    config = attacked(name, **params)
    liars = adversaries(config)

    reports = run(config).reports

    assert len(reports) == 2
    for report in reports:
        assert set(report.flagged) == liars, report.round
        assert not report.rejected
        assert report.metrics["update_applied"] == 1.0


@pytest.mark.parametrize("name", ["alie", "sign_flip", "label_flip"])
def test_subtler_attacks_on_local_data_flag_no_honest_client(name: str) -> None:
    config = attacked(name)
    liars = adversaries(config)

    reports = run(config).reports

    for report in reports:
        assert set(report.flagged) <= liars, report.round
        assert not report.rejected
