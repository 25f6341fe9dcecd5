"""Red team: ``aggregation.f = "auto"`` with every rule, r = 1, stragglers and a resume."""

from __future__ import annotations

import pytest

from phalanx.breakdown import largest_f, rule_inputs
from phalanx.replies import Reply
from tests.support.configs import small_config
from tests.support.coordinator_runs import run, run_interrupted


@pytest.mark.parametrize(
    "aggregation",
    [
        {"rule": "krum"},
        {"rule": "multi_krum", "options": {"m": 3}},
        {"rule": "bulyan"},
        {"rule": "median_of_means", "options": {"groups": 3}},
        {"rule": "median"},
        {"rule": "mean"},
        {"rule": "geometric_median"},
        {"rule": "centered_clipping"},
        {"rule": "trimmed_mean", "pre": "bucketing", "pre_options": {"s": 2}},
        {"rule": "krum", "pre": "nnm"},
    ],
)
def test_auto_f_runs_with_every_rule_within_its_breakdown(aggregation: dict[str, object]) -> None:
    config = small_config(rounds=2, aggregation=aggregation)
    agg = config.aggregation
    for report in run(config).reports:
        files = int(report.metrics["accepted_files"])
        wanted, used = report.metrics["f_wanted"], report.metrics["f_used"]
        assert wanted >= 0
        top = largest_f(agg.rule, rule_inputs(files, agg.pre, agg.pre_options), agg.options)
        assert used == (-1 if top is None else min(wanted, top))


def test_auto_f_with_a_single_replica_per_file_tolerates_the_liars_own_files() -> None:
    config = small_config(
        rounds=2, assignment={"scheme": "none", "num_workers": 7, "r": 1}, attack={"q": 0}
    )
    for report in run(config).reports:
        # At most 3 of 7 workers lie, one file each: 3 files.
        assert report.metrics["f_wanted"] == 3
        assert report.metrics["f_used"] == 3


def test_auto_f_counts_a_straggler_file_on_its_single_replica() -> None:
    # Worker 0 never answers: its files keep two replicas; none is a liar's alone.
    def lose(reply: Reply) -> Reply | None:
        return None if reply.worker == 0 else reply

    config = small_config(rounds=1, attack={"name": None, "q": 0})
    report = run(config, tamper=lose).reports[0]
    # STS(7) without worker 0: 3 of its files have two supporters left, 4 have three;
    # three liars among the 6 others hold at most one file together.
    assert report.metrics["accepted_files"] == 7
    assert report.metrics["f_wanted"] >= 1


def test_resume_with_auto_f_under_attack_is_identical() -> None:
    config = small_config(rounds=3)
    straight = run(config)
    first, resumed = run_interrupted(config, stop_after=1)
    both = [*first.reports, *resumed.reports]
    assert [r.metrics["f_wanted"] for r in both] == [
        r.metrics["f_wanted"] for r in straight.reports
    ]
    assert [r.flagged for r in both] == [r.flagged for r in straight.reports]
    assert both[-1].model_digest == straight.reports[-1].model_digest
