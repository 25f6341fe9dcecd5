"""The round loop with the systems model: rounds close by the policy, slow is not lying."""

from __future__ import annotations

from collections import Counter

import pytest
from pydantic import ValidationError

from phalanx.collect.config import CollectConfig
from phalanx.config import RunConfig
from phalanx.plan import adversaries, base_assignment
from phalanx.reports import RoundReport
from phalanx.response_times import summarize
from phalanx.roster import simulated_identity
from phalanx.systems.profiles import draw_profiles
from tests.support.configs import small_config
from tests.support.coordinator_runs import RUN_ID, run, run_interrupted
from tests.support.signed_replies import overflowing

SLOW = {"enabled": True, "straggler_fraction": 0.15, "straggler_slowdown": 50.0}


def slow_honest(rounds: int, **collect: object) -> RunConfig:
    """Honest workers, one of them a persistent straggler, rounds closed by ``collect``."""
    return small_config(rounds=rounds, attack={"name": None, "q": 0}, systems=SLOW, collect=collect)


def stragglers(config: RunConfig) -> set[int]:
    profiles = draw_profiles(config.systems, config.assignment.num_workers, config.seed)
    return {w for w, p in enumerate(profiles) if p.straggler}


def test_fastest_k_closes_without_the_straggler_who_is_late_and_never_flagged() -> None:
    config = slow_honest(3, policy="fastest_k", k=6)
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
    config = slow_honest(3, policy="fastest_k", k=6)
    straight = run(config)
    first, resumed = run_interrupted(config, stop_after=1)
    # The resumed round also sends the full model to workers that lost track of it, so
    # its download (and clock) is a little longer: the clock goes on, it does not restart.
    resumed_clock = [r.metrics["simulated_total_s"] for r in first.reports + resumed.reports]
    straight_clock = [r.metrics["simulated_total_s"] for r in straight.reports]
    assert resumed_clock == pytest.approx(straight_clock, rel=1e-3)
    assert resumed_clock[0] == straight_clock[0]
    assert resumed.reports[-1].model_digest == straight.reports[-1].model_digest


def given_work(report: RoundReport) -> set[int]:
    assert report.agreement is not None
    return set(report.agreement.replied)


def test_the_bandit_learns_to_leave_the_straggler_out_and_never_flags_it() -> None:
    config = slow_honest(8, policy="bandit", k=5)
    (slow,) = stragglers(config)
    sink = run(config)
    assert all(r.metrics["dispatched_workers"] == 5 for r in sink.reports)
    assert not any(r.flagged for r in sink.reports)
    chosen = Counter(w for r in sink.reports for w in given_work(r))
    assert chosen[slow] < min(n for w, n in chosen.items() if w != slow)
    waited = run(config.model_copy(update={"collect": CollectConfig()}))
    assert (
        sink.reports[-1].metrics["simulated_total_s"]
        < waited.reports[-1].metrics["simulated_total_s"]
    )


def adaptive_config(**training: object) -> RunConfig:
    return small_config(
        rounds=6,
        attack={"name": None, "q": 0},
        systems=SLOW,
        training=training,
        collect={"policy": "adaptive_k", "k": 3, "burn_in": 0},
    )


def test_adaptive_k_waits_for_more_workers_once_the_updates_turn_against_each_other() -> None:
    # Plain SGD at a step far too long overshoots every round: successive updates point
    # against each other, the Pflug sum is negative at once, and k grows round by round.
    overshooting = run(adaptive_config(optimizer="sgd", server_lr=5.0, momentum=0.0))
    ks = [r.metrics["collect_k"] for r in overshooting.reports]
    assert ks == sorted(ks) and ks[0] == 3 and ks[-1] > 3
    steady = run(adaptive_config())
    assert [r.metrics["collect_k"] for r in steady.reports] == [3.0] * 6


