from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
import torch

from phalanx.channel import Downlink
from phalanx.config import RunConfig
from phalanx.event_kinds import EventKind
from phalanx.exchange import Exchange
from phalanx.plan import adversaries
from phalanx.replies import Reply, Task
from phalanx.roster import simulated_roster
from phalanx.runs import build_coordinator, execute_run, summarize
from phalanx_clients.inprocess import InProcessTransport, Tamper
from tests.support.configs import small_config
from tests.support.coordinator_runs import RUN_ID, FakeSink, run, run_interrupted, transport
from tests.support.signed_replies import resigned


def test_weak_attack_flags_every_adversary_and_no_honest_worker() -> None:
    config = small_config()
    sink = run(config)
    truth = adversaries(config)
    assert len(truth) == 2
    for report in sink.reports:
        assert set(report.flagged) == truth
        assert not report.rejected
        # The round's agreement graph is recorded with it: the liars outside the clique.
        record = report.agreement
        assert record is not None and record.rule == "unique_clique"
        assert record.replied == tuple(range(config.assignment.num_workers))
        assert set(record.flagged) == truth
        assert record.outside_max_cliques == (tuple(sorted(truth)),)
        assert record.conflicts and all(truth & {e.a, e.b} for e in record.conflicts)
        # Without the systems model nothing timed the replies: no response times.
        assert report.responses == ()
    summary = summarize(config, RUN_ID, sink.reports)
    assert summary.precision == 1.0 and summary.recall == 1.0
    assert summary.rounds == 3


def test_training_improves_accuracy_under_attack() -> None:
    config = small_config(rounds=15)
    sink = run(config)
    assert sink.reports[-1].accuracy > sink.reports[0].accuracy
    assert sink.reports[-1].accuracy > 0.6


def test_resume_from_checkpoint_reaches_the_same_model_digest() -> None:
    config = small_config(rounds=4)
    straight = run(config)
    first, resumed = run_interrupted(config, stop_after=2)
    assert [r.round for r in first.reports] == [1, 2]
    assert [r.round for r in resumed.reports] == [3, 4]
    assert resumed.reports[-1].model_digest == straight.reports[-1].model_digest


def _tamper_worker(victim: int, change: Callable[[Reply], Reply]) -> Tamper:
    def tamper(reply: Reply) -> Reply:
        return change(reply) if reply.worker == victim else reply

    return tamper


def _nan_payload(reply: Reply) -> Reply:
    payload = torch.frombuffer(bytearray(reply.payloads[0]), dtype=torch.float32).clone()
    payload[0] = float("nan")
    return resigned(reply, payloads=(payload.numpy().tobytes(), *reply.payloads[1:]))


BAD_REPLIES: dict[str, Callable[[Reply], Reply]] = {
    "malformed_reply": lambda r: dataclasses.replace(r, payloads=(b"garbage", *r.payloads[1:])),
    "bad_shape": lambda r: resigned(r, payloads=(r.payloads[0] + b"\0\0\0\0", *r.payloads[1:])),
    "non_finite": _nan_payload,
    "bad_signature": lambda r: dataclasses.replace(r, signature=r.signature[:-4] + b"abcd"),
    "stale_round": lambda r: resigned(r, round=r.round - 1),
    "wrong_nonce": lambda r: resigned(r, nonce="0" * 32),
    "unassigned_file": lambda r: resigned(r, files=(999, *r.files[1:])),
}


@pytest.mark.parametrize("kind", sorted(BAD_REPLIES))
def test_bad_reply_is_rejected_recorded_and_the_round_goes_on(kind: str) -> None:
    config = small_config(rounds=2, attack={"name": None, "q": 0})
    honest_victim = 4
    sink = run(config, tamper=_tamper_worker(honest_victim, BAD_REPLIES[kind]))
    for report in sink.reports:
        assert report.rejected == (honest_victim,)
        kinds = [e.kind for e in report.events if e.worker == honest_victim]
        assert kinds == [kind]
        assert report.events[0].evidence["reason"]
        assert not report.flagged
        assert report.agreement is not None and report.agreement.conflicts == ()
        assert honest_victim not in report.agreement.replied  # refused before comparing
        assert report.metrics["accepted_files"] == 7  # every file has other honest replicas
    assert sink.reports[-1].accuracy > 0.0


