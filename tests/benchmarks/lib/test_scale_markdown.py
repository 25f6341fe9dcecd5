"""The table and the goals of scale.md (benchmarks/lib/scale_markdown.py)."""

from __future__ import annotations

from typing import Any

from benchmarks.lib.round_timing import FEDAVG, PHALANX, Measurement
from benchmarks.lib.scale_fedavg import ratio_summary
from benchmarks.lib.scale_markdown import fedavg_lines, goals, table


def _row(transport: str, k: int, round_s: float, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "K": k,
        "r": 1,
        "scheme": "none",
        "transport": transport,
        "round_s": round_s,
        "per_worker_ms": 1000 * round_s / k,
        "training_share": 0.5,
        "peak_rss_mb": 900.0,
        "db_bytes_per_round": 300.0 * k,
        "precision": 1.0,
        "recall": 1.0,
        "own_work_s": 1.0,
        "worker_overhead_s": 1.0,
        "training_s": 3.0,
        "bytes_per_event": 700.0,
        "evidence_bytes_per_event": 600.0,
        "startup_s": 2.0,
        "load_average": (2.0, 3.0),
        "measured": "2026-12-03 03:00 UTC",
    }
    row.update(changes)
    return row


ROWS = [
    _row("in-process", 100, 1.0),
    _row("in-process", 1000, 12.0, cpu_s_per_round=6.0),
    _row("flower", 100, 1.2, precision=None),
    _row("flower", 1000, 15.0, training_s=1.5, cpu_s_per_round=9.0),
]


def test_the_table_has_one_line_per_row_ordered_by_transport_and_k() -> None:
    lines = table(ROWS)
    assert len(lines) == 2 + len(ROWS)
    assert lines[2].startswith("| flower | 1 | 100 | 1.20 | – |")  # no CPU reading
    assert lines[-1].startswith("| in-process | 1 | 1,000 | 12.00 | 6.00 |")
    assert "| – |" in lines[2]  # nobody flagged: no precision


def test_goals_say_which_are_met_and_on_what_figures() -> None:
    text = "\n".join(goals(ROWS))
    assert "K = 1,000 / K = 100, in-process, r = 1: **12.0x** (goal at most 11x: NOT met)" in text
    assert (
        "in-process, r = 1: 2.00 s against 3.00 s of training (goal: at most the training: met)"
        in (text)
    )
    assert (
        "flower, r = 1: 2.00 s against 1.50 s of training (goal: at most the training: NOT met)"
        in (text)
    )
    assert "Flower / in-process, r = 1, K = 100: **1.20x** (goal at most 1.5: met)" in text
    assert "K = 1,000: **1.25x** (goal at most 1.5: met); CPU per round 1.50x." in text
    assert "bytes per event: 700 to 700 (goal at most 2,048: met)" in text


def test_a_missing_k_leaves_its_goal_out_rather_than_guessing() -> None:
    text = "\n".join(goals([_row("flower", 100, 1.0)]))
    assert "K = 1,000 / K = 100" not in text
    assert "Flower / in-process" not in text


def _measurement(system: str, repeat: int, seconds: list[float]) -> Measurement:
    return Measurement(system, repeat, seconds, [0.0] * len(seconds), 0.8, {})


def test_the_fedavg_ratio_is_the_median_of_the_pairs_with_their_spread() -> None:
    runs = [
        _measurement(PHALANX, 1, [1.0, 1.2, 1.1]),
        _measurement(FEDAVG, 1, [1.0, 1.0, 1.0]),
        _measurement(PHALANX, 2, [0.9]),
        _measurement(FEDAVG, 2, [1.0]),
        _measurement(PHALANX, 3, [2.0]),
        _measurement(FEDAVG, 3, [1.0]),
    ]
    result = ratio_summary(runs)
    assert result["ratio_per_pair"] == [1.1, 0.9, 2.0]
    assert result["ratio"] == 1.1
    assert (result["min"], result["max"], result["goal_met"]) == (0.9, 2.0, False)
    result.update(workers=100, rounds=5)
    line = fedavg_lines(result)[0]
    assert "**1.10** (goal at most 1.0: NOT met); pairs from 0.90 to 2.00" in line
    assert fedavg_lines(None) == ["Not measured in this run."]
