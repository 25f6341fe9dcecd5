"""The pure helpers of the robustness, compression and round-time benchmarks (benchmarks/lib)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from benchmarks.lib import (
    compression_goals,
    compression_grid,
    compression_markdown,
    compression_runs,
    robustness_goals,
    robustness_grid,
    robustness_markdown,
    robustness_runs,
)
from benchmarks.lib.round_timing import timed
from phalanx import plan
from phalanx.config import load_run_config
from tests.support.reports import round_report

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

SETTINGS = robustness_grid.Settings(
    rounds=12, model="mlp", eval_samples=1000, optimizer="adam", server_lr=0.005
)


def _defence(scheme: str) -> Any:
    return next(d for d in robustness_grid.DEFENCES if d.scheme == scheme)


@pytest.mark.parametrize(
    ("scheme", "q", "strategy"),
    [("groups", 5, "only_majorities"), ("subsets", 5, "fixed_disagreement")],
)
def test_strongest_strategy_is_the_worse_one_for_the_defence(
    scheme: str, q: int, strategy: str
) -> None:
    assert robustness_grid.strongest_strategy(_defence(scheme), q, seed=0) == strategy


def test_distorted_fraction_counts_files_whose_unflagged_replicas_are_all_distorted() -> None:
    # DETOX under the strong attack with q = 3: one of the five groups holds two
    # adversaries, whose agreement outnumbers (and gets flagged) the group's honest worker.
    case = robustness_grid.Case(_defence("groups"), "alie", "strong", 3, "only_majorities", 0)
    config = case.config(SETTINGS)
    assignment = plan.round_assignment(config, 1)
    adversaries = plan.adversaries(config)
    file = next(f for f, ws in enumerate(assignment.files) if len(set(ws) & adversaries) == 2)
    honest = next(w for w in assignment.files[file] if w not in adversaries)
    fraction, consistent = robustness_runs.round_distortion(
        config, round_report(1, flagged=(honest,))
    )
    assert (fraction, consistent) == (0.2, True)
    # Nobody flagged: the file's replicas disagree, so it is dropped, not distorted.
    assert robustness_runs.round_distortion(config, round_report(1, dropped=(file,))) == (0.0, True)
    assert robustness_runs.round_distortion(config, round_report(1)) == (0.0, False)


def test_a_file_the_round_dropped_is_never_counted_distorted() -> None:
    # Across rounds the verdict also drops a file whose replicas all come from suspects
    # (here the two adversaries, after the honest third was flagged): it kept no value.
    case = robustness_grid.Case(_defence("groups"), "alie", "strong", 3, "only_majorities", 0)
    config = case.config(SETTINGS)
    assert config.detection.across_rounds
    assignment = plan.round_assignment(config, 1)
    adversaries = plan.adversaries(config)
    file = next(f for f, ws in enumerate(assignment.files) if len(set(ws) & adversaries) == 2)
    honest = next(w for w in assignment.files[file] if w not in adversaries)
    report = round_report(1, flagged=(honest,), dropped=(file,))
    assert robustness_runs.round_distortion(config, report) == (0.0, True)
    per_round = config.model_copy(
        update={"detection": config.detection.model_copy(update={"across_rounds": False})}
    )
    # The per-round rule drops no such file: a report that does is not this model's.
    assert robustness_runs.round_distortion(per_round, report) == (0.0, False)


def test_distorted_fraction_predicts_a_disputed_file_as_dropped() -> None:
    case = robustness_grid.Case(_defence("groups"), "alie", "strong", 3, "only_majorities", 0)
    config = case.config(SETTINGS)
    assignment = plan.round_assignment(config, 1)
    adversaries = plan.adversaries(config)
    file = next(f for f, ws in enumerate(assignment.files) if len(set(ws) & adversaries) == 2)
    one_adversary = min(set(assignment.files[file]) & adversaries)
    honest = next(w for w in assignment.files[file] if w not in adversaries)
    # One adversary and the honest worker flagged: the other adversary decides alone.
    flagged = round_report(1, flagged=tuple(sorted({one_adversary, honest})))
    assert robustness_runs.round_distortion(config, flagged) == (0.2, True)
    # Only one adversary flagged: one distorted and one honest replica tie, the file drops.
    tie = round_report(1, flagged=(one_adversary,), dropped=(file,))
    assert robustness_runs.round_distortion(config, tie) == (0.0, True)


def _row(**changes: object) -> Any:
    base = {
        "scheme": "subsets",
        "aggregator": "median",
        "attack": "alie",
        "mode": "weak",
        "q": 3,
        "final_accuracy": 0.80,
        "precision": 1.0,
        "recall": 1.0,
        "distorted_fraction": 0.0,
        "transport": robustness_grid.IN_PROCESS,
        "defence": "subsets (Aspis)",
        "strategy": "all",
        "f": 0,
        "samples_per_file": 4,
        "rounds": 12,
        "adversaries": [1, 2, 3],
        "flagged": [1, 2, 3],
        "flagged_by_round": [[1, 2, 3]],
        "drops_consistent": True,
        "model_digest": "abc",
        "seconds": 1.0,
    }
    return robustness_runs.Row(**{**base, **changes})


def test_goals_say_when_the_weak_attack_costs_more_than_a_point() -> None:
    clean = _row(attack="none", mode="none", q=0, final_accuracy=0.82, strategy="-")
    rows = [clean, _row(final_accuracy=0.805), _row(q=5, final_accuracy=0.79)]
    goals = {g.text.split(":")[1].strip(): g for g in robustness_goals.goals(rows)}
    assert goals["every adversary flagged and no honest worker flagged"].met
    accuracy = next(g for text, g in goals.items() if text.startswith("final accuracy"))
    assert not accuracy.met and "alie q = 5: +3.00 (1 seeds)" in accuracy.detail
    assert "alie q = 3: +1.50" in accuracy.detail


def _strong(defence: str, attack: str, seed: int, accuracy: float) -> Any:
    return _row(
        defence=defence, attack=attack, mode="strong", q=5, seed=seed, final_accuracy=accuracy
    )


def test_the_strong_goal_averages_each_cell_over_the_seeds_both_sides_ran() -> None:
    base = robustness_grid.DEFENCES[0].name
    rows = [
        _strong("subsets (Aspis)", "ipm", 1, 0.80),
        _strong("subsets (Aspis)", "ipm", 2, 0.76),
        _strong("subsets (Aspis)", "ipm", 3, 0.99),  # no r = 1 run with seed 3: left out
        _strong(base, "ipm", 1, 0.70),
        _strong(base, "ipm", 2, 0.64),
    ]
    goal, _ = robustness_goals.goals(rows)
    assert goal.met and "ipm +11.00" in goal.detail
    rows.append(_strong(base, "alie", 1, 0.75))
    rows.append(_strong("subsets (Aspis)", "alie", 1, 0.80))
    goal, _ = robustness_goals.goals(rows)
    assert not goal.met and "alie +5.00" in goal.detail


def test_the_strongest_attack_reading_compares_each_defence_under_its_worst_attack() -> None:
    base = robustness_grid.DEFENCES[0].name
    rows = [
        _strong("subsets (Aspis)", "constant", 1, 0.74),
        _strong("subsets (Aspis)", "reversed_gradient", 1, 0.82),
        _strong(base, "constant", 1, 0.37),
        _strong(base, "reversed_gradient", 1, 0.78),  # 4 points: the per-attack reading fails
    ]
    per_attack, strongest = robustness_goals.goals(rows)
    assert not per_attack.met
    assert strongest.met and "costs it most" in strongest.text
    assert strongest.detail.startswith("+37.00: subsets under constant 74.00 (seed 1)")
    assert "r = 1 median under constant 37.00 (seed 1)" in strongest.detail
    # Each side's own worst attack, even when the two differ.
    rows += [_strong("subsets (Aspis)", "alie", 1, 0.70), _strong(base, "alie", 1, 0.65)]
    _, strongest = robustness_goals.goals(rows)
    assert strongest.met
    assert strongest.detail.startswith("+33.00: subsets under alie 70.00 (seed 1); r = 1 median")
    assert "r = 1 median under constant 37.00" in strongest.detail
    close = [_strong("subsets (Aspis)", "constant", 1, 0.74), _strong(base, "constant", 1, 0.70)]
    _, strongest = robustness_goals.goals(close)
    assert not strongest.met and strongest.detail.startswith("+4.00")
    # A failed run counts as the worst outcome, not as a missing one.
    close.append(_strong("subsets (Aspis)", "ipm", 1, 0.90))
    close.append(_strong(base, "ipm", 1, 0.10))
    close[0] = dataclasses.replace(close[0], final_accuracy=None)
    _, strongest = robustness_goals.goals(close)
    assert not strongest.met and "subsets under constant failed (seed 1)" in strongest.detail


def test_the_strong_goal_is_checked_at_each_length_the_strong_cells_ran_with() -> None:
    base = robustness_grid.DEFENCES[0].name
    rows = [
        _row(attack="none", mode="none", q=0, strategy="-", final_accuracy=0.80),
        _row(mode="strong", q=5, final_accuracy=0.79),
        _row(defence=base, scheme="none", mode="strong", q=5, final_accuracy=0.75),
    ]
    rows += [
        dataclasses.replace(r, rounds=80, final_accuracy=(r.final_accuracy or 0) + d)
        for r, d in zip(rows, (0.05, 0.05, -0.05), strict=True)
    ]
    by_text = {g.text.split(":")[0]: g for g in robustness_goals.goals(rows)}
    short = by_text["subsets, strong attack, q = 5, 12 rounds"]
    long = by_text["subsets, strong attack, q = 5, 80 rounds"]
    # 4 points where the attack leaves room for 5: within a point of the room, met.
    assert short.met and "alie +4.00, room +5.00" in short.detail
    assert long.met and "alie +14.00, room +15.00" in long.detail
    farther = [dataclasses.replace(rows[1], final_accuracy=0.775), *rows[:1], *rows[2:]]
    by_text = {g.text.split(":")[0]: g for g in robustness_goals.goals(farther)}
    short = by_text["subsets, strong attack, q = 5, 12 rounds"]
    assert not short.met and "alie +2.50, room +5.00" in short.detail
    # The weak-attack goals read the grid's length only.
    rows.append(_row())
    weak = next(g for g in robustness_goals.goals(rows) if "within 1 point" in g.text)
    assert "q = 0: 80.00 (seed 2026)" in weak.text
    assert "## Longer training: 80 rounds" in robustness_markdown.markdown(rows, ["settings"])


def test_long_runs_repeat_the_strong_goal_cells_for_every_seed() -> None:
    cases = robustness_grid.grid(
        robustness_grid.DEFENCES, ("alie", "ipm"), (0, 3, 5), ("weak", "strong"), 1
    )
    longer = robustness_grid.long_runs(cases, [1, 2], 80)
    assert {c.rounds for c in longer} == {80}
    assert {c.defence.name for c in longer} == {"r=1 median", "subsets (Aspis)"}
    assert {(c.attack, c.mode, c.q) for c in longer} == {
        ("none", "none", 0),
        ("alie", "strong", 5),
        ("ipm", "strong", 5),
    }
    assert len(longer) == 2 * 2 * 3
    assert len({c.run_id for c in longer}) == len(longer)
    assert longer[0].config(SETTINGS).rounds == 80


def test_merge_replaces_rows_of_the_same_case_and_keeps_the_rest() -> None:
    old = [_row(), _row(rounds=80), _row(seed=7)]
    new = [_row(rounds=80, final_accuracy=0.5), _row(q=5)]
    merged = robustness_runs.merge(old, new)
    assert [(r.rounds, r.seed, r.q, r.final_accuracy) for r in merged] == [
        (12, robustness_grid.SEED, 3, 0.80),
        (80, robustness_grid.SEED, 3, 0.5),
        (12, 7, 3, 0.80),
        (12, robustness_grid.SEED, 5, 0.80),
    ]
    assert robustness_runs.grid_rounds(merged) == 12


def test_agreement_needs_the_same_flags_and_the_same_model() -> None:
    local = _row()
    same = robustness_goals.Agreement(
        local, dataclasses.replace(local, transport=robustness_grid.FLOWER)
    )
    assert same.agree
    other = dataclasses.replace(local, transport=robustness_grid.FLOWER, flagged_by_round=[[1, 2]])
    assert not robustness_goals.Agreement(local, other).agree


def test_markdown_lists_every_row_and_marks_failures() -> None:
    failed = _row(final_accuracy=None, precision=None, recall=None, error="round 1: boom")
    text = robustness_markdown.markdown([_row(), failed], ["settings"])
    assert text.count("| subsets (Aspis) | median (f = 0)") == 2
    assert "[1] round 1: boom" in text


def test_a_distorted_fraction_that_counted_dropped_files_is_shown_as_an_upper_bound() -> None:
    stale = _row(detection="across_rounds", drops_consistent=False, distorted_fraction=0.022)
    kept = _row(detection="across_rounds", distorted_fraction=0.01)
    old_rule = _row(detection=None, drops_consistent=False, distorted_fraction=0.03)
    text = robustness_markdown.markdown([stale, kept, old_rule], ["settings"])
    assert "| <= 0.022 |" in text and "| 0.010 |" in text and "| 0.030 |" in text
    assert [robustness_markdown.counted_dropped_files(r) for r in (stale, kept, old_rule)] == [
        True,
        False,
        False,
    ]


def test_round_timing_leaves_out_the_first_and_the_last_round() -> None:
    rounds, evals = timed([10.0, 12.0, 15.0, 19.0, 30.0], [1, 2, 3, 4, 9])
    assert rounds == [2.0, 3.0, 4.0] and evals == [2, 3, 4]


def _coded_row(method: Any, r: int = 3, seed: int = 2026, accuracy: float = 0.78) -> Any:
    return compression_runs.Row(
        method=method.kind,
        params=dict(method.params),
        final_accuracy=accuracy,
        uplink_bytes=1_000 if method.kind == "fp32" else 8,
        downlink_bytes=0,
        reduction_vs_fp32=None,
        bits_per_param=32.0 if method.kind == "fp32" else 0.25,
        r=r,
        rounds=30,
        label=method.label,
        scheme="bibd",
        transport=compression_grid.IN_PROCESS,
        samples_per_file=14,
        parameters=10,
        payloads=1,
        payload_bytes=1,
        uplink_bytes_per_worker_round=0.0,
        downlink_bytes_per_worker_round=0.0,
        accuracy_drop_vs_fp32=None,
        late_subset_accuracy=None,
        accuracy_by_round=[accuracy] * 30,
        uplink_by_round=[1_000 // 30] * 29 + [1_000 - 29 * (1_000 // 30)]
        if method.kind == "fp32"
        else [0] * 29 + [8],
        downlink_by_round=[0] * 30,
        digest_by_round=["d"] * 30,
        flagged=0,
        rejected=0,
        dropped_files=0,
        seconds=1.0,
        seed=seed,
    )


def test_more_seeds_repeat_only_fp32_and_the_goal_candidates() -> None:
    candidate = compression_grid.GOAL_METHODS[0]
    cases = compression_grid.seed_grid(
        [compression_grid.FP32, compression_grid.ZSTD, candidate], [1, 3], 3
    )
    assert {(c.method, c.r, c.seed) for c in cases} == {
        (m, r, s) for m in (compression_grid.FP32, candidate) for r in (1, 3) for s in (2027, 2028)
    }
    assert len({c.run_id for c in cases}) == len(cases)
    assert cases[0].config(compression_grid.Settings(30, 5, 500, {1: 32, 3: 14})).seed == 2027
    assert compression_grid.seed_grid([candidate], [3], 1) == []


def test_the_compression_goal_is_judged_on_the_mean_over_seeds_against_fp32_of_each_seed() -> None:
    fp32, candidate, single = compression_grid.FP32, *compression_grid.GOAL_METHODS[:2]
    rows = [
        _coded_row(fp32, seed=2026, accuracy=0.80),
        _coded_row(fp32, seed=2027, accuracy=0.76),
        _coded_row(candidate, seed=2026, accuracy=0.788),  # -1.2 points: one seed alone fails
        _coded_row(candidate, seed=2027, accuracy=0.755),  # -0.5 points
        _coded_row(single, seed=2026, accuracy=0.80),  # one seed only: cannot meet the goal
    ]
    rows = compression_goals.with_references(rows, 30)
    assert rows[3].accuracy_drop_vs_fp32 == pytest.approx(0.005)
    [outcome, lone] = compression_goals.outcomes(rows, 30)
    assert outcome.seeds == (2026, 2027) and outcome.drop == pytest.approx(0.0085)
    assert outcome.reduction == pytest.approx(1 - 8 / 1_000)
    assert lone.seeds == (2026,)
    [goal] = compression_goals.goals(rows, 30)
    assert goal.met and f"met by {candidate.label} (judged on the mean over 2 seeds)" in goal.detail
    worse = [*rows[:3], dataclasses.replace(rows[3], final_accuracy=0.74)]
    [goal] = compression_goals.goals(compression_goals.with_references(worse, 30), 30)
    assert not goal.met


def test_compression_markdown_tables_show_the_main_seed_and_a_seeds_section_the_rest() -> None:
    fp32, candidate = compression_grid.FP32, compression_grid.GOAL_METHODS[0]
    rows = compression_goals.with_references(
        [
            _coded_row(fp32, seed=2026),
            _coded_row(fp32, seed=2027, accuracy=0.70),
            _coded_row(candidate, seed=2026),
            _coded_row(candidate, seed=2027, accuracy=0.69),
        ],
        30,
    )
    text = compression_markdown.markdown(rows, ["notes"], 30)
    main_table = text.split("## r = 3")[1].split("## Seeds")[0]
    assert "70.00" not in main_table and "69.00" not in main_table
    seeds = text.split("## Seeds")[1]
    assert f"| {candidate.label} | 3 | 78.00 | 69.00 | 73.50 | -0.50 | 0.50 |" in seeds


def test_the_flower_section_reports_the_downlink_bytes_flower_sent_beyond_the_double() -> None:
    method = compression_grid.predictive(0.1)
    twin = dataclasses.replace(
        _coded_row(method),
        rounds=2,
        downlink_by_round=[1_000_000, 50_000],
        uplink_by_round=[10, 10],
        digest_by_round=["a", "b"],
    )
    # The run config sent with each of the K = 15 tasks of a round: 982 bytes in these runs,
    # whatever size today's RunConfig would have.
    flower = dataclasses.replace(
        twin,
        transport=compression_grid.FLOWER,
        downlink_by_round=[1_000_000 + 15 * 982, 50_000 + 15 * 982],
    )
    text = compression_markdown.markdown([twin, flower], ["notes"], 30)
    assert "with every task (982 bytes here)" in text
    assert "| 2 | 10 | 10 | +0 | 64,730 | 50,000 | +14,730 | yes |" in text


@pytest.mark.parametrize(
    ("example", "method", "r"),
    [
        ("thin-links.toml", compression_grid.adam_coded(20.0), 3),
        (
            "thin-links-r1.toml",
            compression_grid.adam_coded(20.0, low_rank=compression_grid.LOW_RANK),
            1,
        ),
    ],
)
def test_the_thin_links_examples_run_the_compression_goal_candidates(example, method, r) -> None:
    assert method in compression_grid.GOAL_METHODS
    config = load_run_config(BENCHMARKS.parent / "examples" / example)
    settings = compression_grid.Settings(30, 5, 500, {1: 32, 3: 14})
    measured = compression_grid.Case(method, r).config(settings)
    for section in ("codec", "training", "assignment", "aggregation", "attack"):
        assert getattr(config, section) == getattr(measured, section), section
    assert (config.seed, config.rounds) == (measured.seed, measured.rounds)
    assert config.data.samples_per_file == measured.data.samples_per_file
