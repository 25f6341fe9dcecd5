"""The run page's charts (phalanx_api.pages.charts): line charts and the flag matrix."""

from __future__ import annotations

import pytest

from phalanx.event_kinds import EventKind
from phalanx_api.pages import charts
from phalanx_api.pages.formatting import percent


def test_a_line_chart_places_rounds_left_to_right_and_values_bottom_to_top() -> None:
    chart = charts.line_chart(
        "accuracy", "Accuracy", [1, 2, 3], [("acc", "A", [0.2, None, 0.8])], fmt=percent, floor=0.0
    )
    (series,) = chart.series
    assert [p.round for p in series.points] == [1, 3]  # a missing value is skipped
    first, last = series.points
    assert chart.left == first.x < last.x == chart.right
    assert first.y > last.y  # higher values are drawn higher
    assert chart.top <= last.y and first.y <= chart.bottom
    assert chart.y_ticks[0].label == "0.0%"
    assert [t.label for t in chart.x_ticks] == ["1", "2", "3"]


def test_an_empty_chart_says_so() -> None:
    chart = charts.line_chart("loss", "Loss", [], [("loss", "Loss", [])], fmt=str)
    assert chart.empty and chart.num_points == 0
    with pytest.raises(ValueError, match="2 values for 3 rounds"):
        charts.line_chart("x", "X", [1, 2, 3], [("x", "X", [1.0, 2.0])], fmt=str)


@pytest.mark.parametrize(("span", "step"), [(1.0, 0.2), (4.27e6, 1e6), (7.0, 2.0), (0.03, 0.01)])
def test_ticks_fall_on_round_numbers(span: float, step: float) -> None:
    assert charts.nice_step(span) == pytest.approx(step)


def test_the_flag_matrix_has_a_row_per_flagged_worker_and_a_mark_per_round() -> None:
    marks = [
        (1, 4, EventKind.OUTSIDE_MAX_CLIQUE),
        (2, 4, EventKind.OUTSIDE_MAX_CLIQUE),
        (2, 6, EventKind.BAD_SIGNATURE),
    ]
    matrix = charts.flag_matrix([1, 2, 3], marks, rejections=frozenset({EventKind.BAD_SIGNATURE}))
    assert [(r.worker, r.count) for r in matrix.rows] == [(4, 2), (6, 1)]
    assert [(c.round, c.worker, c.rejected) for c in matrix.cells] == [
        (1, 4, False),
        (2, 4, False),
        (2, 6, True),
    ]
    few = charts.flag_matrix([1, 2, 3], marks, rejections=frozenset(), max_rows=1)
    assert [r.worker for r in few.rows] == [4] and few.hidden == 1
