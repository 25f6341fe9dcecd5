"""eval_robustness.py as a command: which colluders' runs its options choose, and refusals."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from benchmarks import eval_robustness
from benchmarks.lib.colluders_grid import ColluderCase
from benchmarks.lib.colluders_runs import ColluderRow


def _chosen(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> list[ColluderCase]:
    """The cases ``argv`` would run, caught by a recording double of ``run_colluders``."""
    seen: list[ColluderCase] = []

    def recording_run_colluders(
        cases: Sequence[ColluderCase],
        settings: object,
        after: int,
        jobs: int,
        keep: Callable[[ColluderRow], None],
    ) -> None:
        seen.extend(cases)

    monkeypatch.setattr(eval_robustness, "run_colluders", recording_run_colluders)
    assert eval_robustness.main(argv) == 0
    return seen


def test_the_longer_mols_check_runs_only_the_cells_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = [
        *("--colluders", "--schemes", "mols", "--rounds", "80", "--colluder-qs", "2,3"),
        *("--colluder-bounds", "default", "--out", str(tmp_path)),
    ]
    cases = _chosen(monkeypatch, argv)

    assert {c.defence.scheme for c in cases} == {"mols"}
    assert {c.rounds for c in cases} == {80}
    assert {c.max_adversaries for c in cases} == {None}
    assert sorted({c.q for c in cases}) == [0, 2, 3]
    assert sorted({c.seed for c in cases}) == [2026, 2027, 2028]
    assert len(cases) == 3 * (1 + 2 * 2)  # per seed: no attack, then 2 strategies x 2 q


def test_the_stated_bound_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["--colluders", "--schemes", "bibd", "--colluder-bounds", "stated"]
    cases = _chosen(monkeypatch, [*argv, "--out", str(tmp_path)])
    assert {c.max_adversaries for c in cases if c.q} == {5}


@pytest.mark.parametrize("qs", ["2,x", ",", "0", "-1"])
def test_colluder_qs_that_are_not_counts_of_colluders_are_refused_in_words(
    tmp_path: Path, qs: str
) -> None:
    with pytest.raises(SystemExit, match="--colluder-qs"):
        eval_robustness.main(["--colluders", "--colluder-qs", qs, "--out", str(tmp_path)])