def test_a_payload_another_worker_sent_for_another_file_still_fails_its_digest() -> None:
    # The coordinator hashes each distinct payload once; bytes it has seen under one
    # digest must not pass under another.
    config = small_config(rounds=1, attack={"name": None, "q": 0})
    victim = 6  # the last of 7 workers: its payloads were hashed in earlier replies
    swapped = _tamper_worker(
        victim,
        lambda r: dataclasses.replace(r, payloads=(r.payloads[1], r.payloads[0], *r.payloads[2:])),
    )
    (report,) = run(config, tamper=swapped).reports
    assert report.rejected == (victim,)
    (event,) = [e for e in report.events if e.worker == victim]
    assert event.kind == "malformed_reply"
    assert "does not match digest" in event.evidence["reason"]


CODEC = {"enabled": True, "rd_lambda": 0.1}


def test_codec_keeps_honest_replicas_byte_identical_and_cuts_the_uplink() -> None:
    plain = run(small_config(rounds=3, detection={"mode": "exact"}))
    coded = run(small_config(rounds=3, detection={"mode": "exact"}, codec=CODEC))
    truth = adversaries(small_config())
    for report in coded.reports:
        assert set(report.flagged) == truth  # exact digests: honest replicas agree byte for byte
        assert not report.rejected
    up_plain = sum(r.bytes_up for r in plain.reports)
    up_coded = sum(r.bytes_up for r in coded.reports)
    assert up_coded < up_plain / 4
    # Later rounds send a compressed delta instead of the full model.
    assert coded.reports[-1].bytes_down < plain.reports[-1].bytes_down / 4


def test_coordinator_and_every_worker_end_with_the_same_model() -> None:
    config = small_config(rounds=3, codec=CODEC)
    t = transport(config)
    coordinator = build_coordinator(config, RUN_ID, t, FakeSink())
    coordinator.run()
    final = coordinator.channel.downlink()  # the last round's broadcast, not yet sent
    assert final.kind == "delta"
    for worker in t.workers.values():
        assert worker.replica.model is not None
        assert worker.replica.model.digest() == final.base  # in step after every round
        params = worker.replica.apply(final)
        assert torch.equal(params, coordinator.params)
        assert worker.replica.model.digest() == final.target


def test_a_worker_that_lost_its_state_gets_a_sync_and_takes_part() -> None:
    config = small_config(rounds=3, codec=CODEC)
    t = transport(config)
    forgetful = t.workers[5]

    class ForgettingTransport:
        """Wipes one worker's model before round 3 (a restarted node)."""

        def exchange(self, tasks: list[Task], downlink: Downlink) -> Exchange:
            if tasks[0].round == 3 and downlink.kind == "delta":
                forgetful.replica.model = None
            return t.exchange(tasks, downlink)

    sink = FakeSink()
    execute_run(config, run_id=RUN_ID, sink=sink, transport=ForgettingTransport())
    third = sink.reports[2]
    assert not third.rejected
    assert set(third.flagged) == adversaries(config)
    assert third.bytes_down > sink.reports[1].bytes_down  # the sync carried the full state


def test_resume_with_the_codec_reaches_the_same_model_digest() -> None:
    config = small_config(rounds=4, codec=CODEC)
    straight = run(config)
    _, resumed = run_interrupted(config, stop_after=2)  # fresh workers sync once, then follow
    assert resumed.reports[-1].model_digest == straight.reports[-1].model_digest


def r1_config(**overrides: object) -> RunConfig:
    """r = 1, seven workers, two of them sending reversed gradients."""
    base: dict[str, object] = {
        "assignment": {"scheme": "none", "num_workers": 7, "r": 1},
        "attack": {"name": "reversed_gradient", "q": 2},
        "aggregation": {"rule": "median", "f": 3},
    }
    return small_config(**{**base, **overrides})