def lazy_groups(rounds: int, c: float) -> RunConfig:
    """Four groups of two workers, G-CADA choosing lazily which it waits for."""
    return small_config(
        rounds=rounds,
        attack={"name": None, "q": 0},
        systems={"enabled": True},
        assignment={"scheme": "groups", "num_workers": 8, "r": 2},
        collect={
            "policy": "group_fastest",
            "group_selection": "lazy",
            "lazy_c": c,
            "max_staleness": 3,
        },
    )


def test_lazy_groups_skip_the_groups_that_barely_changed_and_reuse_their_last_update() -> None:
    sink = run(lazy_groups(8, c=1.0))
    selected = [r.metrics["lazy_groups_selected"] for r in sink.reports]
    stale = [r.metrics["stale_groups"] for r in sink.reports]
    assert selected[:2] == [4.0, 4.0]  # no group has two accepted updates yet
    assert min(selected) < 4  # then some group is left to its last update
    # Every group is in every round's aggregate, fresh or stale.
    assert [a + b for a, b in zip(selected, stale, strict=True)] == [4.0] * 8
    assert [r.metrics["dispatched_workers"] for r in sink.reports] == [2 * s for s in selected]
    assert all(r.flagged == () and r.rejected == () for r in sink.reports)
    assert sink.reports[-1].accuracy > sink.reports[0].accuracy + 0.3


def test_a_round_that_waits_for_no_group_steps_on_the_stale_updates_alone() -> None:
    # A laziness constant beyond any change: after two rounds every group is skipped
    # until its last upload is max_staleness (3) rounds old.
    sink = run(lazy_groups(6, c=1e6))
    assert [r.metrics["lazy_groups_selected"] for r in sink.reports] == [4, 4, 0, 0, 4, 0]
    idle = sink.reports[2]
    assert (idle.metrics["dispatched_workers"], idle.metrics["stale_groups"]) == (0, 4)
    assert idle.metrics["update_applied"] == 1.0 and idle.events == ()


@pytest.mark.parametrize(
    "config",
    [
        adaptive_config(optimizer="sgd", server_lr=5.0, momentum=0.0),
        slow_honest(5, policy="bandit", k=4),
        lazy_groups(6, c=1.0),
    ],
    ids=["adaptive_k", "bandit", "lazy_groups"],
)
def test_a_resumed_run_carries_what_its_policy_learned(config: RunConfig) -> None:
    straight = run(config)
    first, resumed = run_interrupted(config, stop_after=2)
    both = first.reports + resumed.reports
    assert [given_work(r) for r in both] == [given_work(r) for r in straight.reports]
    assert [r.metrics.get("collect_k") for r in both] == [
        r.metrics.get("collect_k") for r in straight.reports
    ]
    assert resumed.reports[-1].model_digest == straight.reports[-1].model_digest


def test_per_file_messages_count_the_files_a_straggler_finished_by_the_deadline() -> None:
    # The straggler computes a file in 0.8 s, the others in 0.016 s, after a download of
    # about half a second; its whole reply comes at about 3 s. A 2 s deadline sees its
    # first file when each file goes out on its own, nothing of it otherwise.
    def deadline(**collect: object) -> RunConfig:
        return small_config(
            rounds=1,
            attack={"name": None, "q": 0},
            systems=SLOW,
            collect={"policy": "deadline", "deadline_s": 2.0, **collect},
        )

    (slow,) = stragglers(deadline())
    (whole,) = run(deadline()).reports
    (split,) = run(deadline(messages="per_file")).reports
    assert slow not in given_work(whole) and whole.metrics["late_replies"] == 1
    # Its first file came in time: the worker is not late, only its later files are.
    assert slow in given_work(split) and split.metrics["late_replies"] == 0
    assert split.metrics["accepted_files"] == whole.metrics["accepted_files"] == 7
    assert split.flagged == whole.flagged == ()


