"""Per-round charts as SVG geometry: line charts and the flagged-worker matrix.

The server computes every coordinate; the templates only draw what is here
(``templates/_charts.html``), so the pages need no charting library and the
charts are in the page as soon as it loads. Coordinates are in the SVG's own
``viewBox`` units; the SVG scales to the width of its box.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: Size of a chart's ``viewBox``.
WIDTH, HEIGHT = 480.0, 210.0
#: Room around the plot for the axes' labels: left, top, right, bottom.
MARGIN = (54.0, 10.0, 12.0, 34.0)
#: Most ticks on an axis.
MAX_TICKS = 6
#: Rounds up to which each point gets a marker.
MARKERS_UP_TO = 60
#: With ``clip_outliers``, a value over this many times the median of a chart's
#: values is drawn at the top edge, marked, instead of stretching the axis.
OUTLIER_RATIO = 4.0


@dataclass(frozen=True)
class Tick:
    """A labelled position on an axis (``at`` in viewBox units)."""

    at: float
    label: str


@dataclass(frozen=True)
class ChartPoint:
    """One round's value, placed on the chart."""

    x: float
    y: float
    round: int
    value: float
    label: str
    clipped: bool = False


@dataclass(frozen=True)
class ChartSeries:
    """One line of a chart: a quantity per round.

    Attributes
    ----------
    key : str
        Stable name, used as CSS class and data attribute (``"accuracy"``).
    label : str
        The legend's words.
    points : tuple of ChartPoint
        The rounds that have a value, in order.
    """

    key: str
    label: str
    points: tuple[ChartPoint, ...]

    @property
    def polyline(self) -> str:
        """Return the points as an SVG ``points`` attribute."""
        return " ".join(f"{p.x:.1f},{p.y:.1f}" for p in self.points)

    @property
    def last(self) -> ChartPoint | None:
        """Return the latest point, if any."""
        return self.points[-1] if self.points else None


@dataclass(frozen=True)
class LineChart:
    """A line chart over the rounds of a run.

    Attributes
    ----------
    key : str
        Stable name (``"accuracy"``, ``"loss"``, ``"bytes"``).
    title : str
        What the chart shows.
    series : tuple of ChartSeries
        Its lines.
    x_ticks, y_ticks : tuple of Tick
        Axis labels; x in rounds, y in the quantity's unit.
    left, top, right, bottom : float
        The plot area.
    markers : bool
        Whether each point gets a dot (few rounds) or only the line is drawn.
    """

    key: str
    title: str
    series: tuple[ChartSeries, ...]
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    left: float
    top: float
    right: float
    bottom: float
    markers: bool
    width: float = WIDTH
    height: float = HEIGHT

    @property
    def empty(self) -> bool:
        """Whether there is nothing to draw."""
        return not any(s.points for s in self.series)

    @property
    def num_points(self) -> int:
        """Return the number of plotted values over all lines."""
        return sum(len(s.points) for s in self.series)

    @property
    def clipped(self) -> tuple[tuple[ChartSeries, ChartPoint], ...]:
        """Return the points above the axis, drawn at its top, with their series."""
        return tuple((s, p) for s in self.series for p in s.points if p.clipped)


