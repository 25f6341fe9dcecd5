"""What the command line shows while a run goes: a line per round, or a bar on a terminal."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from phalanx_cli.output import Format, round_progress
from tests.support.configs import small_config
from tests.support.reports import round_report


def _shown(output: Format, *, terminal: bool) -> str:
    buffer = io.StringIO()
    out = Console(file=buffer, force_terminal=terminal, width=120)
    with round_progress(small_config(rounds=3), output, out) as (_, on_round):
        on_round(round_report(1, accuracy=0.5, flagged=(2, 5)))
        on_round(round_report(2, accuracy=0.625))
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
