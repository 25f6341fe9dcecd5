"""eval_stragglers.py as a command: report-only and refused options."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

from benchmarks import eval_stragglers
from benchmarks.lib import results
from benchmarks.lib.robustness_grid import FLOWER
from benchmarks.lib.stragglers_goals import (
    with_targets,
)
from tests.support.stragglers_rows import (
    row,
)


def test_report_only_rewrites_the_report_and_plots_from_stored_rows(tmp_path: Path) -> None:
    stored = with_targets(
        [
            row(),
            row(policy="fastest_k", clock_by_round=[2.0, 4.0, 6.0, 8.0, 10.0]),
            row(transport=FLOWER),
        ]
    )
    results.write_json(tmp_path / "stragglers.json", [asdict(r) for r in stored])
    assert eval_stragglers.main(["--report-only", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "stragglers.md").read_text(encoding="utf-8")
    assert "**met**: (b) 20 % persistent stragglers, 5x slower, cnn-k15, attack none" in text
    assert "Flower's simulation engine against the in-process test double" in text
    assert (tmp_path / "stragglers_cnn-k15.png").stat().st_size > 0
    assert not (tmp_path / "stragglers_mlp-k100.png").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rounds", "0"], "--rounds: must be at least 1"),
        (["--flower-rounds", "two"], "not a whole number"),
        (["--policies", "all,fastest"], "unknown policy 'fastest'"),
    ],
)
def test_options_that_would_run_something_else_are_refused_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as stopped:
        eval_stragglers.main([*argv, "--out", str(tmp_path)])
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_report_only_without_stored_rows_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit):
        eval_stragglers.main(["--report-only", "--out", str(tmp_path)])
    assert "holds no rows to report" in capsys.readouterr().err
