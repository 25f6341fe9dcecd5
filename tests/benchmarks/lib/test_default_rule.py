from __future__ import annotations

import pytest

from benchmarks.lib.default_rule import SETTINGS, Case, Outcome, cases, markdown, summarize


def outcome(setting: str, seed: int, rule: str, accuracy: float | None) -> Outcome:
    return Outcome(setting, seed, rule, accuracy, 7.0 if rule == "default" else 0.0, 1.0)  # type: ignore[arg-type]


def test_each_pair_differs_in_the_aggregation_section_alone() -> None:
    mean, default = (Case(SETTINGS[1], 2026, rule).config() for rule in ("mean", "default"))
    assert (mean.aggregation.rule, mean.aggregation.f) == ("mean", 0)
    assert (default.aggregation.rule, default.aggregation.f) == ("trimmed_mean", "auto")
    assert mean.model_dump(exclude={"aggregation", "name"}) == default.model_dump(
        exclude={"aggregation", "name"}
    )
    assert (default.attack.q, default.attack.strategy) == (3, "only_majorities")
    assert len(cases()) == 2 * len(SETTINGS) * 3


def test_differences_are_default_minus_mean_per_seed_in_points() -> None:
    (summary,) = summarize(
        [
            outcome("none", 1, "mean", 0.70),
            outcome("none", 1, "default", 0.69),
            outcome("none", 2, "mean", 0.60),
            outcome("none", 2, "default", 0.63),
        ]
    )
    assert summary.differences == pytest.approx((-1.0, 3.0))
    assert summary.difference == pytest.approx(1.0)
    assert summary.mean_accuracy == pytest.approx(65.0)
    assert "| none | 65.00 % | 66.00 % | +1.00 | -1.00, +3.00 | 7.0 |" in markdown([summary], "")


def test_a_failed_or_unpaired_run_is_refused_rather_than_averaged() -> None:
    with pytest.raises(ValueError, match="missing"):
        summarize([outcome("none", 1, "mean", 0.7)])
    with pytest.raises(ValueError, match="default"):
        summarize([outcome("none", 1, "mean", 0.7), outcome("none", 1, "default", None)])
