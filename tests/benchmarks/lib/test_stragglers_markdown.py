"""The stragglers report (benchmarks/lib/stragglers_markdown.py)."""

from __future__ import annotations

from benchmarks.lib.stragglers_goals import (
    with_targets,
)
from benchmarks.lib.stragglers_markdown import markdown
from benchmarks.lib.stragglers_runs import REFUSED
from tests.support.stragglers_rows import (
    row,
)

# The report


def test_the_report_lists_every_run_with_its_parameters_and_one_footnote_per_refusal() -> None:
    refused = f"{REFUSED}Value error, not yet"
    rows = with_targets(
        [
            row(),
            row(policy="fastest_k", collect={"k": 12}, clock_by_round=[2.0, 4, 6, 8, 10]),
            row(policy="adaptive_k", error=refused, accuracy_by_round=[], clock_by_round=[]),
            row(policy="bandit", error=refused, accuracy_by_round=[], clock_by_round=[]),
        ]
    )
    text = markdown(rows, ["notes"])
    assert "![Fashion-MNIST CNN, K = 15: accuracy against simulated time]" in text
    assert "(stragglers_cnn-k15.png)" in text
    assert "| fastest_k (k = 12) | 75.00 | 8.0 | 0.33x | 80.00 | +0.00 |" in text
    assert "| adaptive_k [1] | — |" in text and "| bandit [1] | — |" in text
    assert text.count(refused) == 1
