"""The round loop with the systems model: rounds close by the policy, slow is not lying."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from phalanx.config import RunConfig
from phalanx.plan import adversaries
from phalanx.response_times import summarize
from phalanx.roster import simulated_identity
from phalanx.systems.profiles import draw_profiles
from tests.support.configs import small_config
from tests.support.coordinator_runs import RUN_ID, run, run_interrupted

SLOW = {"enabled": True, "straggler_fraction": 0.15, "straggler_slowdown": 50.0}


def stragglers(config: RunConfig) -> set[int]:
    profiles = draw_profiles(config.systems, config.assignment.num_workers, config.seed)
    return {w for w, p in enumerate(profiles) if p.straggler}


def test_fastest_k_closes_without_the_straggler_who_is_late_and_never_flagged() -> None:
    config = small_config(
        rounds=3,
        attack={"name": None, "q": 0},
        systems=SLOW,
        collect={"policy": "fastest_k", "k": 6},
    )
    (slow,) = stragglers(config)
    sink = run(config)
    assert [r.round for r in sink.reports] == [1, 2, 3]
    for report in sink.reports:
        assert report.flagged == () and report.rejected == ()
        assert report.metrics["late_replies"] == 1 and report.metrics["missing_replies"] == 0
        assert report.agreement is not None and slow not in report.agreement.replied
    times = [r.metrics["simulated_s"] for r in sink.reports]
    assert all(t > 0 for t in times)
    assert sink.reports[-1].metrics["simulated_total_s"] == pytest.approx(sum(times))
    # Every worker's response is kept with its round: the straggler's late, after the close.
    for report in sink.reports:
        by_worker = {r.worker: r for r in report.responses}
        assert sorted(by_worker) == list(range(config.assignment.num_workers))
        late = by_worker[slow]
        assert late.status == "late" and late.seconds is not None
        assert late.seconds > report.metrics["simulated_s"]
        assert late.client_id == simulated_identity(RUN_ID, slow).client_id
        others = [r for w, r in by_worker.items() if w != slow]
        assert all(r.status == "kept" and r.seconds is not None for r in others)
        assert max(r.seconds or 0.0 for r in others) <= report.metrics["simulated_s"]
        assert not any(e.worker == slow for e in report.events)
    # Three slow rounds of three: reported slow, apart from detection, which flagged nobody.
    run_times = summarize((r.round, response) for r in sink.reports for response in r.responses)
    ((straggler),) = run_times.slow
    assert (straggler.worker, straggler.late, straggler.missing) == (slow, 3, 0)


def test_waiting_for_everyone_takes_the_stragglers_time() -> None:
    fast = run(small_config(rounds=1, attack={"name": None, "q": 0}, systems={"enabled": True}))
    slow = run(small_config(rounds=1, attack={"name": None, "q": 0}, systems=SLOW))
    (quick,), (waited,) = fast.reports, slow.reports
    assert waited.metrics["late_replies"] == quick.metrics["late_replies"] == 0
    assert {r.status for r in waited.responses} == {r.status for r in quick.responses} == {"kept"}
    longest = max(waited.responses, key=lambda r: r.seconds or 0.0)
    assert longest.seconds == pytest.approx(waited.metrics["simulated_s"])
    # Links and the download are alike; the straggler's compute, 50 times slower, dominates.
    assert waited.metrics["simulated_s"] > 2 * quick.metrics["simulated_s"]


def test_a_quorum_still_outvotes_the_liar_while_the_straggler_is_left_behind() -> None:
    config = small_config(
        rounds=2,
        attack={"name": "reversed_gradient", "q": 1, "selection": "weak"},
        systems=SLOW,
        collect={"policy": "quorum", "m": 2},
    )
    liars = adversaries(config)
    sink = run(config)
    assert set(sink.reports[0].flagged) == liars
    assert not {w for r in sink.reports for w in r.flagged} & stragglers(config)
    # A liar that answers in time is flagged and on time: lying and slowness are apart.
    statuses = {r.worker: r.status for r in sink.reports[0].responses}
    assert {statuses[w] for w in liars} == {"kept"}


def test_a_resumed_run_keeps_its_simulated_clock() -> None:
    config = small_config(
        rounds=3,
        attack={"name": None, "q": 0},
        systems=SLOW,
        collect={"policy": "fastest_k", "k": 6},
    )
    straight = run(config)
    first, resumed = run_interrupted(config, stop_after=1)
    # The resumed round also sends the full model to workers that lost track of it, so
    # its download (and clock) is a little longer: the clock goes on, it does not restart.
    resumed_clock = [r.metrics["simulated_total_s"] for r in first.reports + resumed.reports]
    straight_clock = [r.metrics["simulated_total_s"] for r in straight.reports]
    assert resumed_clock == pytest.approx(straight_clock, rel=1e-3)
    assert resumed_clock[0] == straight_clock[0]
    assert resumed.reports[-1].model_digest == straight.reports[-1].model_digest


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"collect": {"policy": "deadline", "deadline_s": 1.0}}, "set systems.enabled"),
        (
            {"systems": {"enabled": True}, "collect": {"policy": "bandit", "k": 3}},
            "keeps state across rounds",
        ),
        (
            {"deployment": {"backend": "deployment"}, "systems": {"enabled": True}},
            "a deployment has for real",
        ),
    ],
)
def test_collection_settings_a_run_cannot_honour_are_refused(
    change: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        RunConfig.model_validate({"attack": {"q": 0}, **change})
