"""The per-client view's heat map, laid out from a stored partition report."""

from __future__ import annotations

from typing import Any

import pytest

from phalanx_api.pages.client_panel import SHOWN, heat_map
from tests.support.local_runs import HISTOGRAMS, PARTITION


def test_each_cell_is_a_clients_count_of_a_label_shaded_by_the_largest() -> None:
    drawn = heat_map(PARTITION)

    assert drawn is not None
    assert (drawn.kind, drawn.largest) == ("dirichlet", 85)
    assert (len(drawn.rows), len(drawn.labels)) == (3, 3)
    unusual = drawn.rows[1]
    assert [c.count for c in unusual.cells] == HISTOGRAMS[1]
    assert [c.opacity for c in unusual.cells] == [round(2 / 85, 3), 1.0, round(3 / 85, 3)]
    assert unusual.total == 90


def test_a_large_federation_draws_its_first_clients() -> None:
    report = {"kind": "iid", "histograms": [[1, 2]] * (SHOWN + 7)}
    drawn = heat_map(report)
    assert drawn is not None and len(drawn.rows) == SHOWN and drawn.total_clients == SHOWN + 7


@pytest.mark.parametrize(
    "report",
    [
        {"histograms": None},
        {"histograms": []},
        {"histograms": "x"},
        {"histograms": [[1, -2]]},
        {"histograms": [[1, True]]},
        {"histograms": [[1.5]]},
        {"histograms": [{"a": 1}]},
        {},
    ],
)
def test_a_report_without_readable_histograms_draws_nothing(report: dict[str, Any]) -> None:
    assert heat_map(report) is None
