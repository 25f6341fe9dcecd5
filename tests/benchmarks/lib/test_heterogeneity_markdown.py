"""The heterogeneity report: its goals read from rows, met and missed."""

from __future__ import annotations

from typing import Any

from benchmarks.lib.heterogeneity_grid import IN_PROCESS
from benchmarks.lib.heterogeneity_markdown import goals, markdown, screening_table
from benchmarks.lib.heterogeneity_runs import Row


def row(aggregator: str, attack: str, q: int, accuracy: float, **fields: Any) -> Row:
    pre = "nnm" if aggregator.startswith("nnm") else None
    values: dict[str, Any] = {
        "partition": "dirichlet",
        "alpha": 0.3,
        "aggregator": aggregator,
        "attack": attack,
        "q": q,
        "final_accuracy": accuracy,
        "honest_flagged": 0.0,
        "precision": None,
        "recall": None,
        "transport": IN_PROCESS,
        "rule": aggregator.removeprefix("nnm + "),
        "pre": pre,
        "rounds": 2,
        "adversaries": [],
        "flagged_by_round": [],
        "byzfl_gap": None,
        "model_digest": "d",
        "seconds": 1.0,
    }
    return Row(**{**values, **fields})


def test_the_nnm_goal_is_met_within_5_points_and_ahead_of_the_plain_rule() -> None:
    rows = [
        row("nnm + median", "none", 0, 0.80),
        row("nnm + median", "alie", 4, 0.77),
        row("median", "alie", 4, 0.60),
    ]
    (within, ahead, strongest, screening) = goals(rows)
    assert "within 5 points of the rule without attack: met (largest drop 3.0 points" in within
    assert ahead.endswith("met.")
    assert (
        "attack (every attack run at q = 4): met: the weakest rule after NNM keeps 77.0"
        in strongest
    )
    assert "met (0.00 % over 1 runs without attack)" in screening


def test_the_goals_are_missed_when_an_attack_costs_more_or_a_plain_rule_is_ahead() -> None:
    rows = [
        row("nnm + median", "none", 0, 0.80, honest_flagged=0.02),
        row("nnm + median", "ipm", 4, 0.70),
        row("mean", "ipm", 4, 0.75),
    ]
    (within, ahead, strongest, screening) = goals(rows)
    assert "missed (largest drop 10.0 points, nnm + median under ipm; one seed)" in within
    assert "missed (1 of 1 cells are not)" in ahead
    assert (
        "missed: the weakest rule after NNM keeps 70.0 (nnm + median), the strongest" in strongest
    )
    assert "the strongest rule without NNM 75.0 (mean)" in strongest
    assert "missed (2.00 % over 1 runs without attack)" in screening


def test_the_screening_table_and_the_report_name_each_partition() -> None:
    rows = [
        row("median", "none", 0, 0.8, honest_flagged=0.01),
        row("median", "none", 0, 0.8, alpha=None, partition="iid"),
    ]
    rows.append(row("mean", "sign_flip", 4, 0.4, honest_flagged=0.03))
    table = "\n".join(screening_table(rows))
    assert "| Dirichlet 0.3 | 1 | 1.00 % | 1.00 % (median) | 1 | 3.00 % | 3.00 % (mean, " in table
    assert "sign_flip q=4) |" in table
    assert "| IID | 1 | 0.00 % | 0.00 % (median) | - | - | - |" in table
    text = markdown(rows, ["a note"])
    assert "## IID: final accuracy (%)" in text and "## Dirichlet 0.3: final accuracy (%)" in text


def test_a_cell_of_several_seeds_counts_by_its_mean_and_shows_its_range() -> None:
    rows = [
        row("nnm + median", "none", 0, 0.80),
        row("nnm + median", "none", 0, 0.78, seed=2027),
        row("nnm + median", "alie", 4, 0.70),
        row("nnm + median", "alie", 4, 0.76, seed=2027),
        row("median", "alie", 4, 0.72),
    ]
    (within, ahead, _, _) = goals(rows)
    assert "missed (largest drop 6.0 points, nnm + median under alie; 2 seeds, means)" in within
    assert ahead.endswith("met.")  # 73.0 on average against the median's 72.0
    table = markdown(rows, [])
    assert "| nnm + median | 79.0 [78.0–80.0] | 73.0 [70.0–76.0] |" in table
    assert "| median |  | 72.0 |" in table


def test_a_cell_whose_runs_all_failed_says_so() -> None:
    rows = [row("median", "none", 0, 0.8), row("median", "alie", 4, None, error="boom")]
    assert "| median | 80.0 | failed |" in markdown(rows, [])


def test_other_alphas_are_read_the_same_way_and_said_to_be_no_goal() -> None:
    rows = [
        row("nnm + median", "none", 0, 0.80),
        row("nnm + median", "alie", 4, 0.77),
        row("median", "alie", 4, 0.60),
        row("nnm + median", "none", 0, 0.70, alpha=0.1),
        row("nnm + median", "sign_flip", 4, 0.60, alpha=0.1),
        row("mean", "sign_flip", 4, 0.40, alpha=0.1),
    ]
    lines = goals(rows)
    assert lines[0].startswith("- NNM at alpha 0.3, q = 4: every attack within 5 points")
    at_01 = [x for x in lines if "alpha 0.1" in x]
    assert at_01 == [
        "- The same at alpha 0.1 (read, not a goal), q = 4: every attack within 5 points of "
        "the rule without attack: missed (largest drop 10.0 points, nnm + median under "
        "sign_flip; one seed)."
    ]
    assert lines[4] == "- ... and ahead of every rule without NNM under the same attack: met."


def test_a_reading_with_cells_missing_says_so_instead_of_met_or_missed() -> None:
    rows = [
        row("nnm + median", "none", 0, 0.80),
        row("nnm + median", "alie", 4, 0.77),
        row("nnm + median", "ipm", 4, 0.78),
        row("median", "alie", 4, 0.60),
    ]
    (_, ahead, strongest, _) = goals(rows)
    assert ahead.endswith("not read yet (1 comparisons lack a cell without NNM).")
    assert strongest.endswith("not read yet, cells missing: median under ipm.")