def test_the_rule_tolerates_fewer_byzantine_inputs_once_flagged_workers_are_out() -> None:
    # f = 3 needs 7 inputs for the median; flagging the two outliers leaves 5, so the
    # coordinator hands the rule f = 2 instead of failing the round.
    sink = run(r1_config())
    assert all(set(r.flagged) == adversaries(r1_config()) for r in sink.reports)
    assert {r.metrics["f_used"] for r in sink.reports} == {2.0}
    assert {r.metrics["accepted_files"] for r in sink.reports} == {5.0}


def test_outlier_screening_can_be_switched_off() -> None:
    config = r1_config(detection={"outlier_threshold": None})
    sink = run(config)
    assert all(r.flagged == () for r in sink.reports)
    assert {r.metrics["f_used"] for r in sink.reports} == {3.0}


def test_a_flagged_worker_gets_no_work_for_the_configured_rounds_even_across_a_resume() -> None:
    config = small_config(rounds=5, detection={"exclude_flagged_for": 2})
    truth = adversaries(config)
    sink = run(config)
    # Flagged in round 1, benched in 2 and 3, back (and flagged again) in 4, benched in 5.
    assert [set(r.flagged) for r in sink.reports] == [truth, set(), set(), truth, set()]
    assert [r.metrics["benched_workers"] for r in sink.reports] == [0.0, 2.0, 2.0, 0.0, 2.0]
    assert sink.reports[1].bytes_up < sink.reports[0].bytes_up

    _, resumed = run_interrupted(config, stop_after=2)
    assert [r.metrics["benched_workers"] for r in resumed.reports] == [2.0, 0.0, 2.0]
    assert resumed.reports[-1].model_digest == sink.reports[-1].model_digest


# --------------------------------------------------------------- honest outcomes


