"""The run page's charts (phalanx_api.pages.charts): line charts and the flag matrix."""

from __future__ import annotations

from pathlib import Path

import pytest
from jinja2 import Environment, FileSystemLoader

import phalanx_api
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


def test_a_first_round_far_above_the_rest_is_drawn_at_the_top_not_flattening_them() -> None:
    sent = [25e6, 1.2e6, 0.9e6, 1.0e6, 1.1e6]
    rounds = list(range(1, 6))

    flat = charts.line_chart("bytes", "Bytes", rounds, [("up", "Up", sent)], fmt=str, floor=0.0)
    clipped = charts.line_chart(
        "bytes", "Bytes", rounds, [("up", "Up", sent)], fmt=str, floor=0.0, clip_outliers=True
    )

    def spread(chart: charts.LineChart) -> float:  # height the later rounds span
        ys = [p.y for p in chart.series[0].points[1:]]
        return max(ys) - min(ys)

    assert spread(flat) < 3  # the later rounds are a flat line at the bottom
    assert spread(clipped) > 30
    first = clipped.series[0].points[0]
    assert first.clipped and first.y == clipped.top and first.value == 25e6
    assert [p.round for _, p in clipped.clipped] == [1]
    assert not any(p.clipped for p in flat.series[0].points)


def test_the_chart_says_in_words_which_rounds_are_above_its_scale() -> None:
    templates = Path(phalanx_api.__file__).parent / "templates"
    macro = Environment(loader=FileSystemLoader(templates), autoescape=True).from_string(
        '{% from "_macros.html" import line_chart %}{{ line_chart(chart) }}'
    )
    chart = charts.line_chart(
        "bytes",
        "Bytes per round",
        [1, 2, 3, 4],
        [("bytes_up", "Up (workers to coordinator)", [25e6, 1e6, 1.1e6, 0.9e6])],
        fmt=lambda v: f"{v / 1e6:.1f} MB",
        floor=0.0,
        clip_outliers=True,
    )

    html = macro.render(chart=chart)

    assert 'data-clipped="1"' in html and "round 1 up 25.0 MB." in html
    assert html.count('class="clipped"') == 1


@pytest.mark.parametrize(
    "values",
    [[3.0, 2.0, 2.5], [5.0, 1.0], [0.0, 0.0, 0.0, 9.0], [1e9, 1e9, 1.0, 1.0]],
)
def test_nothing_is_clipped_when_no_value_stands_far_above_most(values: list[float]) -> None:
    rounds = list(range(1, len(values) + 1))
    chart = charts.line_chart("c", "C", rounds, [("v", "V", values)], fmt=str, clip_outliers=True)
    assert charts.outlier_limit(values) is None
    assert chart.clipped == ()


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
