"""Federated evaluation in local-data runs, through the coordinator on the in-process transport.

After each round every client evaluates the new global model on its local test split; the
coordinator judges, bounds and aggregates the reports and keeps them beside the server's
evaluation. A hostile report never stops the run and moves the aggregate by its capped
weight at most.
"""

from __future__ import annotations

import dataclasses

import pytest

from phalanx.event_kinds import EventKind
from phalanx.federated_evaluation import MAX_LOSS, EvaluationReport
from phalanx.local_evaluation import split_sizes
from phalanx.runs import execute_run, simulated_partition
from phalanx_clients.inprocess import InProcessTransport
from tests.support.configs import local_config
from tests.support.coordinator_runs import RUN_ID, FakeSink, run
from tests.support.inprocess import inprocess_workers

PARTITION = {"partition": {"kind": "dirichlet", "alpha": 0.5}}


def test_every_round_aggregates_the_clients_reports_by_count_beside_the_servers() -> None:
    config = local_config(data=PARTITION)
    parts = simulated_partition(config).samples  # type: ignore[union-attr]
    tests = [split_sizes(n, 0.2)[1] for n in parts]

    reports = run(config).reports

    for r in reports:
        rows = r.clients
        assert [c.worker for c in rows] == list(range(6))
        assert [c.eval_samples for c in rows] == tests
        assert all(c.eval_status == "counted" for c in rows)
        weighted = sum(c.eval_accuracy * c.eval_samples for c in rows) / sum(tests)  # type: ignore[operator, misc]
        assert r.metrics["fed_accuracy"] == pytest.approx(weighted)
        assert r.metrics["fed_samples"] == sum(tests)
        assert r.metrics["fed_count_cap"] == max(tests)
        # The server's evaluation on the held-out test set stays beside it.
        assert r.metrics["eval_samples"] > 0 and 0.0 <= r.accuracy <= 1.0
        # Every accepted update's distance to the aggregate, over the round's median.
        ratios = sorted(c.distance_ratio for c in rows if c.distance_ratio is not None)
        assert len(ratios) == 6 and 1.0 in ratios
    assert reports[-1].metrics["fed_accuracy"] > reports[0].metrics["fed_accuracy"]


def test_evaluate_every_skips_rounds_and_zero_trains_on_all_the_data() -> None:
    every_two = run(local_config(rounds=3, data={"local": {"evaluate_every": 2}})).reports
    assert ["fed_accuracy" in r.metrics for r in every_two] == [False, True, True]  # and the last

    config = local_config(rounds=1, data={"local": {"evaluate_every": 0}})
    (off,) = run(config).reports
    parts = simulated_partition(config).samples  # type: ignore[union-attr]
    assert not any(k.startswith("fed_") for k in off.metrics)
    assert off.metrics["samples_weighted"] == sum(parts)  # nothing held out
    assert all(c.eval_status is None and c.samples is not None for c in off.clients)


HOSTILE = {
    1: {"loss": float("nan")},
    2: {"accuracy": float("inf")},
    3: {"num_samples": -4},
    4: {"num_samples": 10**30},
    5: {"accuracy": 7.0},
}


def lies(report: EvaluationReport) -> EvaluationReport:
    return dataclasses.replace(report, **HOSTILE.get(report.worker, {}))  # type: ignore[arg-type]


def test_hostile_reports_are_refused_on_the_record_and_the_run_goes_on() -> None:
    config = local_config(rounds=2)
    honest = run(config).reports
    hostile = run(config, tamper_report=lies).reports

    assert len(hostile) == 2
    for before, after in zip(honest, hostile, strict=True):
        # Evaluation changes no model.
        assert after.model_digest == before.model_digest and after.accuracy == before.accuracy
        refused = [e for e in after.events if e.kind == EventKind.IMPLAUSIBLE_EVALUATION]
        assert sorted(e.worker for e in refused) == [1, 2, 3, 4, 5]  # type: ignore[type-var]
        assert all(e.severity == "medium" for e in refused)
        assert not after.flagged and not after.rejected
        assert after.metrics["fed_reports"] == 1.0 and after.metrics["fed_refused"] == 5.0
        # Only worker 0's report counts: the aggregate is its own figure.
        (zero,) = [c for c in after.clients if c.worker == 0]
        assert after.metrics["fed_accuracy"] == zero.eval_accuracy
        assert [c.eval_status for c in after.clients] == ["counted"] + ["refused"] * 5


def test_a_liar_within_range_weighs_no_more_than_the_largest_test_split() -> None:
    config = local_config(rounds=1, data={"partition": {"kind": "quantity", "alpha": 1.0}})
    parts = simulated_partition(config).samples  # type: ignore[union-attr]
    cap = max(split_sizes(n, 0.2)[1] for n in parts)

    def boasts(report: EvaluationReport) -> EvaluationReport:
        if report.worker != 0:
            return report
        return dataclasses.replace(report, accuracy=1.0, loss=1e300, num_samples=2**53)

    (honest,) = run(config).reports
    (lied,) = run(config, tamper_report=boasts).reports

    others = [c for c in honest.clients if c.worker != 0]
    weight = sum(c.eval_samples for c in others)  # type: ignore[misc]
    share = cap / (weight + cap)
    assert lied.metrics["fed_capped_claims"] == 1.0 and lied.metrics["fed_clipped_losses"] == 1.0
    assert lied.metrics["fed_accuracy"] - honest.metrics["fed_accuracy"] <= share
    assert lied.metrics["fed_loss"] <= honest.metrics["fed_loss"] + MAX_LOSS * share
    assert not [e for e in lied.events if e.kind == EventKind.IMPLAUSIBLE_EVALUATION]


def test_a_report_that_never_comes_is_left_out_and_its_client_is_on_the_record_as_silent() -> None:
    def silent(report: EvaluationReport) -> EvaluationReport | None:
        return None if report.worker == 3 else report

    (r,) = run(local_config(rounds=1), tamper_report=silent).reports
    assert r.metrics["fed_reports"] == 5.0 and r.metrics["fed_silent"] == 1.0
    assert [c.eval_status for c in r.clients] == ["counted"] * 3 + ["silent"] + ["counted"] * 2
    # Silence is not a lie, nor a fault the client named: like a worker that never replies
    # with its update, it is on the record (its row, the round's count), not an event.
    assert not [e for e in r.events if e.worker == 3]


@pytest.mark.parametrize("error", [OSError, SystemExit], ids=["os-error", "sys-exit"])
def test_a_client_that_fails_to_evaluate_is_on_the_record_as_a_fault_not_a_liar(
    monkeypatch: pytest.MonkeyPatch, error: type[BaseException]
) -> None:
    config = local_config(rounds=2)
    workers = inprocess_workers(config, RUN_ID)

    def unreadable(*args: object, **kwargs: object) -> None:
        raise error("the local test split is unreadable")

    monkeypatch.setattr(workers[2], "evaluate", unreadable)
    reports = execute_run(
        config, run_id=RUN_ID, sink=FakeSink(), transport=InProcessTransport(workers)
    )

    for r in reports:
        (event,) = [e for e in r.events if e.worker == 2]
        assert (event.kind, event.severity) == (EventKind.WORKER_ERROR, "low")
        assert "unreadable" in event.evidence["reason"]
        assert event.evidence["reason"].startswith("evaluation: ")
        assert not r.flagged and r.metrics["fed_failed"] == 1.0
