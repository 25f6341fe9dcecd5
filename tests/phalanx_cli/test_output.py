"""What the command line shows while a run goes: a line per round, or a bar on a terminal."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console

from phalanx.reports import RoundReport
from phalanx_cli.output import Format, clock, round_progress, time_left
from tests.support.configs import small_config
from tests.support.reports import round_report

START = datetime(2026, 1, 1, tzinfo=UTC)


def _round(
    number: int,
    *,
    start_s: float,
    duration_s: float,
    accuracy: float = 0.0,
    flagged: tuple[int, ...] = (),
) -> RoundReport:
    """Round ``number``, started ``start_s`` seconds into the run."""
    return round_report(
        number,
        accuracy=accuracy,
        flagged=flagged,
        started_at=START + timedelta(seconds=start_s),
        duration_s=duration_s,
    )


def _shown(output: Format, *, terminal: bool) -> str:
    buffer = io.StringIO()
    out = Console(file=buffer, force_terminal=terminal, width=120)
    with round_progress(small_config(rounds=3), output, out) as (_, on_round):
        on_round(_round(1, start_s=0, duration_s=10, accuracy=0.5, flagged=(2, 5)))
        on_round(_round(2, start_s=11, duration_s=9, accuracy=0.625))
    return buffer.getvalue()


def test_a_log_gets_one_line_per_round_with_accuracy_flagged_workers_and_eta() -> None:
    assert _shown(Format.TABLE, terminal=False).splitlines() == [
        "round 1/3  accuracy 0.500  flagged 2,5",
        "round 2/3  accuracy 0.625  flagged none  ETA 0:00:09",
    ]


def test_json_output_keeps_a_log_free_of_round_lines() -> None:
    assert _shown(Format.JSON, terminal=False) == ""


@pytest.mark.parametrize("output", [Format.TABLE, Format.JSON])
def test_a_terminal_gets_the_bar_instead_of_lines(output: Format) -> None:
    shown = _shown(output, terminal=True)
    assert "accuracy 0.625  flagged none  ETA 0:00:09" in shown
    assert "round 1/3" not in shown


def test_the_eta_is_the_rounds_left_at_the_mean_time_of_the_rounds_after_the_first() -> None:
    # A resumed run: its first round here is 4, and it carries the federation's warm-up.
    seen = [
        _round(4, start_s=0, duration_s=40),
        _round(5, start_s=40, duration_s=1),
        _round(6, start_s=42, duration_s=2),
    ]
    assert time_left(seen, 10) == pytest.approx(4 * 2)  # (44 - 40) s over rounds 5 and 6
    assert time_left(seen[:1], 10) is None  # the warm-up alone says nothing of the rest
    assert time_left([*seen, _round(10, start_s=50, duration_s=1)], 10) is None
    assert time_left([], 10) is None


def test_the_last_round_has_no_eta() -> None:
    buffer = io.StringIO()
    with round_progress(small_config(rounds=1), Format.TABLE, Console(file=buffer)) as (_, on):
        on(_round(1, start_s=0, duration_s=5))
    assert buffer.getvalue().splitlines() == ["round 1/1  accuracy 0.000  flagged none"]


def test_a_clock_reads_hours_minutes_and_seconds() -> None:
    shown = [clock(s) for s in (0, 59.6, 61, 3600 * 26 + 5)]
    assert shown == ["0:00:00", "0:01:00", "0:01:01", "26:00:05"]
