"""Red team: what the robust rule actually receives, and a round with fewer inputs than planned.

Two ways a run used to die in ``Coordinator._step`` with a ``ValueError`` out of the rule:

* ``aggregation.options`` that fix a count (``m`` of Multi-Krum, ``groups`` of the
  median of means) equal to the files of a round: one worker whose reply is lost,
  refused or flagged leaves fewer accepted updates than that count, and the rule
  refuses to run. A single Byzantine (or merely silent) worker stopped the run.
* ``aggregation.pre = "bucketing"``: the rule aggregates ``ceil(n / s)`` buckets, not
  ``n`` updates, but the config check and the coordinator's choice of ``f`` counted
  ``n``; ``krum`` with ``f = 1`` after ``s = 2`` over 7 files passed the config and
  failed round 1 with no adversary at all.

The config must refuse what no full round can aggregate, and a round left with fewer
inputs than planned lowers the rule's count to them, as it lowers ``f``: it never
crashes. Before the fix, every test below fails with that ``ValueError``
(or, for the config tests, because ``RunConfig`` accepts the config).
"""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError

from phalanx.breakdown import fitted_options, largest_f, min_inputs, rule_inputs
from phalanx.config import RunConfig
from phalanx.data import load_dataset
from phalanx.replies import Reply
from phalanx.reports import RoundReport
from phalanx.roster import simulated_roster
from phalanx.runs import execute_run
from phalanx_clients.inprocess import InProcessTransport, Tamper
from phalanx_clients.worker import Worker

RUN_ID = "redteam-aggregation-inputs"


def config_of(**overrides: object) -> RunConfig:
    """Seven honest workers on digits with an MLP, each on its own file (``r = 1``)."""
    base: dict[str, object] = {
        "name": "redteam",
        "seed": 3,
        "rounds": 2,
        "data": {"dataset": "digits", "model": "mlp", "samples_per_file": 16, "eval_samples": 100},
        "assignment": {"scheme": "none", "num_workers": 7, "r": 1},
        "training": {"optimizer": "adam", "server_lr": 0.01},
    }
    base.update(overrides)
    return RunConfig.model_validate(base)


class MemorySink:
    """Keeps the finished rounds (a test double of the database)."""

    def __init__(self) -> None:
        self.reports: list[RoundReport] = []

    def round_finished(self, report: RoundReport, checkpoint: bytes) -> None:
        self.reports.append(report)


def run(config: RunConfig, tamper: Tamper | None = None) -> MemorySink:
    train = load_dataset(config.data.dataset, "train")
    workers = {
        ident.worker: Worker(
            config=config,
            train_set=train,
            client_id=ident.client_id,
            private_key=ident.private_key,
        )
        for ident in simulated_roster(RUN_ID, config.assignment.num_workers)
    }
    sink = MemorySink()
    execute_run(
        config, run_id=RUN_ID, sink=sink, transport=InProcessTransport(workers, tamper=tamper)
    )
    return sink


def silent(*workers: int) -> Tamper:
    """The replies of ``workers`` never arrive."""

    def drop(reply: Reply) -> Reply | None:
        return None if reply.worker in workers else reply

    return drop


def forged(worker: int) -> Tamper:
    """``worker`` sends a reply whose signature does not verify."""

    def forge(reply: Reply) -> Reply:
        if reply.worker != worker:
            return reply
        return dataclasses.replace(reply, signature=reply.signature[:-4] + b"abcd")

    return forge


@pytest.mark.parametrize(
    "aggregation",
    [
        {"rule": "multi_krum", "f": 0, "options": {"m": 7}},
        {"rule": "median_of_means", "f": 0, "options": {"groups": 7}},
    ],
    ids=["multi_krum-m", "median_of_means-groups"],
)
@pytest.mark.parametrize("misbehaviour", [silent, forged], ids=["silent", "forged"])
def test_one_worker_short_of_the_rules_count_lowers_the_count_and_the_run_goes_on(
    aggregation: dict[str, object], misbehaviour: object
) -> None:
    config = config_of(aggregation=aggregation)
    assert callable(misbehaviour)
    sink = run(config, misbehaviour(4))
    assert [r.round for r in sink.reports] == [1, 2]
    for report in sink.reports:
        assert report.metrics["accepted_files"] == 6.0
        assert report.metrics["update_applied"] == 1.0
        assert report.metrics["f_used"] == 0.0


def test_the_rules_count_is_met_by_every_worker_replying() -> None:
    # The same config as above with nobody missing: the count is honoured, the model moves.
    sink = run(config_of(aggregation={"rule": "multi_krum", "options": {"m": 7}}))
    assert {r.metrics["update_applied"] for r in sink.reports} == {1.0}


def test_krum_after_bucketing_lowers_f_for_the_buckets_it_receives() -> None:
    # 10 updates in buckets of 2 give Krum 5 rows: f = 1 holds. Two silent workers leave
    # 8 updates, 4 buckets: Krum can tolerate f = 0 of them, not 1.
    config = config_of(
        assignment={"scheme": "none", "num_workers": 10, "r": 1},
        aggregation={"rule": "krum", "f": 1, "pre": "bucketing"},
    )
    sink = run(config, silent(8, 9))
    assert [r.round for r in sink.reports] == [1, 2]
    assert {r.metrics["update_applied"] for r in sink.reports} == {1.0}
    assert {r.metrics["f_used"] for r in sink.reports} == {0.0}


@pytest.mark.parametrize(
    ("aggregation", "needed"),
    [
        ({"rule": "krum", "f": 1, "pre": "bucketing", "pre_options": {"s": 2}}, "at least 5"),
        ({"rule": "median", "f": 1, "pre": "bucketing", "pre_options": {"s": 4}}, "at least 3"),
        ({"rule": "multi_krum", "options": {"m": 8}}, "at least 8"),
        ({"rule": "median_of_means", "options": {"groups": 8}}, "at least 8"),
    ],
)
def test_a_config_whose_rule_cannot_get_enough_inputs_is_refused_up_front(
    aggregation: dict[str, object], needed: str
) -> None:
    with pytest.raises(ValidationError, match=needed):
        config_of(aggregation=aggregation)


def test_bucketing_divides_the_rows_the_rule_receives() -> None:
    assert rule_inputs(7, None, {}) == 7
    assert rule_inputs(7, "nnm", {}) == 7
    assert rule_inputs(7, "bucketing", {}) == 4  # the default bucket size is 2
    assert rule_inputs(7, "bucketing", {"s": 3}) == 3
    assert rule_inputs(0, "bucketing", {"s": 3}) == 0


def test_counts_in_the_options_bound_the_inputs_and_f() -> None:
    assert min_inputs("multi_krum", 1, {"m": 9}) == 9
    assert min_inputs("multi_krum", 3, {"m": 2}) == 9
    assert largest_f("multi_krum", 8, {"m": 9}) is None
    assert largest_f("multi_krum", 9, {"m": 9}) == 3
    assert min_inputs("median_of_means", 0, {"groups": 5}) == 5
    assert largest_f("median_of_means", 4, {"groups": 5}) is None
    assert largest_f("median_of_means", 9, {"groups": 5}) == 2  # needs 2 f < groups


def test_a_count_above_the_inputs_of_a_round_is_lowered_to_them() -> None:
    assert fitted_options("multi_krum", 6, {"m": 7}) == {"m": 6}
    assert fitted_options("multi_krum", 9, {"m": 7}) == {"m": 7}
    assert fitted_options("median_of_means", 4, {"groups": 7}) == {"groups": 4}
    assert fitted_options("geometric_median", 2, {"max_iter": 7}) == {"max_iter": 7}
