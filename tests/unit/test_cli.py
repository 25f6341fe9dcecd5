"""The command line's round-by-round output."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest
from rich.console import Console

from phalanx.cli import Format, _progress
from phalanx.reports import RoundReport
from tests.configs import small_config


def _report(round: int, accuracy: float, flagged: tuple[int, ...]) -> RoundReport:
    now = datetime.now(UTC)
    return RoundReport(
        round=round,
        started_at=now,
        finished_at=now,
        loss=0.0,
        accuracy=accuracy,
        flagged=flagged,
        rejected=(),
        dropped_files=(),
        events=(),
        bytes_up=0,
        bytes_down=0,
        timings={},
        assignment={},
        model_digest="",
    )


def _shown(output: Format, *, terminal: bool) -> str:
    buffer = io.StringIO()
    out = Console(file=buffer, force_terminal=terminal, width=120)
    with _progress(small_config(rounds=3), output, out) as (_, on_round):
        on_round(_report(1, 0.5, (2, 5)))
        on_round(_report(2, 0.625, ()))
    return buffer.getvalue()


def test_a_log_gets_one_line_per_round_with_accuracy_and_flagged_workers() -> None:
    assert _shown("table", terminal=False).splitlines() == [
        "round 1/3  accuracy 0.500  flagged 2,5",
        "round 2/3  accuracy 0.625  flagged none",
    ]


def test_json_output_keeps_a_log_free_of_round_lines() -> None:
    assert _shown("json", terminal=False) == ""


@pytest.mark.parametrize("output", ["table", "json"])
def test_a_terminal_gets_the_bar_instead_of_lines(output: Format) -> None:
    shown = _shown(output, terminal=True)
    assert "accuracy 0.625  flagged none" in shown
    assert "round 1/3" not in shown
