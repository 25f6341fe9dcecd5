"""One run summary for every backend: scored against the red team only where one is known."""

from __future__ import annotations

from dataclasses import replace

from phalanx.plan import adversaries
from phalanx.reports import EventReport, RoundReport
from phalanx.roster import simulated_roster
from phalanx.runs.summary import RunSummary, summarize
from tests.support.configs import small_config
from tests.support.reports import round_report

RUN_ID = "summary-run"

#: Every key a stored summary had before simulated and deployed runs shared one summary.
SIMULATED_KEYS = {
    "run_id",
    "rounds",
    "final_accuracy",
    "flagged",
    "adversaries",
    "precision",
    "recall",
    "bytes_up",
    "bytes_down",
    "model_digest",
}
DEPLOYED_KEYS = SIMULATED_KEYS | {"backend", "refused_replies"}


def _event(worker: int, client_id: str | None, kind: str) -> EventReport:
    return EventReport(worker, client_id, kind, "high", {})


def _with_events(number: int, *events: EventReport) -> RoundReport:
    report = round_report(number, accuracy=0.5 + number / 10)
    return replace(report, events=events, bytes_up=10, bytes_down=100, model_digest=f"d{number}")


def test_a_deployed_run_has_no_ground_truth_so_no_precision_or_recall() -> None:
    config = small_config(attack={"name": None, "q": 0}, deployment={"backend": "deployment"})
    reports = [
        _with_events(1, _event(0, "client-a", "outside_max_clique")),
        _with_events(
            2,
            _event(0, "client-a", "outside_max_clique"),
            _event(1, "client-b", "bad_signature"),
            _event(2, "client-c", "worker_error"),
            _event(2, "client-c", "worker_error"),
        ),
    ]
    summary = summarize(config, RUN_ID, reports)
    assert summary == RunSummary(
        run_id=RUN_ID,
        backend="deployment",
        rounds=2,
        final_accuracy=0.7,
        flagged=["client-a"],
        refused_replies={"bad_signature": 1, "worker_error": 2},
        adversaries=[],
        precision=None,
        recall=None,
        bytes_up=20,
        bytes_down=200,
        model_digest="d2",
    )
    assert set(summary.to_dict()) == DEPLOYED_KEYS


def test_a_simulated_run_is_scored_against_its_red_team_with_every_key_of_both_kinds() -> None:
    config = small_config()
    roster = simulated_roster(RUN_ID, config.assignment.num_workers)
    liar, *others = sorted(adversaries(config))
    honest = next(w for w in range(config.assignment.num_workers) if w not in adversaries(config))
    flags = [_event(w, roster[w].client_id, "majority_minority") for w in (liar, honest)]
    summary = summarize(config, RUN_ID, [_with_events(1, *flags)])
    assert summary.backend == "simulation"
    assert summary.adversaries == sorted(roster[w].client_id for w in adversaries(config))
    assert summary.flagged == sorted(roster[w].client_id for w in (liar, honest))
    assert (summary.precision, summary.recall) == (0.5, 1 / (1 + len(others)))
    stored = summary.to_dict()
    assert set(stored) == DEPLOYED_KEYS and set(stored) >= SIMULATED_KEYS
    assert stored["refused_replies"] == {}


def test_a_simulated_run_without_flags_or_adversaries_scores_one_by_convention() -> None:
    config = small_config(attack={"name": None, "q": 0})
    summary = summarize(config, RUN_ID, [])
    assert (summary.precision, summary.recall) == (1.0, 1.0)
    assert (summary.rounds, summary.final_accuracy, summary.model_digest) == (0, 0.0, "")
