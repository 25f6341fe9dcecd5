"""nnm_ties.py: the closest call at NNM's boundary, measured against a tie built by hand."""

from __future__ import annotations

import pytest
import torch

from benchmarks import nnm_ties


def test_the_closest_call_is_the_update_whose_boundary_neighbours_nearly_tie() -> None:
    # n = 4, f = 1: each update is mixed with its 3 nearest (itself included). Update 0's
    # 3rd and 4th nearest lie at 2.0 and 2.000002 (1 ppm apart); the others' are far apart.
    updates = torch.tensor([[0.0, 0.0], [1.0, 0.0], [-2.0, 0.0], [0.0, 2.000002]])
    row, margin_ppm, error_ppm = nnm_ties.closest_call(updates, f=1)
    assert row == 0
    assert margin_ppm == pytest.approx(1.0, rel=0.1)
    assert 0 <= error_ppm < 1


def test_a_run_without_adversaries_is_refused_in_words() -> None:
    with pytest.raises(SystemExit, match="at least one adversary"):
        nnm_ties.main(["dirichlet-0.3", "median", "ipm", "0"])


def test_only_rounds_past_the_threshold_are_examined_and_named_by_number(
    capsys: pytest.CaptureFixture[str],
) -> None:
    on_gap = nnm_ties.report(1e-3)
    near_tie = torch.tensor([[0.0, 0.0], [1.0, 0.0], [-2.0, 0.0], [0.0, 2.000002]])
    on_gap(1e-8, near_tie, 1)
    on_gap(0.05, near_tie, 1)
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("round 2: gap 0.0500, n = 4, f = 1; update 0: boundary neighbours")