def nice_step(span: float, max_ticks: int = MAX_TICKS) -> float:
    """Return a round tick spacing (1, 2, 2.5 or 5 times a power of ten) for a span.

    Parameters
    ----------
    span : float
        Distance between the lowest and highest value; must be positive.
    max_ticks : int
        Most intervals the span may be cut into.

    Returns
    -------
    float
        The spacing.
    """
    if span <= 0 or not math.isfinite(span):
        raise ValueError(f"span must be positive and finite, got {span}")
    raw = span / max(max_ticks - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    for factor in (1.0, 2.0, 2.5, 5.0, 10.0):
        if factor * power >= raw:
            return factor * power
    return 10.0 * power  # pragma: no cover - the loop always returns


def nice_domain(low: float, high: float) -> tuple[float, float, float]:
    """Return ``(start, stop, step)``: a tick-aligned range that holds ``[low, high]``."""
    if high < low:
        low, high = high, low
    if high == low:
        pad = abs(high) * 0.1 or 1.0
        low, high = low - pad, high + pad
    step = nice_step(high - low)
    start = math.floor(low / step + 1e-9) * step
    stop = math.ceil(high / step - 1e-9) * step
    return start, stop, step


def _round_ticks(first: int, last: int) -> list[int]:
    """Return round numbers to label: multiples of a round step, and the first round."""
    span = last - first
    if span <= 0:
        return [first]
    step = max(1, math.ceil(nice_step(float(span))))
    ticks = list(range(math.ceil(first / step) * step, last + 1, step))
    if not ticks or ticks[0] - first > step / 2:
        ticks.insert(0, first)
    return ticks


def outlier_limit(values: Sequence[float]) -> float | None:
    """Return the value above which a chart draws points at its top edge, or ``None``.

    That is :data:`OUTLIER_RATIO` times the median, when some value exceeds it and
    at least half of the values do not (an axis is never scaled to a minority).

    Examples
    --------
    >>> outlier_limit([25e6, 1.1e6, 0.9e6, 1.0e6])
    4200000.0
    >>> outlier_limit([3.0, 2.0, 2.5]) is None
    True
    """
    positive = sorted(v for v in values if v > 0)
    if len(positive) < 3:
        return None
    middle = len(positive) // 2
    median = (
        positive[middle] if len(positive) % 2 else (positive[middle - 1] + positive[middle]) / 2
    )
    limit = OUTLIER_RATIO * median
    return limit if positive[-1] > limit else None


def line_chart(
    key: str,
    title: str,
    rounds: Sequence[int],
    series: Sequence[tuple[str, str, Sequence[float | None]]],
    *,
    fmt: Callable[[float], str],
    floor: float | None = None,
    ceiling: float | None = None,
    clip_outliers: bool = False,
) -> LineChart:
    """Lay out a line chart of per-round values.

    Parameters
    ----------
    key : str
        The chart's stable name.
    title : str
        What it shows.
    rounds : Sequence[int]
        Round numbers, increasing; the x axis.
    series : Sequence of (key, label, values)
        One line each; ``values[i]`` belongs to ``rounds[i]``, ``None`` where missing.
    fmt : Callable[[float], str]
        Formats a value for the y axis and the points' tooltips.
    floor, ceiling : float, optional
        Bounds the y axis always includes (e.g. 0 and 1 for accuracy).
    clip_outliers : bool
        Scale the y axis to the values up to :func:`outlier_limit` and draw the
        larger ones at its top edge, marked ``clipped`` (the first round's full
        model among compressed deltas would otherwise flatten every later round).

    Returns
    -------
    LineChart
        Every coordinate, ready to draw.
    """
    for _, label, values in series:
        if len(values) != len(rounds):
            raise ValueError(f"series {label!r} has {len(values)} values for {len(rounds)} rounds")
    left, top, right_margin, bottom_margin = MARGIN
    right, bottom = WIDTH - right_margin, HEIGHT - bottom_margin
    finite = [v for _, _, vs in series for v in vs if v is not None and math.isfinite(v)]
    if not rounds or not finite:
        return LineChart(key, title, (), (), (), left, top, right, bottom, markers=False)
    limit = outlier_limit(finite) if clip_outliers else None
    scaled = finite if limit is None else [v for v in finite if v <= limit]
    bounds = [*scaled, *(b for b in (floor, ceiling) if b is not None)]
    y_start, y_stop, y_step = nice_domain(min(bounds), max(bounds))
    x_first, x_last = rounds[0], rounds[-1]
    x_span = (x_last - x_first) or 1

    def x_of(number: float) -> float:
        if x_last == x_first:
            return (left + right) / 2
        return left + (number - x_first) / x_span * (right - left)

    def y_of(value: float) -> float:
        return bottom - (value - y_start) / ((y_stop - y_start) or 1.0) * (bottom - top)

    lines = []
    for series_key, label, values in series:
        points = tuple(
            ChartPoint(x=x_of(n), y=top, round=n, value=v, label=fmt(v), clipped=True)
            if limit is not None and v > limit
            else ChartPoint(x=x_of(n), y=y_of(v), round=n, value=v, label=fmt(v))
            for n, v in zip(rounds, values, strict=True)
            if v is not None and math.isfinite(v)
        )
        lines.append(ChartSeries(series_key, label, points))
    y_ticks = []
    count = round((y_stop - y_start) / y_step)
    for i in range(count + 1):
        value = y_start + i * y_step
        if value <= y_stop + 1e-9:
            y_ticks.append(Tick(at=y_of(value), label=fmt(value)))
    x_ticks = [Tick(at=x_of(n), label=str(n)) for n in _round_ticks(x_first, x_last)]
    return LineChart(
        key,
        title,
        tuple(lines),
        tuple(x_ticks),
        tuple(y_ticks),
        left,
        top,
        right,
        bottom,
        markers=len(rounds) <= MARKERS_UP_TO,
    )


# ------------------------------------------------------------------ flagged matrix


@dataclass(frozen=True)
class MatrixCell:
    """A worker named by an event in one round: a mark in the matrix."""

    x: float
    y: float
    size: float
    round: int
    worker: int
    kinds: tuple[str, ...]
    rejected: bool


@dataclass(frozen=True)
class MatrixRow:
    """One worker's row: where its label goes and how often it was named."""

    worker: int
    y: float
    count: int


@dataclass(frozen=True)
class FlagMatrix:
    """Which workers were flagged (or had a reply refused) in which round.

    Attributes
    ----------
    rows : tuple of MatrixRow
        Workers named at least once, one row each.
    cells : tuple of MatrixCell
        One mark per (round, worker) named.
    x_ticks : tuple of Tick
        Round labels.
    hidden : int
        Workers left out to keep the chart readable (the least often named).
    """

    rows: tuple[MatrixRow, ...]
    cells: tuple[MatrixCell, ...]
    x_ticks: tuple[Tick, ...]
    left: float
    top: float
    right: float
    bottom: float
    width: float
    height: float
    hidden: int

    @property
    def empty(self) -> bool:
        """Whether no worker was named in any round."""
        return not self.cells


#: Height of one worker's row.
ROW_HEIGHT = 22.0


def flag_matrix(
    rounds: Sequence[int],
    marks: Sequence[tuple[int, int, str]],
    *,
    rejections: frozenset[str],
    max_rows: int = 20,
) -> FlagMatrix:
    """Lay out the matrix of flagged workers: a row per worker, a column per round.

    Parameters
    ----------
    rounds : Sequence[int]
        Round numbers of the run, increasing.
    marks : Sequence of (round, worker, kind)
        Every detection event that names a worker.
    rejections : frozenset of str
        Kinds that mean a refused reply rather than a flag from comparing replicas.
    max_rows : int
        Most workers shown; the most often named are kept.

    Returns
    -------
    FlagMatrix
        Every coordinate, ready to draw.
    """
    by_cell: dict[tuple[int, int], list[str]] = {}
    for number, worker, kind in marks:
        by_cell.setdefault((number, worker), []).append(kind)
    counts: dict[int, int] = {}
    for _, worker in by_cell:
        counts[worker] = counts.get(worker, 0) + 1
    shown = sorted(sorted(counts, key=lambda w: (-counts[w], w))[:max_rows])
    left, top, right_margin, bottom_margin = 74.0, 8.0, MARGIN[2], 28.0
    right = WIDTH - right_margin
    height = top + max(len(shown), 1) * ROW_HEIGHT + bottom_margin
    bottom = height - bottom_margin
    first, last = (rounds[0], rounds[-1]) if rounds else (1, 1)
    columns = last - first + 1
    column = (right - left) / columns
    size = max(2.0, min(ROW_HEIGHT - 6, column - 2))

    def x_of(number: int) -> float:
        return left + (number - first + 0.5) * column

    row_y = {w: top + (i + 0.5) * ROW_HEIGHT for i, w in enumerate(shown)}
    cells = tuple(
        MatrixCell(
            x=x_of(number),
            y=row_y[worker],
            size=size,
            round=number,
            worker=worker,
            kinds=tuple(sorted(set(kinds))),
            rejected=all(k in rejections for k in kinds),
        )
        for (number, worker), kinds in sorted(by_cell.items())
        if worker in row_y and first <= number <= last
    )
    return FlagMatrix(
        rows=tuple(MatrixRow(worker=w, y=row_y[w], count=counts[w]) for w in shown),
        cells=cells,
        x_ticks=tuple(Tick(at=x_of(n), label=str(n)) for n in _round_ticks(first, last)),
        left=left,
        top=top,
        right=right,
        bottom=bottom,
        width=WIDTH,
        height=height,
        hidden=len(counts) - len(shown),
    )