def test_drop_compute_measures_then_cuts_the_straggler_s_files_and_never_flags_it() -> None:
    config = slow_honest(5, policy="all", drop_compute=True, warmup_rounds=2)
    sink = run(config)
    budgets = [r.metrics["compute_budget_s"] for r in sink.reports]
    assert budgets[:2] == [-1.0, -1.0] and budgets[2] > 0 and len(set(budgets[2:])) == 1
    cut = [r.metrics["files_cut"] for r in sink.reports]
    assert cut[:2] == [0.0, 0.0] and all(c == 3 for c in cut[2:])  # the straggler's three
    times = [r.metrics["simulated_s"] for r in sink.reports]
    assert max(times[2:]) < min(times[:2]) / 4  # the download alone is most of what is left
    assert not any(r.flagged for r in sink.reports)
    assert all(r.metrics["missing_replies"] == 0 for r in sink.reports)


def test_a_resumed_run_keeps_its_compute_budget() -> None:
    config = slow_honest(4, policy="all", drop_compute=True, warmup_rounds=2)
    straight = run(config)
    first, resumed = run_interrupted(config, stop_after=2)
    assert [r.metrics["compute_budget_s"] for r in first.reports + resumed.reports] == [
        r.metrics["compute_budget_s"] for r in straight.reports
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"collect": {"policy": "deadline", "deadline_s": 1.0}}, "set systems.enabled"),
        (
            {"collect": {"policy": "group_fastest", "group_selection": "lazy"}},
            "set systems.enabled",
        ),
        (
            {"deployment": {"backend": "deployment"}, "systems": {"enabled": True}},
            "a deployment has for real",
        ),
        ({"collect": {"messages": "per_file"}}, "per_file' needs compute times"),
        ({"collect": {"drop_compute": True}}, "drop_compute needs compute times"),
        ({"collect": {"drop_compute": 1}}, "drop_compute"),
        ({"collect": {"compute_budget_s": 2.0}}, "apply only with drop_compute"),
    ],
)
def test_collection_settings_a_run_cannot_honour_are_refused(
    change: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        RunConfig.model_validate({"attack": {"q": 0}, **change})


def test_a_lazy_round_counts_only_its_fresh_updates_as_accepted_files() -> None:
    # Rounds 3 and 4 wait for no group and step on the four stale updates alone. Before
    # the fix accepted_files said 4 there: stale updates were presented as accepted files.
    sink = run(lazy_groups(4, c=1e6))
    assert [r.metrics["accepted_files"] for r in sink.reports] == [4.0, 4.0, 0.0, 0.0]
    assert [r.metrics["stale_groups"] for r in sink.reports] == [0.0, 0.0, 4.0, 4.0]


def test_an_update_that_overflowed_never_stands_in_for_its_group() -> None:
    # Group 0's two workers send 3e38 everywhere; with server_lr 10 the mean overflows and
    # they are flagged in rounds 1 and 2. Before the fix their (accepted, then left out)
    # update was group 0's last, unchanged, so never waited for: rounds 3 and 4 stood in
    # with it, overflowed, dropped every stale update, and the model did not move while
    # stale_groups said 4, until max_staleness ran out. Nobody was flagged meanwhile.
    config = small_config(
        rounds=4,
        attack={"name": None, "q": 0},
        systems={"enabled": True},
        assignment={"scheme": "groups", "num_workers": 8, "r": 2, "relabel": False},
        aggregation={"rule": "mean", "f": 0},
        training={"server_lr": 10.0},
        collect={
            "policy": "group_fastest",
            "group_selection": "lazy",
            "lazy_c": 1e6,
            "max_staleness": 3,
        },
    )
    colluders = set(base_assignment(config).files[0])
    sink = run(config, tamper=overflowing(colluders))
    assert [set(r.flagged) for r in sink.reports] == [colluders] * 4
    assert all(r.metrics["update_applied"] == 1.0 for r in sink.reports)
    # Rounds 3 and 4 wait for group 0 alone, leave its update out, and step on the
    # other three groups' stale updates, which are not named a cause.
    late = sink.reports[2:]
    assert [r.metrics["lazy_groups_selected"] for r in late] == [1.0, 1.0]
    assert [r.metrics["stale_groups"] for r in late] == [3.0, 3.0]
    assert [r.metrics["accepted_files"] for r in late] == [0.0, 0.0]