def _overflowing(reply: Reply) -> Reply:
    """A well-signed reply whose every update holds 3e38: finite, but two overflow a mean."""
    huge = torch.full((len(reply.payloads[0]) // 4,), 3.0e38).numpy().tobytes()
    return resigned(reply, payloads=tuple(huge for _ in reply.payloads))


def _tamper_workers(victims: set[int], change: Callable[[Reply], Reply]) -> Tamper:
    def tamper(reply: Reply) -> Reply:
        return change(reply) if reply.worker in victims else reply

    return tamper


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_colluders_whose_updates_overflow_the_mean_are_flagged_and_no_honest_worker_is(
    optimizer: str,
) -> None:
    config = small_config(
        rounds=3,
        assignment={"scheme": "none", "num_workers": 7, "r": 1},
        attack={"name": "constant", "q": 2, "params": {"value": 3.0e38}},
        aggregation={"rule": "mean", "f": 0},
        training={"optimizer": optimizer, "server_lr": 0.01},
        # Screening off: the overflow's trace is what this tests. With it on, the r = 1
        # score leaves both out as outliers first (the next test).
        detection={"outlier_threshold": None},
    )
    truth = adversaries(config)
    sink = run(config)
    for report in sink.reports:
        assert set(report.flagged) == truth
        assert report.rejected == ()
        assert {(e.worker, e.kind, e.severity) for e in report.events} == {
            (w, "overflow", "high") for w in truth
        }
        assert report.metrics["update_applied"] == 1.0
        assert report.metrics["accepted_files"] == 5.0
        assert torch.isfinite(torch.tensor(report.loss))
    evidence = sink.reports[0].events[0].evidence
    assert "L2 norm" in evidence["summary"] and evidence["norm"] > 1e38
    summary = summarize(config, RUN_ID, sink.reports)
    assert summary.precision == 1.0 and summary.recall == 1.0


def test_r1_screening_leaves_out_colluders_sending_one_huge_update_before_the_mean() -> None:
    """Could fail with a score that lets identical colluders shield one another.

    The nearest-neighbour score with f = 0 counted each colluder as the other's close
    neighbour; from the coordinate-wise median both are far, whatever f.
    """
    config = small_config(
        rounds=2,
        assignment={"scheme": "none", "num_workers": 7, "r": 1},
        attack={"name": "constant", "q": 2, "params": {"value": 3.0e38}},
        aggregation={"rule": "mean", "f": 0},
    )
    truth = adversaries(config)
    for report in run(config).reports:
        assert {(e.worker, e.kind, e.severity) for e in report.events} == {
            (w, "outlier", "low") for w in truth
        }
        assert report.metrics["accepted_files"] == 5.0


def test_at_r3_every_worker_behind_an_overflowing_file_is_named() -> None:
    config = small_config(
        rounds=2,
        assignment={"scheme": "groups", "num_workers": 6, "r": 3, "relabel": False},
        attack={"name": None, "q": 0},
        detection={"mode": "exact"},
    )
    from phalanx.plan import base_assignment

    colluders = set(base_assignment(config).files[0])  # a whole group: nobody disagrees
    sink = run(config, tamper=_tamper_workers(colluders, _overflowing))
    for report in sink.reports:
        assert set(report.flagged) == colluders
        assert {e.kind for e in report.events} == {"overflow"}
        assert report.metrics["update_applied"] == 1.0
        assert torch.isfinite(torch.tensor(report.loss))


def _with_nan_pixels(config: RunConfig, workers: set[int] | None = None) -> InProcessTransport:
    t = transport(config)
    for index, worker in t.workers.items():
        if workers is None or index in workers:
            x = worker.train_set.x.clone()
            x[:, :, 0, 0] = float("nan")
            worker.train_set = dataclasses.replace(worker.train_set, x=x)
    return t


def test_when_most_workers_fail_alike_the_run_fails_with_that_one_line() -> None:
    from phalanx.faults import RunFailedError

    config = small_config(rounds=2, attack={"name": None, "q": 0})
    sink = FakeSink()
    with pytest.raises(RunFailedError) as failure:
        execute_run(config, run_id=RUN_ID, sink=sink, transport=_with_nan_pixels(config))
    message = str(failure.value)
    assert message.startswith("round 1: 7 of 7 workers failed with the same error: ")
    assert "NonFiniteUpdateError" in message and "\n" not in message
    assert sink.reports == []  # nothing was applied, nobody was blamed


def test_a_worker_that_fails_on_its_own_data_is_a_fault_not_a_liar() -> None:
    config = small_config(rounds=2, attack={"name": None, "q": 0})
    sink = FakeSink()
    broken = 3
    execute_run(config, run_id=RUN_ID, sink=sink, transport=_with_nan_pixels(config, {broken}))
    for report in sink.reports:
        assert report.flagged == ()
        assert report.rejected == (broken,)
        (event,) = report.events
        assert (event.worker, event.kind, event.severity) == (broken, "worker_error", "low")
        assert event.evidence["reason"].startswith("NonFiniteUpdateError: ")
        assert report.metrics["update_applied"] == 1.0


@pytest.mark.parametrize(("rounds", "failed_at"), [(5, 3), (2, 2)])
def test_rounds_that_apply_no_update_fail_the_run(rounds: int, failed_at: int) -> None:
    from phalanx.faults import RunFailedError

    config = small_config(rounds=rounds, attack={"name": None, "q": 0})
    sink = FakeSink()
    with pytest.raises(RunFailedError, match=f"no update was applied in rounds 1 to {failed_at}"):
        execute_run(
            config, run_id=RUN_ID, sink=sink, transport=transport(config, lambda reply: None)
        )
    assert [r.round for r in sink.reports] == list(range(1, failed_at + 1))  # recorded first
    assert {r.metrics["update_applied"] for r in sink.reports} == {0.0}
    assert len({r.model_digest for r in sink.reports}) == 1  # the model never moved


def test_an_idle_round_between_good_ones_does_not_fail_the_run() -> None:
    config = small_config(rounds=4, attack={"name": None, "q": 0})
    silent_round = 2

    class SilentInRound2:
        def __init__(self) -> None:
            self.inner = transport(config)

        def exchange(self, tasks: list[Task], downlink: Downlink) -> Exchange:
            exchange = self.inner.exchange(tasks, downlink)
            if tasks[0].round == silent_round:
                return dataclasses.replace(exchange, replies=())
            return exchange

    sink = FakeSink()
    execute_run(config, run_id=RUN_ID, sink=sink, transport=SilentInRound2())
    assert [r.metrics["update_applied"] for r in sink.reports] == [1.0, 0.0, 1.0, 1.0]


@pytest.mark.parametrize(
    "change",
    [
        {"node_id": -1},
        {"node_id": 2**64},
        {"files": (True,)},
        {"round": -5},
    ],
    ids=["negative-node-id", "node-id-beyond-64-bits", "bool-file-id", "negative-round"],
)
def test_reply_fields_that_cannot_even_be_signed_are_refused_and_the_run_goes_on(
    change: dict[str, object],
) -> None:
    config = small_config(rounds=2, attack={"name": None, "q": 0})
    victim = 2
    sink = run(config, tamper=_tamper_worker(victim, lambda r: dataclasses.replace(r, **change)))
    assert [r.round for r in sink.reports] == [1, 2]
    for report in sink.reports:
        assert report.rejected == (victim,)
        (event,) = report.events
        assert event.worker == victim and event.severity == "high"
        assert event.kind in {"malformed_reply", "stale_round", "bad_signature"}


# --------------------------------------------------------------- evidence across rounds


def colluders_config() -> RunConfig:
    """Three colluders on STS(15) who lie only where they hold a file's majority: they tie."""
    return small_config(
        rounds=3,
        assignment={"scheme": "bibd", "num_workers": 15, "r": 3},
        attack={"q": 3, "strategy": "only_majorities", "selection": "strong"},
        detection={"max_adversaries": 3},
    )


def proven(sink: FakeSink) -> dict[int, int]:
    return {
        e.worker: r.round
        for r in sink.reports
        for e in r.events
        if e.kind == EventKind.DISPUTES_ACROSS_ROUNDS
    }


def test_by_default_the_rule_tolerates_the_files_unproven_liars_could_have_supplied() -> None:
    # STS(7), at most 3 liars: 3 of them hold together at most one file, whatever three.
    honest = run(small_config(rounds=2, attack={"name": None, "q": 0}))
    assert [(r.metrics["f_wanted"], r.metrics["f_used"]) for r in honest.reports] == [(1, 1)] * 2
    # Two weak liars are proven in round 1: one liar left, and only the files where the
    # two hold a majority rest on a single supporter that liar could be.
    attacked = run(small_config(rounds=2))
    assert [r.metrics["f_wanted"] for r in attacked.reports] == [1, 1]
    assert set(attacked.reports[0].flagged) == adversaries(small_config())
    # A fixed f is used as it is; the mean, which tolerates nobody, is never said to.
    fixed = run(small_config(rounds=1, attack={"name": None, "q": 0}, aggregation={"f": 2}))
    assert fixed.reports[0].metrics["f_wanted"] == 2
    mean = run(small_config(rounds=1, attack={"name": None, "q": 0}, aggregation={"rule": "mean"}))
    assert (mean.reports[0].metrics["f_wanted"], mean.reports[0].metrics["f_used"]) == (0, 0)


def test_an_honest_worker_two_colluders_outvote_is_never_flagged() -> None:
    # Two colluders lie only on files where they hold the majority: everyone but the
    # honest third holder is the unique largest group (the Aspis rule flags that worker).
    config = small_config(
        rounds=4,
        assignment={"scheme": "bibd", "num_workers": 15, "r": 3},
        attack={"q": 2, "strategy": "only_majorities", "selection": "strong"},
    )
    sink = run(config)
    truth = adversaries(config)
    notices = [e for r in sink.reports for e in r.events if e.kind == EventKind.UNPROVEN_OUTSIDERS]
    assert notices, "the colluders never outvoted anybody: the test proves nothing"
    for report in sink.reports:
        assert set(report.flagged) <= truth
        record = report.agreement
        assert record is not None
        for notice in (e for e in report.events if e.kind == EventKind.UNPROVEN_OUTSIDERS):
            assert (notice.worker, notice.severity) == (None, "medium")
            assert not set(notice.evidence["suspects"]) & truth
            # The file they outvoted the suspect on keeps no value.
            left_out = {d["file"] for d in notice.evidence["left_out"]}
            assert left_out and left_out <= set(report.dropped_files)
            assert all(
                d.reason == "disputed" and len(set(d.holders) & truth) == 2
                for d in record.dropped
                if d.file in left_out
            )


def test_without_evidence_across_rounds_the_outvoted_worker_is_flagged_as_aspis_does() -> None:
    config = small_config(
        rounds=1,
        assignment={"scheme": "bibd", "num_workers": 15, "r": 3, "relabel": False},
        attack={"q": 2, "strategy": "only_majorities", "selection": "strong"},
        detection={"across_rounds": False},
    )
    (report,) = run(config).reports
    assert report.flagged and not set(report.flagged) & adversaries(config)
    assert {e.kind for e in report.events} == {EventKind.OUTSIDE_MAX_CLIQUE}


def test_colluders_who_tie_every_round_are_proven_across_rounds_even_after_a_resume() -> None:
    config = colluders_config()
    straight = run(config)
    truth = adversaries(config)
    assert set(proven(straight)) == truth
    assert all(set(r.flagged) <= truth for r in straight.reports)
    assert summarize(config, RUN_ID, straight.reports).recall == 1.0
    for report in straight.reports:
        record = report.agreement
        assert record is not None and record.num_dropped == len(report.dropped_files)
        # A round's own disputes count towards its proofs before it decides anything.
        by_now = {w for w, t in proven(straight).items() if t <= report.round}
        if by_now != truth:
            # Until they are proven, no round flags them on its own: the largest groups
            # tie, and each tie is a notice naming its suspects and what it left out.
            assert record.rule == "unanimity"
            (tie,) = [e for e in report.events if e.kind == EventKind.TIED_GROUPS]
            assert (tie.worker, tie.severity) == (None, "medium")
            assert truth <= set(tie.evidence["suspects"]) | set(report.flagged)
            assert {d["file"] for d in tie.evidence["left_out"]} <= set(report.dropped_files)
        else:
            # Once proven, their disagreements count against nobody: no tie, no suspect,
            # they alone are outside the one largest group, and never supply a value.
            # A proven liar is flagged again only in a round where it disagreed with anybody.
            assert record.rule == "unique_clique" and set(report.flagged) <= truth
            assert not [e for e in report.events if e.kind == EventKind.TIED_GROUPS]
            assert all(set(d.holders) <= truth for d in record.dropped)

    first, resumed = run_interrupted(config, stop_after=1)
    assert proven(first) | proven(resumed) == proven(straight)
    assert resumed.reports[-1].model_digest == straight.reports[-1].model_digest


def test_a_round_names_the_clients_it_heard_from_by_the_roster_not_by_the_reply() -> None:
    config = small_config(rounds=1, attack={"name": None, "q": 0})
    roster = {m.worker: m.client_id for m in simulated_roster(RUN_ID, 7)}

    def silence_3_and_forge_5(reply: Reply) -> Reply | None:
        if reply.worker == 3:
            return None
        if reply.worker == 5:  # claims worker 0's client: refused, yet heard from
            return dataclasses.replace(reply, client_id=roster[0])
        return reply

    (report,) = run(config, tamper=silence_3_and_forge_5).reports

    assert report.seen_clients == tuple(sorted(roster[w] for w in range(7) if w != 3))
