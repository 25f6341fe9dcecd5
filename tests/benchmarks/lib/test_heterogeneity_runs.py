"""ByzFL beside Phalanx on the same updates, and the share of honest updates flagged."""

from __future__ import annotations

import pytest
import torch

from benchmarks.lib.heterogeneity_runs import (
    PeerGap,
    byzfl_aggregator,
    honest_flagged,
)
from tests.support.reports import round_report


def test_byzfl_agrees_with_phalanx_on_the_same_updates_where_the_rule_is_the_same() -> None:
    updates = torch.randn(20, 50, generator=torch.Generator().manual_seed(3))
    for rule, pre in (("median", None), ("trimmed_mean", None), ("median", "nnm")):
        gap = PeerGap(byzfl_aggregator(rule, pre, 4))
        gap(rule, updates, f=4, pre=pre)
        assert gap.gaps[0] < 1e-5, (rule, pre, gap.gaps)


def test_a_rule_byzfl_lacks_records_no_gap() -> None:
    assert byzfl_aggregator("bulyan", None, 4) is None
    gap = PeerGap(None)
    gap("median", torch.ones(5, 3), f=0)
    assert gap.gaps == []


def test_honest_flagged_counts_flags_of_honest_clients_over_their_rounds() -> None:
    reports = [round_report(1, flagged=(0, 5)), round_report(2, flagged=(5,)), round_report(3)]
    # Client 5 lies; client 0 is honest and was flagged once in 3 rounds of 19 honest clients.
    assert honest_flagged(reports, frozenset({5}), 20) == pytest.approx(1 / (3 * 19))
    assert honest_flagged([], frozenset(), 20) == 0.0


def test_the_gap_of_each_aggregation_is_told_with_the_updates_and_f_it_came_from() -> None:
    told: list[tuple[float, torch.Tensor, int]] = []
    gap = PeerGap(byzfl_aggregator("median", None, 2), lambda g, u, f: told.append((g, u, f)))
    updates = torch.randn(7, 4, generator=torch.Generator().manual_seed(5))
    gap("median", updates, f=2)
    ((value, seen, f),) = told
    assert value == gap.gaps[0] and seen is updates and f == 2
