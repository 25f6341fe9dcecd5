"""Rows of bench_scale.py from what a run measured (benchmarks/lib/scale_rows.py)."""

from __future__ import annotations

import pytest

from benchmarks.lib.scale_probes import StoreSize, TaskTime
from benchmarks.lib.scale_rows import Trace, build_row, detection_scores, growth, per_round


def _trace(**changes: object) -> Trace:
    fields: dict[str, object] = {
        "transport": "flower",
        "workers": 4,
        "r": 1,
        "scheme": "none",
        "samples_per_file": 16,
        # rounds end at 10, 12, 15, 17: rounds 2..4 take 2, 3 and 2 s
        "round_ends": [10.0, 12.0, 15.0, 17.0],
        "round_starts": [105.0, 110.0, 112.0, 115.0],
        "launched": 100.0,
        "timings": [
            {"assign": 9.0, "exchange": 1.0},
            {"assign": 0.1, "detect": 0.2, "exchange": 1.5, "evaluate": 0.3},
            {"assign": 0.1, "detect": 0.4, "exchange": 2.0, "evaluate": 0.3},
            {"assign": 0.1, "detect": 0.3, "exchange": 1.5, "evaluate": 0.3},
        ],
        "flagged": [(3,), (3, 1), ()],
        "store": [
            StoreSize(100, 0, 0, 0),
            StoreSize(5000, 800, 1, 500),  # round 1: the run's setup too
            StoreSize(6000, 1600, 2, 1000),
            StoreSize(7200, 3200, 4, 2000),
            StoreSize(8200, 4000, 5, 2500),
        ],
        "tasks": [
            TaskTime(1, 5.0, 4.0),  # round 1 is not timed
            TaskTime(2, 0.5, 0.4),
            TaskTime(2, 0.5, 0.3),
            TaskTime(3, 1.0, 0.6),
            TaskTime(4, 0.2, 0.1),
        ],
        "peak_rss_bytes": 3 * 2**20,
        "adversaries": (3,),
        "load_average": (1.0, 2.0),
        "cpu_s": [30.0, 31.0, 33.0, 34.5],
    }
    fields.update(changes)
    return Trace(**fields)  # type: ignore[arg-type]


def test_a_row_times_rounds_two_onwards_between_consecutive_ends() -> None:
    row = build_row(_trace())
    assert row.rounds_timed == 3
    assert row.round_s == 2.0
    assert row.per_worker_ms == 500.0
    assert row.startup_s == 5.0
    assert row.peak_rss_mb == 3.0
    assert row.cpu_s_per_round == 1.5  # median of 1, 2 and 1.5


def test_the_training_share_is_the_timed_rounds_training_over_their_time() -> None:
    row = build_row(_trace())
    assert row.training_share == pytest.approx((0.7 + 0.6 + 0.1) / 7.0)
    assert row.training_s == pytest.approx(0.6)
    assert row.worker_overhead_s == pytest.approx(0.3)
    assert row.training_cpu_s is None  # records without CPU times


def test_the_coordinators_own_work_leaves_out_the_exchange_and_the_evaluation() -> None:
    row = build_row(_trace())
    assert row.own_work_s == pytest.approx(0.4)  # median of 0.3, 0.5, 0.4
    assert row.phase_s["exchange"] == 1.5


def test_database_growth_counts_rounds_two_onwards_and_bytes_per_event() -> None:
    per_round, per_event, evidence, events = growth(_trace().store)
    assert per_round == 1000.0  # median of 1000, 1200, 1000
    assert per_event == pytest.approx(3200 / 4)
    assert evidence == pytest.approx(2000 / 4)
    assert events == pytest.approx(4 / 3)


def test_no_event_in_the_timed_rounds_gives_no_bytes_per_event() -> None:
    store = [StoreSize(100, 0, 0, 0), StoreSize(200, 0, 0, 0), StoreSize(300, 0, 0, 0)]
    assert growth(store) == (100.0, None, None, 0.0)


def test_precision_and_recall_are_over_everyone_flagged_in_any_round() -> None:
    assert detection_scores([(3,), (3, 1), ()], (3, 2)) == (0.5, 0.5)
    assert detection_scores([(), ()], (3,)) == (None, 0.0)
    assert detection_scores([(), ()], ()) == (None, 1.0)


def test_tasks_of_untimed_rounds_are_left_out() -> None:
    train, overhead = per_round([TaskTime(1, 9.0, 9.0), TaskTime(2, 1.0, 0.25)], [2, 3])
    assert train == [0.25, 0.0]
    assert overhead == [0.75, 0.0]


def test_the_same_sums_in_cpu_time_come_from_the_cpu_spans() -> None:
    tasks = [TaskTime(2, 1.0, 0.5, 0.5, 0.25), TaskTime(2, 1.0, 0.5, 0.25, 0.125)]
    assert per_round(tasks, [2], cpu=True) == ([0.375], [0.375])
    assert per_round(tasks, [2]) == ([1.0], [1.0])
