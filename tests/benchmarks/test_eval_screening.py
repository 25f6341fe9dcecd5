"""eval_screening.py's report: it names the CPU of every row, not the one that writes it."""

from __future__ import annotations

import pytest

from benchmarks import eval_screening
from benchmarks.lib import results
from benchmarks.lib.results import Machine


def test_the_report_names_every_host_its_rows_ran_on(monkeypatch: pytest.MonkeyPatch) -> None:
    writer = Machine("x86_64", "", "Some Other CPU", 2, "3.11.7", "Linux")
    monkeypatch.setattr(eval_screening, "machine", lambda: writer)
    monkeypatch.setattr(eval_screening, "version", lambda name: "2.13.0+cpu")
    rows = results.read_json(results.RESULTS / "screening.json")
    rows[0] = {**rows[0], "host": "Intel(R) Xeon(R) Processor"}
    text = eval_screening.markdown(rows, 60.9, quick=False)
    n = len(rows) - 1
    assert f"rows on AMD EPYC ({n} runs), Intel(R) Xeon(R) Processor (1 run), 2 cores" in text
    assert "Some Other CPU" not in text
