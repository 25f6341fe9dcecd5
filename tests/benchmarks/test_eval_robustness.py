"""eval_robustness.py as a command: which colluders' runs its options choose, and refusals."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from benchmarks import eval_robustness
from benchmarks.lib import results
from benchmarks.lib.colluders_grid import ColluderCase
from benchmarks.lib.colluders_runs import ColluderRow, join_rows, split_rows
from benchmarks.lib.robustness_grid import Case, Settings
from benchmarks.lib.robustness_runs import Row


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


def test_the_grid_alone_runs_again_only_what_the_current_rule_has_not_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    grid, colluders = split_rows(results.read_json(results.RESULTS / "robustness.json"))
    mols = [
        dataclasses.replace(r, detection=None)  # as measured before the rule across rounds
        for r in grid
        if r.scheme == "mols" and r.seed == 2026 and r.rounds == 20
    ]
    done = dataclasses.replace(mols[0], detection="across_rounds")
    stored = [done, *mols[1:3]]
    results.write_json(tmp_path / "robustness.json", join_rows(stored, colluders[:2]))
    seen: list[Case] = []

    def recording_run_grid(
        cases: Sequence[Case], settings: Settings, jobs: int, log: Callable[[Row], None]
    ) -> list[Row]:
        seen.extend(cases)
        remeasured = dataclasses.replace(mols[1], final_accuracy=0.5, detection="across_rounds")
        log(remeasured)
        return [remeasured]

    monkeypatch.setattr(eval_robustness, "run_grid", recording_run_grid)
    argv = ["--grid-only", "--missing-only", "--schemes", "mols", "--no-flower"]
    argv += ["--extra-seeds", "", "--long-rounds", "0", "--out", str(tmp_path)]
    assert eval_robustness.main(argv) == 0

    keys = {(c.defence.name, c.attack, c.mode, c.q) for c in seen}
    assert (done.defence, done.attack, done.mode, done.q) not in keys
    assert (mols[1].defence, mols[1].attack, mols[1].mode, mols[1].q) in keys
    assert {c.defence.scheme for c in seen} == {"mols"}
    after, kept = split_rows(results.read_json(tmp_path / "robustness.json"))
    assert [r.final_accuracy for r in after] == [done.final_accuracy, 0.5, mols[2].final_accuracy]
    assert kept == colluders[:2]
